"""Fits: latest fit and history of a run, stateless fits for scripts, run comparison."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import Field

from scalewatch.server import limits
from scalewatch.server.api.concurrency import EXPENSIVE_READ
from scalewatch.server.api.deps import AUTH_RESPONSES, PROJECTS, READ, StoreDep
from scalewatch.server.api.fitpool import (
    FitFailed,
    FitPool,
    FitTimeout,
    FitUnavailable,
    thin_for_paper,
)
from scalewatch.server.api.schemas import (
    CompareOut,
    ErrorOut,
    FitHistory,
    FitOut,
    FitRequest,
    Id,
    PathId,
    not_found,
)
from scalewatch.server.services.compare import api_response
from scalewatch.server.services.compare_groups import load_inputs
from scalewatch.server.services.fits import latest_or_pending, public_fit, with_metric_warning
from scalewatch.server.store.fit_records import PublicFit

router = APIRouter(
    prefix="/api/v1", tags=["fits"], responses=AUTH_RESPONSES, dependencies=[PROJECTS, READ]
)
RUN_404 = not_found("run")
COMPARE_404 = not_found("run, project or group")
MetricQ = Annotated[
    str | None,
    Query(
        min_length=1, max_length=limits.MAX_METRIC_NAME_LENGTH,
        description="default: the run's fit metric",
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
    metric's newest points queues a refit while the stored one is returned. Without `metric`,
    `fit_metric_warning` says when a training reward is fitted beside a validation-looking
    metric.
    """
    fit = public_fit(latest_or_pending(store, run_id, metric)) or {}
    return fit if metric is not None else with_metric_warning(fit, store.get_run(run_id))


@router.get("/runs/{run_id}/fits", response_model=FitHistory, responses=RUN_404)
def fit_history(
    run_id: PathId,
    store: StoreDep,
    metric: MetricQ = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> dict[str, Any]:
    """Every stored fit, oldest first: how the A estimate moved as compute grew."""
    name, fits = store.fit_history(run_id, metric, limit)
    return {"run_id": run_id, "metric": name, "fits": fits}


@router.post(
    "/fit",
    response_model=FitOut,
    response_model_exclude_unset=True,
    responses={
        422: {
            "model": ErrorOut,
            "description": "Invalid points, points that cannot be fitted, or a fit that ran "
            "past its deadline (it was stopped)",
        },
        429: {"model": ErrorOut, "description": "This token already runs as many fits as "
              "it may at once (Retry-After)"},
        503: {"model": ErrorOut, "description": "Every fit process is busy and the queue is "
              "full, or the fit was interrupted (Retry-After)"},
    },
    dependencies=[EXPENSIVE_READ],
)
async def stateless_fit(body: FitRequest, request: Request) -> JSONResponse:
    """Fit points given in the request (for scripts and notebooks); nothing is stored.

    Runs in a child process with a deadline (`SCALEWATCH_FIT_TIMEOUT`); `method: paper` on
    more than 500 points fits 500 of them, evenly spaced in compute order
    (`downsampled_from` says how many were sent).
    """
    options = {
        "r0": body.r0,
        "warmup": body.warmup,
        "fit_until": body.fit_until,
        "target_compute": body.target_compute,
        "value_range": body.value_range,
        "method": body.method,
        "noise_prior": body.noise_prior,
        "b_prior": body.b_prior,
    }
    compute, values, thinned_from = list(body.compute), list(body.values), None
    if body.method == "paper":
        compute, values, thinned_from = thin_for_paper(compute, values)
    pool: FitPool = request.app.state.fit_pool
    try:
        record = await pool.run(compute, values, options)
    except FitFailed as exc:
        return JSONResponse({"detail": f"these points cannot be fitted ({exc})"}, 422)
    except FitTimeout as exc:
        return JSONResponse({"detail": f"{exc} and was stopped; send fewer points"}, 422)
    except FitUnavailable as exc:
        return JSONResponse(
            {"detail": f"{exc}; retry later"}, 503, headers={"Retry-After": str(exc.retry_after)}
        )
    if thinned_from is not None:
        record["downsampled_from"] = thinned_from
    return JSONResponse(jsonable_encoder(FitOut.model_validate(record), exclude_unset=True))


@router.get(
    "/compare", response_model=CompareOut, response_model_exclude_unset=True,
    responses={**COMPARE_404, 429: {"model": ErrorOut, "description": "This token already "
               "runs as many fits and comparisons as it may at once (Retry-After)"}},
    dependencies=[EXPENSIVE_READ],
)
def compare(
    store: StoreDep,
    run: Annotated[
        list[Id],
        Query(max_length=limits.MAX_COMPARE_RUNS, description="run ids, repeated: ?run=1&run=2"),
    ] = [],  # noqa: B006 - FastAPI copies defaults; a list query needs a list default
    group: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=limits.MAX_GROUP_LENGTH)]],
        Query(max_length=limits.MAX_COMPARE_RUNS,
              description="groups of `project`, repeated: ?group=G1&group=G2 (their pooled fits)"),
    ] = [],  # noqa: B006
    project: Annotated[
        str | None, Query(min_length=1, max_length=limits.MAX_NAME_LENGTH,
                          description="the project of the groups")
    ] = None,
    metric: MetricQ = None,
    budget: Annotated[float | None, Query(gt=0, le=1e30)] = None,
) -> dict[str, Any]:
    """Runs and/or groups side by side: fits (a group's is its pooled fit over its seeds),
    the paper's verdict, crossovers, the winner at a budget."""
    if not run and not group:
        raise _query_error("run", "give at least one run=ID or group=NAME (with project=)")
    if group and project is None:
        raise _query_error("project", "group= needs project=: the project of the groups")
    if len(run) + len(group) > limits.MAX_COMPARE_RUNS:
        raise _query_error("run", f"at most {limits.MAX_COMPARE_RUNS} runs and groups")
    inputs = load_inputs(store, list(run), project, list(group), metric)
    return api_response(inputs, metric, budget)


def _query_error(field: str, msg: str) -> HTTPException:
    return HTTPException(422, [{"loc": ["query", field], "msg": msg, "type": "value_error"}])
