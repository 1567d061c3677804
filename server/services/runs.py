"""What a change of a run means, decided here rather than in the SQL store: which fields a
PATCH writes and how (fit settings merge key by key, a null resetting a knob; tags lose their
repeats), and which changes refit the run. The store locks the run, hands this module the run
as it is under the lock, and writes the `RunChange` it gets back.

Shared by the REST API (PATCH /runs/{id}), the MLflow-compatible API (status, params, tags)
and the dashboard (rename), so a write means the same wherever it is made. Also the fit
context's project defaults: a run's own prior settings win, its project's fill the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scalewatch.server.domain.changes import RunPatch
from scalewatch.server.domain.runs import FitContext, Run, RunChange
from scalewatch.server.store.base import FitStore, RunStore

# What a change may write; anything else it carries is ignored.
PATCHABLE = frozenset({
    "name", "status", "tags", "notes", "target_compute", "fit_metric", "fit_settings", "config",
    "group",
})
# Changes that never clear a field: a null leaves it as it is.
_KEPT_WHEN_NULL = ("status", "notes", "config")
# A project's defaults a run takes when its own fit settings leave them out.
PROJECT_PRIORS = ("noise_prior", "b_prior")


def merge_fit_settings(current: Mapping[str, Any], patch: Mapping[str, Any] | None
                       ) -> dict[str, Any]:
    """The run's fit settings after a PATCH of them: keys given replace, a null removes one
    (back to its default), keys left out stay."""
    merged = dict(current)
    for key, value in (patch or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def decide_run_change(run: Run, asked: Mapping[str, Any]) -> RunChange:
    """The change `asked` (PATCH fields) makes to `run`, fully decided: what is written, and
    whether the run is refitted (its fit settings, target or fit metric changed, or it has just
    finished: a finished run's fit carries its hindcast, fitting/hindcast.py)."""
    asked = {k: v for k, v in asked.items() if k in PATCHABLE}
    out: dict[str, Any] = {}
    refit = False
    if "name" in asked and asked["name"] != run.name:
        out["name"] = asked["name"]
    if "tags" in asked:
        out["tags"] = list(dict.fromkeys(asked["tags"] or []))
    if "fit_settings" in asked:
        out["fit_settings"] = merge_fit_settings(run.fit_settings, asked["fit_settings"])
        refit = True
    if asked.get("status") == "finished" and run.status != "finished":
        refit = True
    for key in _KEPT_WHEN_NULL:
        if asked.get(key) is not None:
            out[key] = asked[key]
    for key in ("target_compute", "fit_metric"):
        if key in asked:
            out[key] = asked[key]
            refit = True
    if "group" in asked:
        out["group"] = asked["group"]
    return RunChange(**out, refit=refit)


def update_run(
    store: RunStore, run_id: int, changes: Mapping[str, Any],
    merge: Callable[[Run], Mapping[str, Any]] | None = None,
) -> Run:
    """Apply `changes` (PATCH fields) to a run; with `merge`, also the changes it computes from
    the run as it is under the run's lock (a read-merge-write, such as MLflow params added to
    the config, that a concurrent update cannot make stale). `merge` may raise: nothing is
    written. Raises `NotFound`, `NameTaken`, `InvalidName`."""
    def decide(run: Run) -> RunChange:
        asked = {**changes, **merge(run)} if merge is not None else changes
        return decide_run_change(run, asked)

    return store.update_run(run_id, decide)


def patch_run(store: RunStore, run_id: int, patch: RunPatch) -> Run:
    """PATCH /runs/{id}: the fields the body set (fit settings: the knobs it set)."""
    changes = patch.model_dump(exclude_unset=True)
    if patch.fit_settings is not None:
        changes["fit_settings"] = patch.fit_settings.model_dump(exclude_unset=True)
    return update_run(store, run_id, changes)


def rename_run(store: RunStore, run_id: int, name: str | None) -> Run:
    """A new name, checked as PATCH /runs/{id} checks it (pydantic's `ValidationError` for a
    name the API would answer 422 to)."""
    return patch_run(store, run_id, RunPatch.model_validate({"name": name}))


def with_project_defaults(context: FitContext) -> FitContext:
    """The run's fit settings with its project's prior defaults where its own leave them out."""
    settings = dict(context.fit_settings)
    for key in PROJECT_PRIORS:
        default = getattr(context.project_defaults, key)
        if key not in settings and default is not None:
            settings[key] = list(default) if isinstance(default, tuple) else default
    return context.model_copy(update={"fit_settings": settings})


def fit_context(store: FitStore, run_id: int) -> FitContext:
    """What the fitter needs to know about a run (raises `NotFound`)."""
    return with_project_defaults(store.fit_context(run_id))
