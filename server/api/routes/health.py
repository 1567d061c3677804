"""Liveness, readiness and Prometheus metrics (no auth: probes and scrapers carry no token)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from scalewatch.server.api.errors import DATABASE_RETRY_AFTER
from scalewatch.server.api.schemas import Health, Readiness
from scalewatch.server.background import outage
from scalewatch.server.db.models import utcnow

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, Any]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        503: {"model": Readiness,
              "description": "Database unreachable, not writable, or its schema old"},
    },
)
def readyz(request: Request) -> JSONResponse:
    """The database is reachable, accepts writes, and its schema is current."""
    from scalewatch.server.db.migrate import head_revision, schema_is_current

    store = request.app.state.store
    try:
        store.ping()
        current = schema_is_current(store.engine)
    except Exception as exc:  # noqa: BLE001 - any database failure means "not ready"
        # Unauthenticated: the error (host, port, user, driver text) goes to the log only.
        outage.failed(exc)
        return _unavailable("database unreachable")
    if current and not _wrote_lately(store):  # a write needs the current schema
        try:
            store.check_writable()  # reads alone do not make a server ready
        except Exception as exc:  # noqa: BLE001 - read-only file or replica, full disk
            outage.failed(exc)
            return _unavailable("database does not accept writes")
        _last_write[id(store)] = time.monotonic()
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


# When each store's write check last succeeded: /readyz is unauthenticated, and a flood of it
# must not become a flood of writes (on SQLite each takes the write lock), so a success
# stands for a second. A failure is never reused: the next probe checks again.
_last_write: dict[int, float] = {}
WRITE_CHECK_REUSE = 1.0


def _wrote_lately(store: object) -> bool:
    return time.monotonic() - _last_write.get(id(store), -WRITE_CHECK_REUSE) < WRITE_CHECK_REUSE


def _unavailable(detail: str) -> JSONResponse:
    return JSONResponse(
        {"status": "unavailable", "detail": detail}, 503,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
    )


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
