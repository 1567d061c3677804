"""The FastAPI application factory: one process serves the REST API and the dashboard."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy.exc import DataError, OperationalError

from server.api.deps import TokenCache
from server.api.guards import RejectNulMiddleware
from server.api.routes import alerts, fits, health, points, runs, tokens
from server.api.telemetry import Metrics, MetricsMiddleware
from server.config import Settings
from server.db.engine import make_engine
from server.db.migrate import ensure_schema
from server.store import SqlStore
from server.workers import start_workers

log = logging.getLogger("scalewatch")

ROUTERS = [
    health.router,
    runs.router,
    points.router,
    fits.router,
    alerts.router,
    tokens.router,
]


def _mount_dashboard(app: FastAPI) -> None:
    # Imported here, not at the top: an API-only process (SCALEWATCH_DASHBOARD=0) never loads
    # Dash, and the dashboard itself imports from the server package.
    from dashboard.app import mount_dashboard

    mount_dashboard(app)

    @app.get("/", include_in_schema=False)
    def _root() -> RedirectResponse:
        return RedirectResponse("/dashboard/")


def create_app(settings: Settings, store: SqlStore | None = None) -> FastAPI:
    if store is None:
        engine = make_engine(settings)
        ensure_schema(engine, auto_upgrade=settings.is_sqlite)
        store = SqlStore(engine)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        workers = start_workers(app) if settings.workers_enabled else []
        try:
            yield
        finally:
            for w in workers:
                w.stop()

    app = FastAPI(
        title="scalewatch",
        version="0.1.0",
        description=(
            "Live ScaleRL sigmoid fits for RL training runs: ingest points, read fits, "
            "forecasts and alerts. Authenticate with `Authorization: Bearer <token>`."
        ),
        lifespan=lifespan,
        responses={400: {"description": "Malformed request body"}},
    )
    app.state.settings = settings
    app.state.store = store
    app.state.token_cache = TokenCache()
    app.state.metrics = Metrics()
    app.state.refit_notify = None
    app.add_middleware(RejectNulMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Only location, message and type: echoing the input back would fail on NaN and could
        # reflect megabytes of payload.
        detail = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": detail}, status_code=422)

    @app.exception_handler(DataError)
    async def _bad_value(_request: Request, exc: DataError) -> JSONResponse:
        # The database refused a value the validators let through (e.g. out of range for its
        # column type). The transaction is rolled back, so nothing was stored.
        log.info("database rejected a value: %s", exc)
        return JSONResponse(
            {"detail": f"a value was rejected by the database: {str(exc.orig).splitlines()[0]}"},
            status_code=422,
        )

    @app.exception_handler(OperationalError)
    async def _db_unavailable(_request: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database unavailable: %s", exc)
        return JSONResponse({"detail": "database unavailable, retry later"}, status_code=503)

    for router in ROUTERS:
        app.include_router(router)

    if settings.dashboard_enabled:
        _mount_dashboard(app)
    return app
