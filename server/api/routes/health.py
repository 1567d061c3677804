"""Liveness, readiness and Prometheus metrics (no auth: probes and scrapers carry no token)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from scalewatch.server.api.schemas import Health, Readiness
from scalewatch.server.background import outage
from scalewatch.server.db.models import utcnow

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
    store = request.app.state.store
    groups = store.ingest_groups
    text = request.app.state.metrics.render((groups.groups, groups.items))
    try:
        waiting, oldest = store.refit_backlog()
    except Exception as exc:  # noqa: BLE001 - the process's own figures still answer
        outage.failed(exc)
    else:
        wait = 0.0 if oldest is None else max((utcnow() - oldest).total_seconds(), 0.0)
        text += (
            "# HELP scalewatch_refit_backlog Series whose newest points no fit includes yet "
            "(all processes).\n# TYPE scalewatch_refit_backlog gauge\n"
            f"scalewatch_refit_backlog {waiting}\n"
            "# HELP scalewatch_refit_oldest_wait_seconds How long the oldest point no fit "
            "includes has waited.\n# TYPE scalewatch_refit_oldest_wait_seconds gauge\n"
            f"scalewatch_refit_oldest_wait_seconds {wait:.3f}\n"
        )
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
