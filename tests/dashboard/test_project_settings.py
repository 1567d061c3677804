"""The Runs page's forecast settings panel: what a save changes, and what it tells the user."""

from __future__ import annotations

from typing import Any

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.dashboard.project_settings import changes_for, said, status_text
from scalewatch.server.domain.runs import Project
from scalewatch.server.ingest import PointRow


def _project(**defaults: Any) -> Project:
    return Project.model_validate({"id": 1, "name": "p", "created_at": "2026-01-01T00:00:00",
                                   **defaults})


def test_a_ticked_box_learns_from_the_project_and_an_unticked_one_clears() -> None:
    none = _project(fit_metric=None, noise_prior=None, b_prior=None)
    assert changes_for(none, None, ["b_prior"]) == {"b_prior": "project"}
    assert changes_for(none, None, []) == {}
    learned = _project(fit_metric=None, noise_prior="project", b_prior="project")
    assert changes_for(learned, None, ["noise_prior"]) == {"b_prior": None}
    assert changes_for(learned, None, ["noise_prior", "b_prior"]) == {}


def test_the_metric_is_set_or_back_to_automatic() -> None:
    auto = _project(fit_metric=None, noise_prior=None, b_prior=None)
    assert changes_for(auto, "val/acc", []) == {"fit_metric": "val/acc"}
    chosen = auto.model_copy(update={"fit_metric": "val/acc"})
    assert changes_for(chosen, "val/acc", []) == {}
    assert changes_for(chosen, None, []) == {"fit_metric": None}
    assert changes_for(chosen, "", []) == {"fit_metric": None}  # a cleared dropdown
    assert said({"fit_metric": None, "b_prior": "project"}) == "fitted metric automatic, B prior on"


def test_an_explicit_prior_stays_while_ticked_and_is_named() -> None:
    explicit = _project(fit_metric=None, noise_prior=[0.8, 0.05], b_prior=None)
    assert changes_for(explicit, None, ["noise_prior"]) == {}
    assert changes_for(explicit, None, []) == {"noise_prior": None}
    text = status_text(explicit, 2)
    assert "2 finished runs to learn from" in text
    assert "Explicit noise (rho mean, sd) prior set through the API: [0.8, 0.05]" in text
    assert "1 finished run to learn from" in status_text(explicit, 1)


def test_the_panel_says_which_forecast_width_applies() -> None:
    project = _project(fit_metric=None, noise_prior=None, b_prior=None)
    assert "a default width learned on public RL curves until 19 runs have finished (17 more " \
        "to go)" in status_text(project, 2)
    assert "(1 more to go)" in status_text(project, 18)
    for finished in (19, 40):
        assert "as wide as this project's finished runs needed" in status_text(project, finished)
        assert "more to go" not in status_text(project, finished)


def test_a_save_is_the_apis_patch(database_url: str) -> None:
    """Issue 37 item 3: the panel saves through `services.projects.update_project`, with the
    API's `ProjectPatch`: the same defaults stored and the same runs refitted as PATCH
    /api/v1/projects/{name} with the same change (SQLite and PostgreSQL)."""
    from tests.security.conftest import authed_app

    for authed in authed_app(database_url):
        c, store = authed.client, authed.app.state.store
        queued: dict[str, list[str]] = {}
        for project in ("by-api", "by-page"):
            own, _ = store.get_or_create_run(project, "own", fit_metric="val/acc")
            follows, _ = store.get_or_create_run(project, "follows")
            for run in (own, follows):
                store.ingest_points(run.id, [PointRow("val/acc", i, float(i + 1), 0.1, None)
                                             for i in range(5)])
            for item in store.claim_dirty_series("test", limit=100):
                store.finish_refit(item.series_id, "test", item.requested, None, False)
        api = c.patch("/api/v1/projects/by-api", headers=authed.h("write"),
                      json={"fit_metric": "val/acc", "b_prior": "project"})
        assert api.status_code == 200, api.text
        queued["by-api"] = sorted(store.get_run(i.run_id).name
                                  for i in store.claim_dirty_series("test", limit=100))
        c.post("/login", data={"token": authed.tokens["write"], "next": "/dashboard/"})
        r = dash_call(c, "runs-settings-msg", {
            "runs-settings-save.n_clicks": 1, "runs-project.value": "by-page",
            "runs-settings-metric.value": "val/acc", "runs-settings-priors.value": ["b_prior"],
            "runs-settings-saved.data": 0}, changed=["runs-settings-save.n_clicks"])  # fmt: skip
        assert r.status_code == 200 and "runs-settings-ok" in r.text, r.text
        queued["by-page"] = sorted(store.get_run(i.run_id).name
                                   for i in store.claim_dirty_series("test", limit=100))
        assert queued["by-api"] == queued["by-page"] == ["follows", "own"]  # own: its B
        by_api, by_page = store.get_project(name="by-api"), store.get_project(name="by-page")
        assert by_api is not None and by_page is not None
        assert (by_api.fit_metric, by_api.b_prior) == (by_page.fit_metric, by_page.b_prior) \
            == ("val/acc", "project")
