"""The FastAPI application factory: one process serves the REST API and the dashboard."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from scalewatch.server.api.concurrency import PerClientLimit
from scalewatch.server.api.deps import TokenCache
from scalewatch.server.api.docs import install_docs
from scalewatch.server.api.errors import install_error_handlers
from scalewatch.server.api.fitpool import FitPool
from scalewatch.server.api.guards import (
    HeadAsGet,
    RejectNulMiddleware,
    RequestGuard,
    SecurityHeaders,
)
from scalewatch.server.api.routes import (
    alerts,
    fits,
    groups,
    health,
    points,
    projects,
    runs,
    tokens,
)
from scalewatch.server.api.routes.mlflow import install_mlflow
from scalewatch.server.api.telemetry import Metrics, MetricsMiddleware
from scalewatch.server.config import Settings
from scalewatch.server.db.engine import make_engine
from scalewatch.server.db.migrate import ensure_schema
from scalewatch.server.store import SqlStore
from scalewatch.server.workers import start_workers

ROUTERS = [
    health.router,
    runs.router,
    projects.router,
    points.router,
    fits.router,
    groups.router,
    alerts.router,
    tokens.router,
]


def _mount_dashboard(app: FastAPI) -> None:
    # Imported here, not at the top: an API-only process (SCALEWATCH_DASHBOARD=0) never loads
    # Dash, and the dashboard itself imports from the server package.
    from scalewatch.dashboard.app import mount_dashboard

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
        workers = None
        if settings.workers_enabled:
            workers = start_workers(settings, app.state.store, app.state.metrics)
            app.state.refit_notify = workers.notify
        try:
            yield
        finally:
            app.state.fit_pool.shutdown()
            if workers is not None:
                workers.stop()

    app = FastAPI(
        title="scalewatch",
        version="0.1.0",
        description=(
            "Live ScaleRL sigmoid fits for RL training runs: ingest points, read fits, "
            "forecasts and alerts. Authenticate with `Authorization: Bearer <token>`."
        ),
        lifespan=lifespan,
        responses={400: {"description": "Malformed request body"}},
        docs_url=None,  # served from local assets by install_docs (offline clusters)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.token_cache = TokenCache(settings.token_cache_ttl)
    app.state.fit_pool = FitPool(settings.fit_processes, settings.fit_timeout, settings.fit_queue)
    app.state.expensive_reads = PerClientLimit(settings.expensive_reads_per_token)
    app.state.metrics = Metrics()
    app.state.refit_notify = None
    app.add_middleware(RequestGuard, state=app.state)
    app.add_middleware(RejectNulMiddleware)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(HeadAsGet)  # added last: outermost

    install_error_handlers(app)
    install_docs(app)
    for router in ROUTERS:
        app.include_router(router)
    install_mlflow(app)  # MLFLOW_TRACKING_URI=<this server> (verl, TRL, NeMo-RL, SkyRL)

    if settings.dashboard_enabled:
        _mount_dashboard(app)
    return app
