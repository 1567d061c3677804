"""Alerts: open and acknowledged alerts, acknowledge (write scope, through the API's own
``rule_service.acknowledge``), delivery attempts, and the rules that raise them
(``dashboard/alert_rules.py``)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from scalewatch.dashboard import alert_rules, data
from scalewatch.dashboard.components import (
    DashContext,
    column,
    empty_state,
    table,
    write_denied,
)
from scalewatch.dashboard.figures import plural
from scalewatch.dashboard.links import BadLink, bad_link, link_text
from scalewatch.server.alerts import rule_service
from scalewatch.server.store.base import Store

PATH = "/alerts"
TITLE = "Alerts"
STATES = [
    {"label": "open and acknowledged", "value": "active"},
    {"label": "open", "value": "open"},
    {"label": "acknowledged", "value": "acknowledged"},
    {"label": "resolved", "value": "resolved"},
    {"label": "all", "value": "all"},
]
COLUMNS = [
    column("state", "state"),
    column("run", "run", presentation="markdown"),
    column("project", "project"),
    column("kind", "kind"),
    column("message", "message"),
    # Times are the server's, in UTC (the store keeps UTC); a team spans time zones.
    column("raised (UTC)", "created_at"),
    column("acknowledged (UTC)", "acknowledged_at"),
]
DELIVERY_KEYS = (
    "event", "state", "attempt", "at", "status_code", "ok", "error", "duration_ms", "url",
)  # fmt: skip


def layout(state: Any = None, **_: Any) -> html.Div:
    try:
        state = link_text(state, "state", 32)
    except BadLink as exc:
        return bad_link(exc)
    if state not in {s["value"] for s in STATES}:
        state = None  # an unknown state: the default view
    return html.Div(
        [
            html.Div(
                className="toolbar",
                children=[
                    html.H2("Alerts", style={"margin": 0}),
                    dcc.Dropdown(
                        id="alerts-state",
                        options=STATES,
                        value=state or "active",
                        clearable=False,
                        style={"width": 300},  # "open and acknowledged" fits untruncated
                    ),
                    html.Span(id="alerts-count", className="meta"),
                    html.Span(style={"flex": 1}),
                    html.Button("Acknowledge", id="alerts-ack", disabled=True),
                ],
            ),  # fmt: skip
            html.Div(id="alerts-msg"),
            html.Div(id="alerts-empty"),
            table(
                "alerts-table",
                COLUMNS,
                data=[],
                row_selectable="single",
                selected_row_ids=[],
                sort_action="native",
                filter_action="native",
                page_size=20,
                # The message is what an alert says: wrapped in full, not cut to "…".
                style_cell_conditional=[
                    {"if": {"column_id": "message"}, "whiteSpace": "normal", "minWidth": 320,
                     "maxWidth": 560},
                ],
                style_data_conditional=[
                    {
                        "if": {"column_id": "state", "filter_query": '{state} = "open"'},
                        "color": "#c62828",
                        "fontWeight": 600,
                    },
                ],  # fmt: skip
            ),
            html.H3("Delivery attempts"),
            html.Div(id="alerts-deliveries"),
            alert_rules.panel(),
            dcc.Store(id="alerts-acked", data=0),
            dcc.Interval(id="alerts-tick", interval=5000),
        ]
    )


def _rows(store: Store, state: str) -> dict[str, Any]:
    if state == "active":
        a = data.alerts_table(store, state="open")
        b = data.alerts_table(store, state="acknowledged")
        return {**a, "rows": a["rows"] + b["rows"], "total": a["total"] + b["total"]}
    return data.alerts_table(store, state=None if state == "all" else state)


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    alert_rules.register_callbacks(app, ctx)

    @app.callback(
        Output("alerts-table", "data"),
        Output("alerts-count", "children"),
        Output("alerts-empty", "children"),
        Input("alerts-state", "value"),
        Input("alerts-tick", "n_intervals"),
        Input("alerts-acked", "data"),
    )
    def refresh(state: str, _tick: int | None, _acked: int) -> tuple[Any, ...]:
        got = _rows(ctx.store, state or "active")
        empty = empty_state("No alerts here. Quiet is good.") if not got["rows"] else None
        return got["rows"], plural(got["total"], "alert"), empty

    @app.callback(
        Output("alerts-ack", "disabled"),
        Output("alerts-deliveries", "children"),
        Input("alerts-table", "selected_row_ids"),
        Input("alerts-acked", "data"),
    )
    def selected(ids: list[int] | None, _acked: int) -> tuple[Any, ...]:
        if not ids:
            return True, empty_state("Select an alert to see its webhook deliveries.")
        rows = data.deliveries(ctx.store, ids[0], ctx.scope())
        if not rows:
            return False, empty_state("No delivery attempts for this alert.")
        keys = [k for k in DELIVERY_KEYS if any(k in r for r in rows)] or sorted(rows[0])
        return False, table(
            "alerts-deliveries-table",
            [column("at (UTC)" if k == "at" else k, k) for k in keys], data=rows, page_size=10,
        )

    @app.callback(
        Output("alerts-msg", "children"),
        Output("alerts-acked", "data"),
        Input("alerts-ack", "n_clicks"),
        State("alerts-table", "selected_row_ids"),
        State("alerts-acked", "data"),
        prevent_initial_call=True,
    )
    def acknowledge(_n: int, ids: list[int] | None, acked: int) -> tuple[Any, ...]:
        if not ids:
            raise PreventUpdate
        if not ctx.can("write"):
            return write_denied("Acknowledging", "alerts-ack-denied"), acked
        try:
            alert = rule_service.acknowledge(ctx.store, ids[0])
        except LookupError as exc:
            return html.Div(str(exc), className="msg-err"), acked
        return (
            html.Div(
                f"Alert {alert.id} acknowledged.", className="msg-ok",
                id="alerts-ack-ok",
            ),
            (acked or 0) + 1,
        )  # fmt: skip
