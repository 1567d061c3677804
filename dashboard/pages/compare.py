"""Compare: runs overlaid, their parameters, the paper's verdict, the winner at a budget.

The URL (`?runs=1,2&metric=&budget=`) holds the state: changing the budget rewrites it in
place, so the link can be shared.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from dash import ctx as dash_ctx
from dash.exceptions import PreventUpdate

from dashboard import data
from dashboard.components import GRAPH_CONFIG, DashContext, column, empty_state, table, to_csv
from dashboard.figures import ceiling_figure, compare_figure, fmt

PATH = "/compare"
TITLE = "Compare"
TICK_MS = 3000


def _float(raw: str | None) -> float | None:
    try:
        v = float(raw) if raw not in (None, "") else None
    except ValueError:
        return None
    return v if v is not None and v > 0 else None


def layout(
    runs: str | None = None, metric: str | None = None, budget: str | None = None, **_: Any
) -> html.Div:
    ids = data.parse_ids(runs)
    if not ids:
        return empty_state("Pick runs on the Runs page (tick their rows), then press Compare.")
    return html.Div(
        [
            dcc.Store(id="cmp-ids", data=ids),
            dcc.Store(id="cmp-metric", data=metric or None),
            dcc.Store(id="cmp-token"),
            html.Div(
                className="toolbar",
                children=[
                    html.H2("Compare", style={"margin": 0}),
                    html.Div(id="cmp-chips"),
                    html.Span(style={"flex": 1}),
                    html.Label("budget", htmlFor="cmp-budget"),
                    dcc.Input(
                        id="cmp-budget",
                        type="text",
                        inputMode="decimal",
                        debounce=True,
                        value=_float(budget),
                        style={"width": 130, "padding": "6px 8px"},
                        placeholder="compute",
                    ),
                    html.Span(id="cmp-unit", className="meta"),
                    html.Button("Download CSV", id="cmp-csv-btn", className="secondary"),
                    dcc.Download(id="cmp-csv"),
                ],
            ),  # fmt: skip
            html.Div(id="cmp-note", className="note"),
            html.Div(
                dcc.Graph(id="cmp-graph", config=GRAPH_CONFIG, style={"height": 480}),
                className="card",
            ),
            html.Div(
                className="grid2",
                children=[
                    html.Div(
                        [
                            html.H3("Verdict"),
                            html.Div(id="cmp-verdict", className="verdict card"),
                            html.H3("Fitted parameters (95% intervals)"),
                            table(
                                "cmp-params",
                                [
                                    column("run", "run", presentation="markdown"),
                                    column("status", "status"),
                                    column("A", "A"),
                                    column("B", "B"),
                                    column("C_mid", "C_mid"),
                                    column("at budget", "at_budget"),
                                    column("points", "points"),
                                ],
                                data=[],
                            ),
                        ]
                    ),
                    html.Div(
                        dcc.Graph(id="cmp-scatter", config=GRAPH_CONFIG, style={"height": 420}),
                        className="card",
                    ),
                ],
            ),
            dcc.Interval(id="cmp-tick", interval=TICK_MS),
        ]
    )


def _verdict(detail: dict[str, Any]) -> Any:
    lines = data.verdict_lines(detail.get("comparison"), detail["unit"])
    if len(detail["items"]) < 2:
        return html.P("Select at least two runs for a verdict.")
    items = [
        html.Li(
            [
                html.Span(line["pair"], className="pair"),
                html.Div(line["rule"]),
                html.Div(line["crossover"]),
                html.Div(line["winner"], className="winner"),
            ]
        )
        for line in lines
    ]
    return html.Ul(items, id="cmp-verdict-list", style={"paddingLeft": 18, "margin": 0})


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("cmp-graph", "figure"),
        Output("cmp-verdict", "children"),
        Output("cmp-params", "data"),
        Output("cmp-note", "children"),
        Output("cmp-chips", "children"),
        Output("cmp-unit", "children"),
        Output("cmp-budget", "value"),
        Output("cmp-token", "data"),
        Input("cmp-budget", "value"),
        Input("cmp-tick", "n_intervals"),
        State("cmp-ids", "data"),
        State("cmp-metric", "data"),
        State("cmp-token", "data"),
    )
    def render(
        budget: float | None, _tick: int | None, ids: list[int], metric: str | None,
        token: list | None,
    ) -> tuple:  # fmt: skip
        store = ctx.store
        if dash_ctx.triggered_id == "cmp-tick":
            # Cheap check before any point is read: newest step and fit time of each run.
            now = [data.change_token(store.get_run(i)) for i in ids]
            if now == token:
                raise PreventUpdate
        detail = data.compare_detail(store, ids, metric, _float(str(budget)) if budget else None)
        budget_shown = detail["budget"]
        if budget_shown is not None and float(budget_shown).is_integer():
            budget_shown = int(budget_shown)
        if detail.get("error"):
            msg = empty_state(detail["error"])
            return (compare_figure([], unit="", metric=""), msg, [], "", None, "", budget, token)
        unit = detail["unit"]
        fig = compare_figure(
            detail["items"],
            unit=unit,
            metric=detail["metric"],
            budget=detail["budget"],
            sampled=detail["sampled"],
        )
        fig.update_layout(uirevision=",".join(map(str, ids)))
        chips = [
            dcc.Link(it["label"], href=app.get_relative_path(f"/run/{it['id']}"),
                     className="chip", style={"background": it["color"]})
            for it in detail["items"]
        ]  # fmt: skip
        note = ""
        if detail["sampled"]:
            note = (
                "Long series are downsampled in the database over one shared compute range "
                f"(≤ {data.MAX_SCREEN_POINTS:,} points each); the fits use every point."
            )
        tokens = [data.change_token(store.get_run(i)) for i in ids]
        return (
            fig,
            _verdict(detail),
            data.params_rows(detail),
            note,
            chips,
            unit,
            budget_shown,
            tokens,
        )

    @app.callback(
        Output("cmp-scatter", "figure"),
        Input("cmp-ids", "data"),
    )
    def scatter(ids: list[int]) -> Any:
        runs = []
        for i in ids:
            try:
                runs.append(ctx.store.get_run(i))
            except Exception:  # noqa: BLE001 - a deleted run just drops out
                continue
        highlight = {r["id"]: r["name"] for r in runs}
        projects = sorted({r["project"] for r in runs})
        fig = ceiling_figure(data.ceiling_rows(ctx.store, projects, highlight))
        fig.update_layout(title={"text": f"Ceiling vs efficiency: {', '.join(projects)}"})
        return fig

    @app.callback(
        Output("cmp-csv", "data"),
        Input("cmp-csv-btn", "n_clicks"),
        State("cmp-ids", "data"),
        State("cmp-metric", "data"),
        State("cmp-budget", "value"),
        prevent_initial_call=True,
    )
    def download(_n: int, ids: list[int], metric: str | None, budget: float | None) -> dict:
        detail = data.compare_detail(ctx.store, ids, metric, budget)
        rows = (
            (it["label"], it["id"], s, c, v)
            for it in detail["items"]
            for s, c, v in zip(it["steps"], it["compute"], it["values"], strict=True)
        )
        comment = f"compute in {detail['unit']}; budget {fmt(detail['budget'])}" + (
            "; downsampled for display" if detail["sampled"] else ""
        )
        text = to_csv(["run", "run_id", "step", "compute", detail["metric"]], rows, comment)
        return {"content": text, "filename": "compare.csv", "type": "text/csv"}

    # Keep the URL in step with the budget without reloading the page (shareable link).
    app.clientside_callback(
        """function(budget, ids, metric) {
            if (!ids) { return; }
            const u = new URL(window.location.href);
            u.searchParams.set('runs', ids.join(','));
            if (metric) { u.searchParams.set('metric', metric); }
            if (budget) { u.searchParams.set('budget', String(budget)); }
            else { u.searchParams.delete('budget'); }
            window.history.replaceState(window.history.state, '', u.toString());
        }""",
        Input("cmp-budget", "value"),
        State("cmp-ids", "data"),
        State("cmp-metric", "data"),
    )
