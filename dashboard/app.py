"""The Dash app, built per FastAPI app and mounted at /dashboard/ in the same process.

Pages live in `dashboard/pages/` (one module each, with `PATH`, `TITLE`, `layout()` and
`register_callbacks(app, ctx)`); callbacks are registered on this app instance, never globally,
so several apps (tests, benches) can live in one process, each reading its own store.
"""

from __future__ import annotations

from typing import Any, cast

import dash
from a2wsgi import WSGIMiddleware
from dash import Dash, dcc, html
from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.types import ASGIApp

from scalewatch.dashboard import callback_guard
from scalewatch.dashboard.auth import DashboardGate, add_login_routes
from scalewatch.dashboard.components import DashContext
from scalewatch.dashboard.pages import alerts, compare, group, run, runs

PREFIX = "/dashboard/"


def _navbar(auth: bool) -> html.Header:
    links = [
        dcc.Link("Runs", href=PREFIX, className="nav-link", id="nav-runs"),
        dcc.Link("Alerts", href=PREFIX + "alerts", className="nav-link", id="nav-alerts"),
    ]
    right = [html.A("Sign out", href="/logout", className="nav-link")] if auth else []
    return html.Header(
        className="navbar",
        children=[
            html.Span("scalewatch", className="brand"),
            html.Nav(links),
            html.Span(className="spacer"),
            *right,
        ],
    )


def build_dash(state: Any) -> Dash:
    app = Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        requests_pathname_prefix=PREFIX,
        suppress_callback_exceptions=True,
        title="scalewatch",
        update_title=None,
        serve_locally=True,
    )
    ctx = DashContext(state)
    for mod in (runs, run, group, compare, alerts):
        dash.register_page(
            mod.__name__,
            path=getattr(mod, "PATH", None),
            path_template=getattr(mod, "PATH_TEMPLATE", None),
            title=mod.TITLE,
            name=mod.TITLE,
            layout=mod.layout,
        )
        mod.register_callbacks(app, ctx)
    app.layout = html.Div(
        [_navbar(ctx.auth), html.Main(dash.page_container, className="content")],
        className="shell",
    )
    callback_guard.install(app)  # after every callback is registered: it checks against them
    return app


def mount_dashboard(app: FastAPI) -> Dash:
    """Build the dashboard on `app.state` and serve it at /dashboard/ (with /login if auth)."""
    dash_app = build_dash(app.state)

    @app.get("/dashboard", include_in_schema=False)
    def _slash() -> RedirectResponse:
        return RedirectResponse(PREFIX)

    add_login_routes(app)
    # a2wsgi types its ASGI callable with its own event TypedDicts; it is the same protocol
    # starlette's ASGIApp describes, which mypy cannot see through.
    wsgi = cast(ASGIApp, WSGIMiddleware(dash_app.server))
    app.mount("/dashboard", DashboardGate(wsgi, app.state))
    app.state.dash_app = dash_app
    return dash_app
