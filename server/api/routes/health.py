"""Liveness, readiness and Prometheus metrics (no auth: probes and scrapers carry no token)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from scalewatch.server.api.schemas import Health, Readiness
from scalewatch.server.background import outage

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Database unreachable or schema old"}},
)
def readyz(request: Request) -> JSONResponse:
    """The database is reachable and its schema is current."""
    from scalewatch.server.db.migrate import head_revision, schema_is_current

    store = request.app.state.store
    try:
        store.ping()
        current = schema_is_current(store.engine)
    except Exception as exc:  # noqa: BLE001 - any database failure means "not ready"
        # Unauthenticated: the error (host, port, user, driver text) goes to the log only.
        outage.failed(exc)
        return JSONResponse({"status": "unavailable", "detail": "database unreachable"}, 503)
    outage.ok()
    if not current:
        return JSONResponse(
            {
                "status": "unavailable",
                "detail": f"schema is not at {head_revision(store.engine)}: "
                "run scalewatch db upgrade",
            },
            503,
        )
    return JSONResponse({"status": "ready", "database": store.dialect})


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request) -> PlainTextResponse:
    """Prometheus text format."""
    groups = request.app.state.store.ingest_groups
    return PlainTextResponse(
        request.app.state.metrics.render((groups.groups, groups.items)),
        media_type="text/plain; version=0.0.4",
    )
