"""What a change of a project's defaults means: which of its runs are refitted (those that do
not set their own), decided here, not in the SQL store. Shared by PATCH /projects/{name} and
the dashboard's project settings, which validate their input with the same `ProjectPatch`."""

from __future__ import annotations

from collections.abc import Set

from scalewatch.server.domain.changes import ProjectPatch
from scalewatch.server.domain.runs import Project, ProjectDefaults, RunSettings
from scalewatch.server.store.base import RunStore

PRIORS = ("noise_prior", "b_prior")


def refits_run(changed: Set[str], run: RunSettings) -> bool:
    """Whether a change of the project's defaults `changed` changes what `run` is fitted with:
    its fit metric when it has none of its own, a prior its fit settings leave out."""
    return (("fit_metric" in changed and run.fit_metric is None)
            or any(key in changed and key not in run.fit_settings for key in PRIORS))


def update_project(store: RunStore, name: str, patch: ProjectPatch) -> Project:
    """Set (null: clear) the defaults `patch` sets, creating the project when missing; every
    run they change (`refits_run`) is refitted. Keys left out stay."""
    changes = patch.model_dump(exclude_unset=True)
    defaults = ProjectDefaults(**changes)
    changed = frozenset(changes)
    return store.update_project(name, defaults, lambda run: refits_run(changed, run))
