"""Group: one recipe fitted on its seeds. Each seed's points thin in one colour family, the
pooled curve with its 95% band and extrapolation, the recipe's forecast, and each member's own
fit against the recipe's.

Live like the Run page: every tick reads the members' newest step, fit time and status and the
group fit's id (no points); only a change rebuilds the page.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash import ctx as dash_ctx
from dash.exceptions import PreventUpdate

from scalewatch.dashboard import group_data
from scalewatch.dashboard.components import (
    GRAPH_CONFIG,
    DashContext,
    column,
    empty_state,
    headline,
    table,
    to_csv,
)
from scalewatch.dashboard.figures import fmt, group_figure, group_headline, history_figure, plural
from scalewatch.dashboard.links import BadLink, bad_link, link_text
from scalewatch.server import limits
from scalewatch.server.fitting import FitResult, predict
from scalewatch.server.services.compare import MixedMetrics
from scalewatch.server.store.base import NotFound

PATH = "/group"
TITLE = "Group"
TICK_MS = 2000

MEMBER_COLUMNS = [
    column("run", "run", presentation="markdown"),
    column("status", "status"),
    column("own A [95%]", "A"),
    column("own A − recipe A [95%]", "offset"),
    column("in the recipe's fit", "pool"),
    column("why", "reason"),
    column("last compute", "last_compute", "compute"),
    column("points", "points", "numeric"),
]


def layout(project: Any = None, group: Any = None, metric: Any = None, **_: Any) -> html.Div:
    try:
        project = link_text(project, "project", limits.MAX_NAME_LENGTH)
        group = link_text(group, "group", limits.MAX_GROUP_LENGTH)
        metric = link_text(metric, "metric", limits.MAX_METRIC_NAME_LENGTH)
    except BadLink as exc:
        return bad_link(exc)
    if not project or not group:
        return empty_state(
            'No group given. Open one from the Runs page\'s "by group" view '
            "(a run joins a group with group= in scalewatch.init or the REST API)."
        )
    return html.Div(
        [
            dcc.Store(id="grp-key", data={"project": project, "group": group, "metric": metric}),
            dcc.Store(id="grp-token"),
            html.Div(id="grp-header"),
            html.Div(
                className="toolbar",
                children=[
                    html.Span(id="grp-note", className="note"),
                    html.Span(style={"flex": 1}),
                    html.Button("Download CSV", id="grp-csv-btn", className="secondary"),
                    dcc.Download(id="grp-csv"),
                ],
            ),
            html.Div(
                dcc.Graph(id="grp-graph", config=GRAPH_CONFIG, style={"height": 500}),
                className="card",
            ),
            # The members table is wide (each seed's A, its offset, why it is out): full width.
            html.H3("Members"),
            table(
                "grp-members",
                MEMBER_COLUMNS,
                data=[],
                page_size=25,
                sort_action="native",
                style_data_conditional=[
                    {
                        "if": {
                            "column_id": "pool",
                            "filter_query": '{pool} = "broke" || {pool} = "off the curve"',
                        },
                        "color": "#c62828",
                        "fontWeight": 600,
                    },
                ],
            ),
            html.Div(
                dcc.Graph(id="grp-history", config=GRAPH_CONFIG, style={"height": 320}),
                className="card",
                style={"marginTop": 14},
            ),
            dcc.Interval(id="grp-tick", interval=TICK_MS),
        ]
    )


def _header(d: dict[str, Any]) -> html.Div:
    n = len(d["members"])
    bits = [f"project {d['project']}", plural(n, "member"), f"fits {d['metric']}"]
    if d.get("target"):
        bits.append(f"target {fmt(d['target'])} {d['unit']}")
    head = group_headline(d["fit"], d.get("target"), d["unit"])
    return html.Div(
        [
            html.H2(
                [
                    html.Span(
                        className="run-swatch",
                        title="this recipe's colour in charts",
                        style={"backgroundColor": d["color"]},
                    ),
                    d["group"],  # a Dash child is text, never markup: no escaping needed
                ],
                id="grp-title",
            ),
            html.Div(" · ".join(bits), className="meta"),
            headline(head, "grp-headline"),
        ]
    )


def _note(d: dict[str, Any]) -> str:
    if d["sampled"]:
        return (
            "long seeds are downsampled in the database for display (first, last, lowest "
            "and highest point of each bucket); the fits use every point"
        )
    return ""


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("grp-graph", "figure"),
        Output("grp-history", "figure"),
        Output("grp-header", "children"),
        Output("grp-members", "data"),
        Output("grp-note", "children"),
        Output("grp-token", "data"),
        Input("grp-tick", "n_intervals"),
        State("grp-key", "data"),
        State("grp-token", "data"),
    )
    def render(_tick: int | None, key: dict[str, Any], token: list[Any] | None) -> tuple[Any, ...]:
        store = ctx.store
        if dash_ctx.triggered_id == "grp-tick" and token is not None:
            try:
                now = group_data.current_token(
                    store, key["project"], key["group"], key.get("metric")
                )
            except (NotFound, MixedMetrics):
                raise PreventUpdate from None  # the full render says why, once
            if now == token:
                raise PreventUpdate  # nothing new: two small reads, nothing sent
        d = group_data.detail_or_error(store, key["project"], key["group"], key.get("metric"))
        if d.get("error"):
            msg = empty_state(d["error"], id_="grp-error")
            empty = group_figure([], None, unit="", metric="", color="#000000")
            return empty, history_figure([], color="#000000", unit=""), msg, [], "", []
        fig = group_figure(
            d["members"], d["fit"], unit=d["unit"], metric=d["metric"], color=d["color"],
            title=f"{d['group']}: {d['metric']}", target=d["target"],
        )  # fmt: skip
        fig.update_layout(uirevision=f"{d['project']}\x1f{d['group']}:{d['metric']}")
        hist = history_figure(d["history"], color=d["color"], unit=d["unit"])
        hist.update_layout(title={"text": "Recipe's A estimate as compute grew"})
        return (fig, hist, _header(d), group_data.member_rows(d), _note(d), d["token"])

    @app.callback(
        Output("grp-csv", "data"),
        Input("grp-csv-btn", "n_clicks"),
        State("grp-key", "data"),
        prevent_initial_call=True,
    )
    def download(_n: int, key: dict[str, Any]) -> dict[str, Any]:
        d = group_data.detail_or_error(ctx.store, key["project"], key["group"], key.get("metric"))
        if d.get("error"):
            raise PreventUpdate
        fit = d["fit"]
        res = FitResult.from_dict(fit) if fit.get("B") is not None else None

        def recipe(c: list[float]) -> list[Any]:
            if res is None or res.params is None or not c:
                return [None] * len(c)
            return [round(float(v), 6) for v in predict(res, c)]

        rows = (
            (m["name"], m["id"], s, c, v, f)
            for m in d["members"]
            for s, c, v, f in zip(
                m["steps"], m["compute"], m["values"], recipe(m["compute"]), strict=True
            )
        )
        comment = f"group {d['group']} of project {d['project']}, compute in {d['unit']}" + (
            "; downsampled for display" if d["sampled"] else ""
        )
        text = to_csv(
            ["run", "run_id", "step", "compute", d["metric"], "recipe_fit"], rows, comment
        )
        return {"content": text, "filename": "group.csv", "type": "text/csv"}
