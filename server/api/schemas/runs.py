"""Runs, their points and projects: request and response models.

A run and a project are declared once, in `scalewatch.server.domain` (what the store returns);
the responses here are those shapes (a run's fit summary typed for /docs), and the PATCH
bodies are the domain's (`domain.changes`: the dashboard validates its writes with them too).
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, field_validator

from scalewatch.server import limits
from scalewatch.server.api.schemas.common import (
    GroupName,
    Name,
    check_free_text,
    check_group,
    check_json,
    check_tags,
    clean_text,
)
from scalewatch.server.domain.changes import (
    B_PRIOR_HELP,
    NOISE_PRIOR_HELP,
    FitSettings,
    ProjectPatch,
    RunPatch,
)
from scalewatch.server.domain.runs import Project, Run
from scalewatch.server.fitting.result import FitStatus

__all__ = [
    "B_PRIOR_HELP", "NOISE_PRIOR_HELP", "FitSettings", "FitSummary", "IngestResult", "PointIn",
    "PointOut", "PointsIn", "PointsOut", "ProjectOut", "ProjectPatch", "RunCreate", "RunList",
    "RunOut", "RunPage", "RunPatch",
]


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: str = Name
    name: str = Name
    config: dict[str, Any] | None = None
    tags: list[str] | None = None
    notes: str | None = Field(None, max_length=limits.MAX_NOTES_LENGTH)
    compute_unit: str = Field("gpu_hours", min_length=1, max_length=limits.MAX_UNIT_LENGTH)
    target_compute: FiniteFloat | None = Field(None, gt=0)
    fit_metric: str | None = Field(None, min_length=1, max_length=limits.MAX_METRIC_NAME_LENGTH)
    fit_settings: FitSettings | None = None
    group: str | None = GroupName

    _group = field_validator("group")(classmethod(lambda cls, v: check_group(v)))

    @field_validator("project", "name", "compute_unit", "fit_metric")
    @classmethod
    def _names(cls, v: str | None) -> str | None:
        return None if v is None else clean_text(v, "names")

    _notes = field_validator("notes")(classmethod(lambda cls, v: check_free_text(v, "notes")))

    @field_validator("config")
    @classmethod
    def _config(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else check_json(v, "config")

    _tags = field_validator("tags")(classmethod(lambda cls, v: check_tags(v)))


class FitSummary(BaseModel):
    """The compact fit carried by run lists (the full result object: `GET /runs/{id}/fit`)."""

    model_config = ConfigDict(extra="allow")
    status: FitStatus | None = None
    A: float | None = None
    B: float | None = None
    C_mid: float | None = None


class RunOut(Run):
    # The stored summary, with its best-known keys documented (a `FitSummary` is a dict with
    # those keys: the store's dict validates into it).
    fit: FitSummary | None = Field(  # type: ignore[assignment]
        description="latest fit summary of the fit metric")


class RunList(BaseModel):
    runs: list[RunOut]
    total: int


class RunPage(TypedDict):
    """What a handler returns as a `RunList`: the store's runs, which FastAPI turns into it."""

    runs: list[Run]
    total: int


class PointIn(BaseModel):
    step: int = Field(ge=0, le=limits.MAX_STEP)
    compute: FiniteFloat = Field(ge=0)
    metrics: dict[str, FiniteFloat] = Field(min_length=1, max_length=limits.MAX_METRICS_PER_POINT)
    time: FiniteFloat | None = None


class PointsIn(BaseModel):
    points: list[PointIn] = Field(max_length=limits.MAX_POINTS_PER_REQUEST)


class IngestResult(BaseModel):
    accepted: int = Field(description="distinct (metric, step) values stored by this request")
    updated: int = Field(description="how many of them overwrote an existing value")


class PointOut(BaseModel):
    step: int
    compute: float
    value: float


class PointsOut(BaseModel):
    metric: str
    points: list[PointOut]
    downsampled: bool
    total: int = Field(description="points in the requested range before downsampling")
    next_since_step: int | None = Field(
        None,
        description="without max_points, at most 10,000 points are returned by step: pass "
        "this as since_step for the next page (null: no more)",
    )


class ProjectOut(Project):
    pass
