"""Runs: every run of a project with its live fit (A with interval, B, C_mid, forecast)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from dashboard import data
from dashboard.components import DashContext, column, empty_state, table, to_csv
from dashboard.figures import plural

PATH = "/"
TITLE = "Runs"
REFRESH_MS = 3000


def _columns(unit: str | None, metric: str, config_keys: list[str], alerts: bool) -> list[dict]:
    """What matters first (run, status, forecast at target, A, open alerts), the rest after.

    `unit` is None when the runs shown use different compute units: the headers then say no
    unit and a "compute unit" column says each row's.
    """
    u = f" ({unit})" if unit else ""
    cols = [
        column("run", "run", presentation="markdown"),
        column("status", "status"),
        column("predicted @ target [95%]", "predicted"),
        column("A [95%]", "A"),
    ]
    if alerts:
        cols.append(column("open alerts", "alerts", "numeric"))
    cols += [
        column(f"current {metric}", "current", "numeric"),
        column(f"last compute{u}", "last_compute", "numeric"),
        column(f"target{u}", "target", "numeric"),
    ]
    if unit is None:
        cols.append(column("compute unit", "unit"))
    cols += [
        column("B", "B", "numeric"),
        column("C_mid", "C_mid", "numeric"),
        column("tags", "tags"),
    ]
    cols += [column(k, k, "any") for k in config_keys]
    return cols


def layout(project: str | None = None, **_: Any) -> html.Div:
    return html.Div(
        [
            html.Div(
                className="toolbar",
                children=[
                    html.H2("Runs", style={"margin": 0}),
                    dcc.Dropdown(
                        id="runs-project",
                        value=project or None,
                        placeholder="all projects",
                        clearable=True,
                        style={"width": 260},
                    ),
                    html.Span(id="runs-count", className="meta"),
                    html.Span(style={"flex": 1}),
                    dcc.Link(
                        html.Button("Compare selected", id="runs-compare-btn", disabled=True),
                        id="runs-compare-link",
                        href="",
                    ),
                    html.Button("Download CSV", id="runs-csv-btn", className="secondary"),
                    dcc.Download(id="runs-csv"),
                ],
            ),
            html.Div(
                "Tick rows to compare them; click a run to open it. Sort by clicking a header; "
                "filter in the row under it (e.g. > 0.6, running, lr=3e-4 in a config column).",
                className="note",
            ),
            html.Div(id="runs-empty"),
            table(
                "runs-table",
                _columns(None, "value", [], False),
                data=[],
                row_selectable="multi",
                selected_row_ids=[],
                sort_action="native",
                filter_action="native",
                page_action="native",
                page_size=25,
                style_data_conditional=[
                    {
                        "if": {"column_id": "status", "filter_query": '{status} = "running"'},
                        "color": "#2e7d32",
                        "fontWeight": 600,
                    },
                    {
                        "if": {"column_id": "alerts", "filter_query": "{alerts} > 0"},
                        "color": "#c62828",
                        "fontWeight": 600,
                    },
                ],  # fmt: skip
            ),
            dcc.Store(id="runs-digest"),
            dcc.Interval(id="runs-tick", interval=REFRESH_MS),
        ]
    )


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("runs-table", "data"),
        Output("runs-table", "columns"),
        Output("runs-project", "options"),
        Output("runs-count", "children"),
        Output("runs-empty", "children"),
        Output("runs-digest", "data"),
        Input("runs-project", "value"),
        Input("runs-tick", "n_intervals"),
        State("runs-digest", "data"),
    )
    def refresh(project: str | None, _tick: int | None, digest: str | None) -> tuple:
        table_ = data.runs_table(ctx.store, project)
        rows = table_["rows"]
        units = {r["unit"] for r in rows}
        metrics = {r["metric"] for r in rows}
        alerts = any(r["alerts"] is not None for r in rows)
        cols = _columns(
            units.pop() if len(units) == 1 else None,
            metrics.pop() if len(metrics) == 1 else "value",
            table_["config_keys"],
            alerts,
        )
        options = [{"label": p, "value": p} for p in data.projects(ctx.store)]
        new_digest = hashlib.sha1(
            json.dumps([rows, cols, options], default=str).encode()
        ).hexdigest()
        if new_digest == digest:
            raise PreventUpdate  # nothing changed: send nothing
        count = plural(table_["total"], "run") + (
            f" (showing {table_['shown']:,})" if table_["shown"] < table_["total"] else ""
        )
        empty = (
            empty_state(
                "No runs yet. Start one with scalewatch.init(project=..., name=...) "
                "in your trainer."
            )
            if not rows
            else None
        )
        return rows, cols, options, count, empty, new_digest

    @app.callback(
        Output("runs-compare-link", "href"),
        Output("runs-compare-btn", "disabled"),
        Output("runs-compare-btn", "children"),
        Input("runs-table", "selected_row_ids"),
    )
    def selection(ids: list[int] | None) -> tuple:
        ids = ids or []
        if len(ids) < 1:
            return "", True, "Compare selected"
        href = app.get_relative_path(f"/compare?runs={','.join(str(i) for i in ids)}")
        label = "Open run" if len(ids) == 1 else f"Compare {len(ids)} runs"
        return href, False, label

    @app.callback(
        Output("runs-csv", "data"),
        Input("runs-csv-btn", "n_clicks"),
        State("runs-table", "data"),
        State("runs-table", "columns"),
        prevent_initial_call=True,
    )
    def download(_n: int, rows: list[dict], cols: list[dict]) -> dict:
        ids = ["id", "name"] + [c["id"] for c in cols if c["id"] != "run"]
        text = to_csv(ids, ([r.get(k) for k in ids] for r in rows or []))
        return {"content": text, "filename": "runs.csv", "type": "text/csv"}

    app.clientside_callback(
        """function(project) {
            const u = new URL(window.location.href);
            if (project) { u.searchParams.set('project', project); }
            else { u.searchParams.delete('project'); }
            window.history.replaceState(window.history.state, '', u.toString());
        }""",
        Input("runs-project", "value"),
        prevent_initial_call=True,
    )
