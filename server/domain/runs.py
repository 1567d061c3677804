"""Runs, projects and groups of runs: the records the store returns and the API sends.

The field descriptions are the API's (`server/api/schemas/runs.py` derives its response models
from these), so a field is declared once for the store, the services, the dashboard and /docs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RunStatus = Literal["running", "finished", "failed"]
# A prior setting: "project" (learned from the project's finished runs), [a, b], or none.
PriorSetting = Literal["project"] | tuple[float, float] | None


class Project(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: int
    name: str
    created_at: str
    fit_metric: str | None = Field(
        None, description="The project's default fit metric: runs without their own fit it"
    )
    noise_prior: PriorSetting = Field(
        None, description="The default noise prior of the project's runs (a run's own "
                          "fit_settings.noise_prior wins)")
    b_prior: PriorSetting = Field(
        None, description="The default B prior of the project's runs (a run's own "
                          "fit_settings.b_prior wins)")


class Run(BaseModel):
    """A run as every reader sees it: its settings, its latest value of each metric, the
    metric its fit follows (and why), and the summary of that metric's latest fit."""

    model_config = ConfigDict(frozen=True)
    id: int
    project: str
    name: str
    status: str
    config: dict[str, Any]
    tags: list[str]
    notes: str
    compute_unit: str
    target_compute: float | None
    fit_metric: str
    fit_metric_reason: str = Field(
        "", description="why this metric is fitted: set for the run, or which rule recognised it"
    )
    fit_metric_warning: str | None = Field(
        None, description="set when the fit fell back to a training reward although the run "
        "logs a metric that looks like a validation metric: which, and how to choose it"
    )
    fit_settings: dict[str, Any]
    group: str | None = Field(None, description="the run's group (recipe), if any")
    created_at: str | None
    last_seen_at: str | None
    last_step: int | None
    last_compute: float | None
    latest: dict[str, float | None] = Field(description="latest value of each metric")
    # The stored summary of the fit metric's latest fit (the full record: `FitStore`).
    fit: dict[str, Any] | None = Field(description="latest fit summary of the fit metric")


class RunChange(BaseModel):
    """A fully decided change of a run (`services.runs.decide_run_change`): the store writes
    the fields that are set (`model_fields_set`) and queues a refit when `refit` says so.
    `fit_settings` is the run's whole new settings, not a patch; `tags` are de-duplicated."""

    model_config = ConfigDict(frozen=True)
    name: str | None = None
    status: str | None = None
    tags: list[str] | None = None
    notes: str | None = None
    config: dict[str, Any] | None = None
    target_compute: float | None = None
    fit_metric: str | None = None
    fit_settings: dict[str, Any] | None = None
    group: str | None = None
    refit: bool = False

    def written(self) -> set[str]:
        """The run's fields this change writes."""
        return self.model_fields_set - {"refit"}


class ProjectDefaults(BaseModel):
    """A project's defaults for its runs; a change writes the fields that are set."""

    model_config = ConfigDict(frozen=True)
    fit_metric: str | None = None
    noise_prior: PriorSetting = None
    b_prior: PriorSetting = None


class RunSettings(BaseModel):
    """What decides whether a change of its project's defaults refits a run: the run's own
    choices (`services.projects.refits_run`)."""

    model_config = ConfigDict(frozen=True)
    fit_metric: str | None
    fit_settings: dict[str, Any]


class GroupMember(BaseModel):
    """A run of a group, with what the group's fit needs of it."""

    model_config = ConfigDict(frozen=True)
    id: int
    name: str
    group: str
    fit_metric: str
    target_compute: float | None
    fit_settings: dict[str, Any]
    status: str


class GroupSummary(BaseModel):
    """A group of a project: its members and its latest pooled fit (summary)."""

    model_config = ConfigDict(frozen=True)
    name: str
    n_runs: int
    runs: list[int] = Field(description="the member runs' ids")
    metric: str | None = Field(description="the members' common fit metric (null: they differ)")
    fit: dict[str, Any] | None = Field(
        description="the latest group fit of that metric, summarised")


class FitInputs(BaseModel):
    """What a run's fit options come from (`services.fits.fit_options_for`): its settings,
    target and status, and what its project's newest finished runs teach
    (store.fits_sql.finished_runs_teach). A group's member has these too."""

    model_config = ConfigDict(frozen=True)
    target_compute: float | None = None
    fit_settings: dict[str, Any] = Field(default_factory=dict)
    status: str | None = None
    # Noise posteriors (rho mean, sd), hindcasts, B intervals of the identified ones. A run's
    # hindcasts: one (miss, sd, beyond) per horizon (hindcast.HORIZON_FRACTIONS order), None
    # where that cut had no band.
    project_noise: list[tuple[float, float]] | None = None
    project_hindcasts: list[list[tuple[float, float, float] | None]] | None = None
    project_b: list[Any] | None = None


class FitContext(FitInputs):
    """What the fitter needs to know about a run: its fit inputs (its own settings, with its
    project's defaults merged in by `services.runs.fit_context`), which run and metric, and
    the finished runs of its project that still need a hindcast."""

    run_id: int
    project: str
    name: str
    fit_metric: str
    last_seen_at: datetime | None = None
    # The project's defaults for what a run's own fit_settings leaves out.
    project_defaults: ProjectDefaults = Field(default_factory=ProjectDefaults)
    # Finished runs whose latest fit has no hindcast yet: (run id, metric) to refit.
    finished_without_hindcast: list[tuple[int, str]] = Field(default_factory=list)
