"""Points: batched upsert ingestion and (downsampled) reads."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from scalewatch.server import limits
from scalewatch.server.api.deps import (
    AUTH_RESPONSES,
    PROJECTS,
    READ,
    WRITE,
    StoreDep,
    wake_refitter,
)
from scalewatch.server.api.schemas import (
    ErrorOut,
    IngestResult,
    PathId,
    PointsIn,
    PointsOut,
    not_found,
)
from scalewatch.server.fastdecode import parse_batch
from scalewatch.server.ingest import IngestError
from scalewatch.server.store.base import Ingested, Store

router = APIRouter(
    prefix="/api/v1/runs", tags=["points"], responses=AUTH_RESPONSES, dependencies=[PROJECTS]
)
RUN_404 = not_found("run")

_INGEST_ERRORS: dict[int | str, dict[str, Any]] = {
    **RUN_404,
    400: {"model": ErrorOut, "description": "Body is not (gzip-encoded) JSON"},
    413: {"model": ErrorOut, "description": "Too many points or too large a body"},
    415: {"model": ErrorOut, "description": "Unsupported Content-Encoding"},
    422: {
        "model": ErrorOut,
        "description": "Invalid points, each listed, or new metric names that would give the "
        f"run more than {limits.MAX_SERIES_PER_RUN:,}; nothing stored",
    },
}


async def _read_capped(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limits.MAX_BODY_BYTES:
        raise IngestError(413, f"body larger than {limits.MAX_BODY_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.MAX_BODY_BYTES:
            raise IngestError(413, f"body larger than {limits.MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_and_store(
    store: Store, run_id: int, raw: bytes, encoding: str | None
) -> tuple[Ingested, float]:
    """(the store's answer, when parsing ended): runs in a request thread."""
    batch = parse_batch(raw, encoding)
    parsed = time.perf_counter()
    return store.ingest_batch(run_id, batch), parsed


@router.post(
    "/{run_id}/points",
    response_model=IngestResult,
    dependencies=[WRITE],
    responses=_INGEST_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": PointsIn.model_json_schema(
                        ref_template="#/components/schemas/{model}"
                    )
                }
            },
            "description": "Up to 10,000 points; `Content-Encoding: gzip` accepted.",
        }
    },
)
async def post_points(run_id: PathId, request: Request, store: StoreDep) -> JSONResponse:
    """Upsert points on (run, metric, step), last write wins; all or nothing per request."""
    t0 = time.perf_counter()
    try:
        raw = await _read_capped(request)
        t1 = time.perf_counter()
        # Parsed in the same thread hop as the store call, never on the event loop: inflating
        # and parsing a large body takes long enough to stall every other request.
        result, t2 = await run_in_threadpool(
            _parse_and_store, store, run_id, raw, request.headers.get("content-encoding")
        )
        t3 = time.perf_counter()
    except IngestError as exc:
        content: dict[str, Any] = {"detail": exc.message}
        if exc.errors:
            content["errors"] = exc.errors
        return JSONResponse(content, status_code=exc.status)
    accepted, updated = result
    request.app.state.metrics.points_ingested(accepted)
    if result.refit:  # else the refitter has nothing new to do
        wake_refitter(request)
    # Server-Timing shows where an ingest's time goes (browser devtools and curl -v read it).
    timing = (
        f"read;dur={(t1 - t0) * 1e3:.2f}, parse;dur={(t2 - t1) * 1e3:.2f}, "
        f"store;dur={(t3 - t2) * 1e3:.2f}"
    )
    return JSONResponse(
        {"accepted": accepted, "updated": updated}, headers={"Server-Timing": timing}
    )


@router.get("/{run_id}/points", response_model=PointsOut, dependencies=[READ], responses=RUN_404)
def get_points(
    run_id: PathId,
    store: StoreDep,
    metric: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=limits.MAX_METRIC_NAME_LENGTH,
            description="default: the run's fit metric",
        ),
    ] = None,
    max_points: Annotated[int | None, Query(ge=4, le=limits.MAX_DOWNSAMPLE_POINTS)] = None,
    since_step: Annotated[int | None, Query(ge=0, le=limits.MAX_STEP)] = None,
) -> dict[str, Any]:
    """Points of one metric ordered by step; downsampled in the database with `max_points`."""
    name = metric or store.get_run(run_id).fit_metric
    # Without max_points, one page by step (10,000 points), never a million-point answer.
    page = store.get_points(
        run_id,
        name,
        since_step=since_step,
        max_points=max_points,
        limit=limits.MAX_POINTS_PAGE if max_points is None else None,
    )
    more = max_points is None and page.downsampled
    return {
        "metric": page.metric,
        "points": [
            {"step": s, "compute": c, "value": v}
            for s, c, v in zip(page.steps, page.compute, page.values, strict=True)
        ],
        "downsampled": page.downsampled and not more,
        "total": page.total,
        "next_since_step": page.steps[-1] + 1 if more and page.steps else None,
    }
