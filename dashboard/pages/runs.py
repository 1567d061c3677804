"""Runs: every run of a project with its live fit (A with interval, B, C_mid, forecast), or
"by group": one row per recipe (the runs sharing `group`) with its pooled fit and seed spread.

The view is in the URL (`?view=groups`), like the project, so the link can be shared."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlencode

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from scalewatch.dashboard import data, group_data, project_settings
from scalewatch.dashboard.components import DashContext, column, empty_state, table, to_csv
from scalewatch.dashboard.figures import plural
from scalewatch.dashboard.links import BadLink, bad_link, link_text
from scalewatch.server import limits

PATH = "/"
TITLE = "Runs"
REFRESH_MS = 3000


def _selectable() -> dict[str, Any]:
    """Both views (runs, groups) are tables whose rows the user ticks to open or compare them
    (fresh lists each layout: a component's props are not shared)."""
    return {"data": [], "row_selectable": "multi", "selected_row_ids": [],
            "sort_action": "native", "filter_action": "native", "page_action": "native",
            "page_size": 25}


def _columns(
    unit: str | None, metric: str, config_keys: list[str], alerts: bool, groups: bool = False
) -> list[dict[str, Any]]:
    """What matters first (run, status, forecast at target, A, open alerts), the rest after.

    `unit` is None when the runs shown use different compute units: the headers then say no
    unit and a "compute unit" column says each row's. The group column shows once any run
    is in a group.
    """
    u = f" ({unit})" if unit else ""
    cols = [
        column("run", "run", presentation="markdown"),
        column("status", "status"),
        column("predicted @ target [95%]", "predicted"),
        column("A [95%]", "A"),
    ]
    if groups:
        cols.insert(1, column("group", "group", presentation="markdown"))
    if alerts:
        cols.append(column("open alerts", "alerts", "numeric"))
    cols += [
        column(f"current {metric}", "current", "numeric"),
        column(f"last compute{u}", "last_compute", "compute"),
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


def _group_columns(projects: bool) -> list[dict[str, Any]]:
    """The "by group" view: the recipe's pooled fit first, then how its seeds agree."""
    cols = [column("group", "group", presentation="markdown")]
    if projects:
        cols.append(column("project", "project"))
    return cols + [
        column("members", "members", "numeric"),
        column("status", "status"),
        column("predicted @ target [95%]", "predicted"),
        column("A [95%] (pooled)", "A"),
        column("seed spread of A: sd [95%]", "spread"),
        column("seeds pooled", "pooled", "numeric"),
        column("B [95%]", "B"),
        column("C_mid", "C_mid"),
        column("target", "target", "numeric"),
        column("metric", "metric"),
    ]


VIEWS = [{"label": "runs", "value": "runs"}, {"label": "by group", "value": "groups"}]


def layout(project: Any = None, view: Any = None, **_: Any) -> html.Div:
    try:
        project = link_text(project, "project", limits.MAX_NAME_LENGTH)
        view = "groups" if link_text(view, "view", 16) == "groups" else "runs"
    except BadLink as exc:
        return bad_link(exc)
    return html.Div(
        [
            html.Div(
                className="toolbar",
                children=[
                    html.H2("Runs", style={"margin": 0}),
                    dcc.Dropdown(
                        id="runs-project",
                        value=project or None,
                        # The link's project is an option from the start: a dropdown whose
                        # value is not among its options clears it (and the link loses it)
                        # before the first refresh brings the list.
                        options=[project] if project else [],
                        placeholder="all projects",
                        clearable=True,
                        style={"width": 260},
                    ),
                    dcc.RadioItems(
                        id="runs-view",
                        options=VIEWS,
                        value=view,
                        inline=True,
                        inputStyle={"marginRight": 4},
                        labelStyle={"marginRight": 12, "fontSize": 14},
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
            project_settings.panel(),
            html.Div(id="runs-empty"),
            html.Div(
                id="runs-pane",
                style={"display": "none"} if view == "groups" else {},
                children=table(
                    "runs-table",
                    _columns(None, "value", [], False),
                    **_selectable(),
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
            ),
            html.Div(
                id="groups-pane",
                style={} if view == "groups" else {"display": "none"},
                children=table(
                    "groups-table",
                    _group_columns(False),
                    **_selectable(),
                ),
            ),
            dcc.Store(id="runs-digest"),
            dcc.Store(id="groups-digest"),
            dcc.Interval(id="runs-tick", interval=REFRESH_MS),
        ]
    )


def _runs_view(store: Any, project: str | None) -> tuple[Any, ...]:
    """Rows and columns of the runs table (and the count and empty state)."""
    table_ = data.runs_table(store, project)
    rows = table_["rows"]
    units = {r["unit"] for r in rows}
    metrics = {r["metric"] for r in rows}
    alerts = any(r["alerts"] is not None for r in rows)
    cols = _columns(
        units.pop() if len(units) == 1 else None,
        metrics.pop() if len(metrics) == 1 else "value",
        table_["config_keys"],
        alerts,
        groups=any(r["group"] for r in rows),
    )
    count = plural(table_["total"], "run") + (
        f" (showing {table_['shown']:,})" if table_["shown"] < table_["total"] else ""
    )
    empty = (
        empty_state(
            "No runs yet. Start one with scalewatch.init(project=..., name=...) in your trainer."
        )
        if not rows
        else None
    )
    return rows, cols, count, empty


def _groups_view(store: Any, project: str | None) -> tuple[Any, ...]:
    rows = group_data.group_rows(store, project)
    cols = _group_columns(projects=not project)
    empty = (
        empty_state(
            "No groups yet. Runs that are seeds of one recipe share a group: pass "
            "group=... to scalewatch.init (or --group to scalewatch follow/import)."
        )
        if not rows
        else None
    )
    return rows, cols, plural(len(rows), "group"), empty


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    project_settings.register_callbacks(app, ctx)

    @app.callback(
        Output("runs-table", "data"),
        Output("runs-table", "columns"),
        Output("groups-table", "data"),
        Output("groups-table", "columns"),
        Output("runs-project", "options"),
        Output("runs-count", "children"),
        Output("runs-empty", "children"),
        Output("runs-digest", "data"),
        Input("runs-project", "value"),
        Input("runs-view", "value"),
        Input("runs-tick", "n_intervals"),
        State("runs-digest", "data"),
    )
    def refresh(
        project: str | None, view: str | None, _tick: int | None, digest: str | None
    ) -> tuple[Any, ...]:
        # Only the table on screen is read; the other keeps what it had until shown.
        groups = view == "groups"
        rows, cols, count, empty = (_groups_view if groups else _runs_view)(ctx.store, project)
        options = [{"label": p, "value": p} for p in data.projects(ctx.store)]
        new_digest = hashlib.sha1(
            json.dumps([view, rows, cols, options], default=str).encode()
        ).hexdigest()
        if new_digest == digest:
            raise PreventUpdate  # nothing changed: send nothing
        runs_out = (no_update, no_update) if groups else (rows, cols)
        groups_out = (rows, cols) if groups else (no_update, no_update)
        return (*runs_out, *groups_out, options, count, empty, new_digest)

    @app.callback(
        Output("runs-pane", "style"),
        Output("groups-pane", "style"),
        Input("runs-view", "value"),
    )
    def show(view: str | None) -> tuple[Any, ...]:
        hidden = {"display": "none"}
        return (hidden, {}) if view == "groups" else ({}, hidden)

    @app.callback(
        Output("runs-compare-link", "href"),
        Output("runs-compare-btn", "disabled"),
        Output("runs-compare-btn", "children"),
        Input("runs-table", "selected_row_ids"),
        Input("groups-table", "selected_row_ids"),
        Input("runs-view", "value"),
    )
    def selection(
        ids: list[int] | None, gids: list[str] | None, view: str | None
    ) -> tuple[Any, ...]:
        if view == "groups":
            return _group_selection(app, gids or [])
        ids = ids or []
        if len(ids) < 1:
            return "", True, "Compare selected"
        href = app.get_relative_path(f"/compare?runs={','.join(str(i) for i in ids)}")
        label = "Open run" if len(ids) == 1 else f"Compare {len(ids)} runs"
        return href, False, label

    @app.callback(
        Output("runs-csv", "data"),
        Input("runs-csv-btn", "n_clicks"),
        State("runs-view", "value"),
        State("runs-table", "data"),
        State("runs-table", "columns"),
        State("groups-table", "data"),
        State("groups-table", "columns"),
        prevent_initial_call=True,
    )
    def download(
        _n: int, view: str | None, rows: list[dict[str, Any]], cols: list[dict[str, Any]],
        grows: list[dict[str, Any]], gcols: list[dict[str, Any]],
    ) -> dict[str, Any]:  # fmt: skip
        if view == "groups":
            ids = ["name", "project"] + [
                c["id"] for c in gcols or [] if c["id"] not in ("group", "project")
            ]
            text = to_csv(ids, ([r.get(k) for k in ids] for r in grows or []))
            return {"content": text, "filename": "groups.csv", "type": "text/csv"}
        ids = ["id", "name", "group_name"] + [
            c["id"] for c in cols or [] if c["id"] not in ("run", "group")
        ]
        text = to_csv(ids, ([r.get(k) for k in ids] for r in rows or []))
        return {"content": text, "filename": "runs.csv", "type": "text/csv"}

    app.clientside_callback(
        """function(project, view) {
            const u = new URL(window.location.href);
            if (project) { u.searchParams.set('project', project); }
            else { u.searchParams.delete('project'); }
            if (view === 'groups') { u.searchParams.set('view', 'groups'); }
            else { u.searchParams.delete('view'); }
            window.history.replaceState(window.history.state, '', u.toString());
        }""",
        Input("runs-project", "value"),
        Input("runs-view", "value"),
        prevent_initial_call=True,
    )


def _group_selection(app: Dash, gids: list[str]) -> tuple[Any, ...]:
    """The compare button in the "by group" view: one group opens its page, several of one
    project compare as recipes (`/compare?project=&group=&group=`, like the REST API)."""
    picked = [tuple(g.split("\x1f", 1)) for g in gids if "\x1f" in g]
    if not picked:
        return "", True, "Compare selected"
    projects = {p for p, _ in picked}
    if len(projects) > 1:
        return "", True, "Compare groups of one project"
    project = projects.pop()
    if len(picked) == 1:
        return app.get_relative_path(group_href_rel(project, picked[0][1])), False, "Open group"
    query = urlencode([("project", project)] + [("group", g) for _, g in picked])
    return app.get_relative_path(f"/compare?{query}"), False, f"Compare {len(picked)} groups"


def group_href_rel(project: str, group: str) -> str:
    """The Group page's path below the dashboard's prefix."""
    return "/group?" + urlencode({"project": project, "group": group})
