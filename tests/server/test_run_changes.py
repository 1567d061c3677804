"""Issue 37 item 3: what a change of a run or a project means is decided in the services
(`services.runs`, `services.projects`), not in the SQL store: PATCH merge rules, refit
triggers, which runs a project's defaults refit, and a run's fit context with its project's
defaults. The rules alone, then through the store on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from scalewatch.server.domain.changes import ProjectPatch, RunPatch
from scalewatch.server.domain.runs import FitContext, ProjectDefaults, RunSettings
from scalewatch.server.ingest import PointRow
from scalewatch.server.services import projects as project_changes
from scalewatch.server.services import runs as run_changes
from tests.support.records import a_run


def test_fit_settings_merge_key_by_key_and_refit() -> None:
    run = a_run(fit_settings={"warmup": 10.0, "r0": 0.1})
    change = run_changes.decide_run_change(
        run, {"fit_settings": {"warmup": None, "fit_until": 5.0}})
    assert change.fit_settings == {"r0": 0.1, "fit_until": 5.0}  # null reset warmup, r0 stays
    assert change.refit and change.written() == {"fit_settings"}


@pytest.mark.parametrize(("asked", "refit"), [
    ({"notes": "n"}, False),
    ({"tags": ["a"]}, False),
    ({"group": "g"}, False),
    ({"status": "failed"}, False),
    ({"status": "finished"}, True),  # a finished run's fit carries its hindcast
    ({"target_compute": 100.0}, True),
    ({"target_compute": None}, True),  # cleared: the fit predicts at the last compute again
    ({"fit_metric": "val/acc"}, True),
])
def test_which_changes_refit(asked: dict[str, Any], refit: bool) -> None:
    assert run_changes.decide_run_change(a_run(status="running"), asked).refit is refit


def test_what_a_change_leaves_alone() -> None:
    run = a_run(name="same", status="finished", notes="kept", config={"lr": 1})
    change = run_changes.decide_run_change(run, {
        "name": "same", "status": "finished", "notes": None, "config": None,
        "tags": ["x", "y", "x"], "id": 99, "project": "elsewhere"})  # fmt: skip
    # the same name is no rename; a null never clears notes or config; a finished run
    # finishing again refits nothing; what no PATCH may change is ignored
    assert change.written() == {"status", "tags"} and change.tags == ["x", "y"]
    assert change.status == "finished" and not change.refit


def test_a_patch_body_means_what_it_set() -> None:
    patch = RunPatch.model_validate({"fit_settings": {"warmup": None}, "notes": "n"})
    seen: list[dict[str, Any]] = []

    class Recorder:  # the store's side of `update_run`: hands over the run, keeps the change
        def update_run(self, run_id: int, decide: Any) -> Any:
            change = decide(a_run(id=run_id, fit_settings={"warmup": 3.0, "r0": 0.2}))
            seen.append(change.model_dump(include=change.written()))
            return None

    run_changes.patch_run(Recorder(), 7, patch)  # type: ignore[arg-type]
    assert seen == [{"fit_settings": {"r0": 0.2}, "notes": "n"}]


def test_which_runs_a_project_default_refits() -> None:
    own_metric = RunSettings(fit_metric="mine", fit_settings={})
    own_prior = RunSettings(fit_metric=None, fit_settings={"noise_prior": [0.5, 0.1]})
    follows = RunSettings(fit_metric=None, fit_settings={})
    refits = project_changes.refits_run
    assert not refits({"fit_metric"}, own_metric) and refits({"fit_metric"}, follows)
    assert not refits({"noise_prior"}, own_prior) and refits({"b_prior"}, own_prior)
    assert not refits(set(), follows)


def test_a_runs_own_prior_wins_over_its_projects() -> None:
    context = FitContext(
        run_id=1, project="p", name="r", fit_metric="m",
        fit_settings={"noise_prior": [0.5, 0.1]},
        project_defaults=ProjectDefaults(noise_prior="project", b_prior=(0.3, 0.5)))
    merged = run_changes.with_project_defaults(context)
    assert merged.fit_settings == {"noise_prior": [0.5, 0.1], "b_prior": [0.3, 0.5]}


def _drain(store: Any) -> None:
    """Mark every queued refit done, as a refitter that stored nothing would."""
    for item in store.claim_dirty_series("test", limit=100):
        store.finish_refit(item.series_id, "test", item.requested, None, False)
    assert store.refit_backlog()[0] == 0


def test_the_store_writes_the_decided_change(store: Any) -> None:
    run, _ = store.get_or_create_run("p", "r", fit_settings={"warmup": 10.0, "r0": 0.1})
    store.ingest_points(run.id, [PointRow("val_pass_rate", i, float(i + 1), 0.1, None)
                                 for i in range(5)])
    _drain(store)
    notes = run_changes.patch_run(store, run.id, RunPatch(notes="only words"))
    assert notes.notes == "only words" and store.refit_backlog()[0] == 0
    merged = run_changes.patch_run(
        store, run.id, RunPatch.model_validate({"fit_settings": {"warmup": None}}))
    assert merged.fit_settings == {"r0": 0.1} and store.get_run(run.id).fit_settings == {"r0": 0.1}
    assert store.refit_backlog()[0] == 1  # the fit metric's series, queued with the change


def test_project_defaults_refit_only_the_runs_that_follow_them(store: Any) -> None:
    mine, _ = store.get_or_create_run("p", "mine", fit_metric="val_pass_rate")
    follows, _ = store.get_or_create_run("p", "follows")
    for run in (mine, follows):
        store.ingest_points(run.id, [PointRow("val_pass_rate", i, float(i + 1), 0.1, None)
                                     for i in range(5)])
    _drain(store)
    project = project_changes.update_project(
        store, "p", ProjectPatch.model_validate({"fit_metric": "val_pass_rate"}))
    assert project.fit_metric == "val_pass_rate"
    queued = store.claim_dirty_series("test", limit=100)
    assert [item.run_id for item in queued] == [follows.id]
    # the fit context the refitter reads carries the project's prior default
    project_changes.update_project(store, "p", ProjectPatch(b_prior="project"))
    assert run_changes.fit_context(store, follows.id).fit_settings == {"b_prior": "project"}
