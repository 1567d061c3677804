"""Fits: latest fit and history of a run, stateless fits for scripts, run comparison."""

from __future__ import annotations

from typing import Annotated

import numpy as np
from fastapi import APIRouter, Query

from server import limits
from server.api.deps import AUTH_RESPONSES, READ, StoreDep
from server.api.schemas import (
    CompareOut,
    FitHistory,
    FitOut,
    FitRequest,
    Id,
    PathId,
    not_found,
)
from server.fitting import FitOptions, fit_curve
from server.services.compare import api_response, load_compare_inputs
from server.services.fits import fit_record, latest_or_pending, public_fit
from server.store.fit_records import FitRecord, PublicFit

router = APIRouter(prefix="/api/v1", tags=["fits"], responses=AUTH_RESPONSES, dependencies=[READ])
RUN_404 = not_found("run")
MetricQ = Annotated[
    str | None,
    Query(
        min_length=1, max_length=limits.MAX_NAME_LENGTH, description="default: the run's fit metric"
    ),
]


# Fit results are open objects: the response carries exactly the keys the fit has (unset
# optional fields are not filled in with nulls), plus any the fitting engine adds.
@router.get(
    "/runs/{run_id}/fit",
    response_model=FitOut,
    response_model_exclude_unset=True,
    responses=RUN_404,
)
def latest_fit(run_id: PathId, store: StoreDep, metric: MetricQ = None) -> PublicFit:
    """The latest fit of a metric (the result object, plus metric, fit_id, fitted_at).

    Never fits inside the request: a metric with no stored fit answers status `pending` (a fit
    is queued and the refitter stores it shortly; poll again), and a stored fit older than the
    metric's newest points queues a refit while the stored one is returned.
    """
    return public_fit(latest_or_pending(store, run_id, metric)) or {}


@router.get("/runs/{run_id}/fits", response_model=FitHistory, responses=RUN_404)
def fit_history(
    run_id: PathId,
    store: StoreDep,
    metric: MetricQ = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> dict:
    """Every stored fit, oldest first: how the A estimate moved as compute grew."""
    name, fits = store.fit_history(run_id, metric, limit)
    return {"run_id": run_id, "metric": name, "fits": fits}


@router.post("/fit", response_model=FitOut, response_model_exclude_unset=True)
def stateless_fit(body: FitRequest) -> FitRecord:
    """Fit points given in the request (for scripts and notebooks); nothing is stored."""
    options = FitOptions(
        r0=body.r0,
        warmup=body.warmup,
        fit_until=body.fit_until,
        target_compute=body.target_compute,
        value_range=body.value_range,
        method=body.method,
    )
    result = fit_curve(np.asarray(body.compute), np.asarray(body.values), options)
    return fit_record(result, internal=False)


@router.get(
    "/compare", response_model=CompareOut, response_model_exclude_unset=True, responses=RUN_404
)
def compare(
    store: StoreDep,
    run: Annotated[
        list[Id],
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
    inputs = load_compare_inputs(store, list(run), metric)
    return api_response(inputs, metric, budget)
