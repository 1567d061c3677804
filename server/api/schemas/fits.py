"""Fits, comparisons and groups: request and response models."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, model_validator

from scalewatch.server import limits
from scalewatch.server.api.schemas.common import PriorsChecked
from scalewatch.server.api.schemas.fit_shapes import FitHistoryEntry, FitOut, Interval  # noqa: F401
from scalewatch.server.api.schemas.runs import FitSummary
from scalewatch.server.domain.checks import check_value_range
from scalewatch.server.domain.runs import GroupSummary

# ---- fits --------------------------------------------------------------------------------------


class FitRequest(PriorsChecked):
    """Points and knobs in, the result object out (nothing is stored)."""

    model_config = ConfigDict(extra="forbid")
    compute: list[FiniteFloat] = Field(max_length=limits.MAX_FIT_POINTS)
    values: list[FiniteFloat] = Field(max_length=limits.MAX_FIT_POINTS)
    r0: FiniteFloat | None = None
    warmup: FiniteFloat = Field(0.0, ge=0)
    fit_until: FiniteFloat | None = Field(None, gt=0)
    target_compute: FiniteFloat | None = Field(None, gt=0)
    value_range: tuple[FiniteFloat, FiniteFloat] = (0.0, 1.0)
    method: Literal["default", "paper"] = "default"
    noise_prior: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="[mean, sd] of a prior on the evaluation noise's AR(1) coefficient")
    b_prior: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="[centre, scale] of a Student-t prior on ln B (4 degrees of freedom)")

    @model_validator(mode="after")
    def _check(self) -> FitRequest:
        if len(self.compute) != len(self.values):
            raise ValueError(
                f"compute has {len(self.compute)} values, values has "
                f"{len(self.values)}: they must pair up"
            )
        if any(c < 0 for c in self.compute):
            raise ValueError("compute must not be negative")
        check_value_range(self.value_range)
        return self


class FitHistory(BaseModel):
    run_id: int
    metric: str
    fits: list[FitHistoryEntry]


class CompareRun(BaseModel):
    id: int | None = Field(description="the run's id; null for a group")
    name: str
    project: str
    label: str = Field(description="unique name in this comparison (name#id when names repeat)")
    metric: str
    compute_unit: str | None = Field(None, description=(
        "the unit the run counts compute in (null for a group). A and B do not depend on it; "
        "C_mid, the crossovers and the winner at a budget compare compute across runs and "
        "mean something only when every run counts it in the same unit"))
    fit: FitOut | None
    group: str | None = Field(None, description="set for a group (its pooled fit)")


class Comparison(BaseModel):
    """`runs` by label (A, B, prediction at the budget), `pairs` with the paper's verdict,
    the crossover and the winner at the budget."""

    model_config = ConfigDict(extra="allow")
    budget: float | None
    margin: float
    runs: dict[str, dict[str, Any]]
    pairs: list[dict[str, Any]]


class CompareOut(BaseModel):
    metric: str | None
    budget: float | None
    runs: list[CompareRun]
    comparison: Comparison


# ---- groups ------------------------------------------------------------------------------------


class GroupOut(GroupSummary):
    # The stored summary, its best-known keys documented (as `RunOut.fit`).
    fit: FitSummary | None = Field(  # type: ignore[assignment]
        description="the latest group fit of that metric, summarised")


class GroupList(BaseModel):
    groups: list[GroupOut]


class GroupPage(TypedDict):
    """What a handler returns as a `GroupList` (FastAPI turns the store's groups into it)."""

    groups: list[GroupSummary]


class GroupFitOut(FitOut):
    """The pooled fit (the recipe's A, band and forecast: the result object), plus `members`
    (each run's own fit and whether it sits on the recipe's curve) and `seed_spread` (the sd of
    the members' A across seeds, with its 95% interval)."""

    group: str | None = None
    project: str | None = None
    members: list[dict[str, Any]] = Field(default_factory=list)
    seed_spread: dict[str, Any] | None = None


class GroupFitHistory(BaseModel):
    project: str
    group: str
    metric: str
    fits: list[FitHistoryEntry]
