"""Fits: latest fit and history of a run, stateless fits for scripts, run comparison."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, model_validator

from server import limits
from server.api.deps import AUTH_RESPONSES, READ, StoreDep
from server.api.routes.runs import NOT_FOUND, RunId
from server.fitting import FitOptions, fit_curve
from server.refit import public_fit
from server.services.compare import api_response, latest_or_fresh, load_compare_inputs
from server.store import NotFound

router = APIRouter(prefix="/api/v1", tags=["fits"], responses=AUTH_RESPONSES, dependencies=[READ])
MetricQ = Annotated[
    str | None,
    Query(
        min_length=1, max_length=limits.MAX_NAME_LENGTH, description="default: the run's fit metric"
    ),
]


class FitRequest(BaseModel):
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

    @model_validator(mode="after")
    def _check(self) -> FitRequest:
        if len(self.compute) != len(self.values):
            raise ValueError(
                f"compute has {len(self.compute)} values, values has "
                f"{len(self.values)}: they must pair up"
            )
        if any(c < 0 for c in self.compute):
            raise ValueError("compute must not be negative")
        if not self.value_range[0] < self.value_range[1]:
            raise ValueError("value_range must be [low, high] with low < high")
        return self


@router.get("/runs/{run_id}/fit", responses=NOT_FOUND)
def latest_fit(run_id: RunId, store: StoreDep, metric: MetricQ = None) -> dict:
    """The latest fit of a metric (the result object, plus metric, fit_id, fitted_at)."""
    try:
        return public_fit(latest_or_fresh(store, run_id, metric)) or {}
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.get("/runs/{run_id}/fits", responses=NOT_FOUND)
def fit_history(
    run_id: RunId,
    store: StoreDep,
    metric: MetricQ = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> dict:
    """Every stored fit, oldest first: how the A estimate moved as compute grew."""
    try:
        name, fits = store.fit_history(run_id, metric, limit)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    return {"run_id": run_id, "metric": name, "fits": fits}


@router.post("/fit")
def stateless_fit(body: FitRequest) -> dict:
    """Fit points given in the request (for scripts and notebooks); nothing is stored."""
    options = FitOptions(
        r0=body.r0,
        warmup=body.warmup,
        fit_until=body.fit_until,
        target_compute=body.target_compute,
        value_range=tuple(body.value_range),
        method=body.method,
    )
    result = fit_curve(np.asarray(body.compute), np.asarray(body.values), options)
    return {**result.to_dict(), "message": result.message}


@router.get("/compare", responses=NOT_FOUND)
def compare(
    store: StoreDep,
    run: Annotated[
        list[Annotated[int, Field(ge=1, le=2**31 - 1)]],
        Query(
            min_length=1,
            max_length=limits.MAX_COMPARE_RUNS,
            description="run ids, repeated: ?run=1&run=2",
        ),
    ],
    metric: MetricQ = None,
    budget: Annotated[float | None, Query(gt=0, le=1e30)] = None,
) -> dict:
    """Runs side by side: fits, the paper's verdict, crossovers, the winner at a budget."""
    try:
        inputs = load_compare_inputs(store, list(run), metric)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    return api_response(inputs, metric, budget)
