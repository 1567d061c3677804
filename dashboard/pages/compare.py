"""Compare: runs and recipes (groups) overlaid, their parameters, the paper's verdict, the
winner at a budget.

The URL (`?runs=1,2&project=&group=G1&group=G2&metric=&budget=`, groups repeated like the REST
API's) holds the state: changing the budget or the groups rewrites it in place, so the link can
be shared. A group enters as its pooled fit over its seeds (`server/services/compare_groups.py`,
the API's service).
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash import ctx as dash_ctx
from dash.exceptions import PreventUpdate

from scalewatch.dashboard import data, group_compare
from scalewatch.dashboard.checks import MAX_SAFE_INT
from scalewatch.dashboard.components import (
    GRAPH_CONFIG,
    DashContext,
    column,
    empty_state,
    svg_without_webgl,
    table,
    to_csv,
)
from scalewatch.dashboard.figures import ceiling_figure, compare_figure, fmt
from scalewatch.dashboard.figures.common import typed_arrays
from scalewatch.dashboard.figures.compare import compare_figure_dict
from scalewatch.dashboard.links import BadLink, bad_link, link_text
from scalewatch.server import limits
from scalewatch.server.store.base import NotFound

PATH = "/compare"
TITLE = "Compare"
TICK_MS = 3000


def _float(raw: str | None) -> float | None:
    """A typed budget as a number; None (the default budget) when it is not a positive finite
    number up to MAX_BUDGET ("1e308" would overflow every forecast at it)."""
    try:
        v = float(raw) if raw not in (None, "") else None
    except ValueError:
        return None
    return v if v is not None and 0 < v <= limits.MAX_BUDGET else None


def layout(
    runs: str | None = None,
    metric: str | None = None,
    budget: str | None = None,
    project: Any = None,
    group: Any = None,
    **_: Any,
) -> html.Div:
    try:
        runs = link_text(runs, "runs", 64 * limits.MAX_COMPARE_RUNS)
        metric = link_text(metric, "metric", limits.MAX_METRIC_NAME_LENGTH)
        budget = link_text(budget, "budget", 64)
        project = [p for p in [link_text(project, "project", limits.MAX_NAME_LENGTH)] if p]
        groups = group_compare.parse_groups(group)
        for g in groups:
            link_text(g, "group", limits.MAX_GROUP_LENGTH)
    except BadLink as exc:
        return bad_link(exc)
    ids = data.parse_ids(runs)
    if not ids and not groups:
        return empty_state(
            "Pick runs on the Runs page (tick their rows), or recipes in its \"by group\" "
            "view, then press Compare."
        )
    if len(ids) + len(groups) > limits.MAX_COMPARE_RUNS:
        return empty_state(
            f"Compare at most {limits.MAX_COMPARE_RUNS} runs and groups at once "
            f"(this link names {len(ids) + len(groups)})."
        )
    return html.Div(
        [
            dcc.Store(id="cmp-ids", data=ids),
            dcc.Store(id="cmp-project", data=project[0] if project else None),
            dcc.Store(id="cmp-metric", data=metric or None),
            dcc.Store(id="cmp-token"),
            html.Div(
                className="toolbar",
                children=[
                    html.H2("Compare", style={"margin": 0}),
                    html.Div(id="cmp-chips"),
                    dcc.Dropdown(
                        id="cmp-groups",
                        value=groups,
                        options=[{"label": g, "value": g} for g in groups],
                        multi=True,
                        placeholder="add groups (recipes)",
                        style={"minWidth": 240},
                    ),
                    dcc.Dropdown(
                        id="cmp-metric-pick",
                        value=metric or None,
                        options=[metric] if metric else [],
                        placeholder="metric",
                        clearable=False,
                        style={"minWidth": 200},
                    ),
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
                        ]
                    ),
                    html.Div(
                        dcc.Graph(id="cmp-scatter", config=GRAPH_CONFIG, style={"height": 420}),
                        className="card",
                    ),
                ],
            ),
            # Full width: seven columns of values with intervals do not fit half of 1400 px.
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
            dcc.Interval(id="cmp-tick", interval=TICK_MS),
        ]
    )


def _verdict(detail: dict[str, Any]) -> Any:
    intervals = {it["label"]: ci for it in detail["items"]
                 if (ci := ((it.get("fit") or {}).get("ci") or {}).get("A"))
                 and None not in ci}  # fmt: skip
    recipes = {it["label"] for it in detail["items"] if it.get("kind") == "group"}
    lines = data.verdict_lines(detail.get("comparison"), detail["unit"], detail.get("units"),
                               intervals, recipes)
    if len(detail["items"]) < 2:
        return html.P("Select at least two runs or groups for a verdict.")
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


def _chip(app: Dash, it: dict[str, Any]) -> Any:
    href = it.get("href") or app.get_relative_path(f"/run/{it['id']}")
    label = it["label"] + (" (recipe)" if it.get("kind") == "group" else "")
    return dcc.Link(label, href=href, className="chip", style={"background": it["color"]})


def _rendered(tokens: list[Any], budget: float | str | None, groups: list[str]) -> dict[str, Any]:
    """What a full render shows: the data's change tokens and the view (budget, groups).

    The budget as a number: the box holds the typed text ("3000") until a render writes the
    number back (3000), and the two must not read as a new view (a full render every tick)."""
    return {"data": tokens, "budget": _float(str(budget)) if budget else None,
            "groups": groups}


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
        Output("cmp-metric-pick", "options"),
        Input("cmp-budget", "value"),
        Input("cmp-tick", "n_intervals"),
        Input("cmp-groups", "value"),
        Input("cmp-metric", "data"),
        State("cmp-ids", "data"),
        State("cmp-project", "data"),
        State("cmp-token", "data"),
    )
    def render(
        budget: float | None, _tick: int | None, groups: list[str] | None,
        metric: str | None, ids: list[int], project: str | None, token: dict[str, Any] | None,
    ) -> tuple[Any, ...]:  # fmt: skip
        store = ctx.store
        groups = list(groups or [])
        project = group_compare.resolve_project(store, project, ids) if groups else project
        if dash_ctx.triggered_id == "cmp-tick":
            # Cheap check before any point is read: newest step and fit time of each run, each
            # group's fit and members; and the view asked for. The renderer drops the answer
            # of a render overtaken by a newer call of this callback (a tick while a slow
            # budget change renders): the page then still shows the old view, and only a
            # token that remembers which view it was rendered for lets the tick redo it.
            try:
                now = group_compare.change_tokens(store, ids, project, groups, metric)
            except NotFound:
                raise PreventUpdate from None  # the last render said what is missing
            if _rendered(now, budget, groups) == token:
                raise PreventUpdate
        if not ids and not groups:
            msg = empty_state("Nothing to compare: add groups above, or pick runs.")
            return (compare_figure([], unit="", metric=""), msg, [], "", None, "", budget, [],
                    no_update)
        detail = group_compare.compare_detail(
            store, ids, project, groups, metric, _float(str(budget)) if budget else None
        )
        budget_shown = detail.get("budget")
        if budget_shown is not None and float(budget_shown).is_integer() \
                and abs(budget_shown) <= MAX_SAFE_INT:
            # "3000", not "3000.0", in the box; a FLOPs budget (1e20 and up) stays a float:
            # past 2^63 Dash cannot send an int (a 500), past 2^53 a browser misreads it.
            budget_shown = int(budget_shown)
        if detail.get("error"):
            # Runs on different fit metrics keep their pills, and the picker offers the
            # metrics they all log.
            choices = detail.get("metric_choices")
            msg = empty_state(detail["error"] + (
                ": pick the metric to compare them on above." if choices else ""))
            chips = [_chip(app, it) for it in detail.get("runs") or []] or None
            return (compare_figure([], unit="", metric=""), msg, [], "", chips, "", budget,
                    token, choices if choices is not None else no_update)
        unit = detail["unit"]
        # Plain dicts, not plotly objects (`compare_figure_dict`): a tenth of the time.
        fig = typed_arrays(compare_figure_dict(
            detail["items"],
            unit=unit,
            metric=detail["metric"],
            budget=detail["budget"],
            sampled=detail["sampled"],
        ))  # fmt: skip
        fig["layout"] = {**fig["layout"],
                         "uirevision": ",".join(map(str, ids)) + "|" + "\x1f".join(groups)}
        notes = [data.mixed_units_note(detail.get("units") or [])]
        if detail["sampled"]:
            notes.append(
                "Long series are downsampled in the database over one shared compute range "
                f"(≤ {data.MAX_SCREEN_POINTS:,} points each); the fits use every point."
            )
        note = " ".join(n for n in notes if n)
        try:
            tokens = group_compare.change_tokens(store, ids, project, groups, metric)
        except NotFound:
            tokens = []
        params = group_compare.group_param_rows(detail, data.params_rows(detail))
        chips = [_chip(app, it) for it in detail["items"]]
        choices = [] if groups else data.metric_choices(store, ids)["metric_choices"]
        return (fig, _verdict(detail), params, note, chips, unit, budget_shown,
                _rendered(tokens, budget, groups), choices or [detail["metric"]])

    @app.callback(
        Output("cmp-metric", "data"),
        Input("cmp-metric-pick", "value"),
        State("cmp-metric", "data"),
        prevent_initial_call=True,
    )
    def pick_metric(picked: str | None, current: str | None) -> str:
        if not picked or picked == current:
            raise PreventUpdate
        return picked

    @app.callback(
        Output("cmp-groups", "options"),
        Output("cmp-project", "data"),
        Input("cmp-ids", "data"),
        State("cmp-project", "data"),
        State("cmp-groups", "value"),
    )
    def group_options(
        ids: list[int], project: str | None, chosen: list[str] | None
    ) -> tuple[Any, ...]:
        """The groups one may add: those of the project in the link, else of the first run's
        (groups are named within a project)."""
        project = group_compare.resolve_project(ctx.store, project, ids)
        names: list[str] = []
        if project:
            try:
                names = [g.name for g in ctx.store.list_groups(project)]
            except NotFound:
                names = []
        names += [g for g in chosen or [] if g not in names]  # keep what the link named
        return [{"label": g, "value": g} for g in names], project

    @app.callback(
        Output("cmp-scatter", "figure"),
        Input("cmp-ids", "data"),
        Input("cmp-groups", "value"),
        Input("cmp-project", "data"),
        State("cmp-metric", "data"),
    )
    def scatter(
        ids: list[int], groups: list[str] | None, project: str | None, metric: str | None
    ) -> Any:
        runs = []
        for i in ids:
            try:
                runs.append(ctx.store.get_run(i))
            except Exception:  # noqa: BLE001 - a deleted run just drops out
                continue
        groups = list(groups or [])
        highlight = {r.id: r.name for r in runs}
        projects = sorted({r.project for r in runs} | ({project} if groups and project
                                                          else set()))  # fmt: skip
        rows = data.ceiling_rows(ctx.store, projects, highlight)
        if groups:
            rows = group_compare.ceiling_rows(ctx.store, rows, project, groups, metric)
        fig = ceiling_figure(rows)
        fig.update_layout(title={"text": f"Ceiling vs efficiency: {', '.join(projects)}"})
        return fig

    @app.callback(
        Output("cmp-csv", "data"),
        Input("cmp-csv-btn", "n_clicks"),
        State("cmp-ids", "data"),
        State("cmp-project", "data"),
        State("cmp-groups", "value"),
        State("cmp-metric", "data"),
        State("cmp-budget", "value"),
        prevent_initial_call=True,
    )
    def download(
        _n: int, ids: list[int], project: str | None, groups: list[str] | None,
        metric: str | None, budget: float | None,
    ) -> dict[str, Any]:  # fmt: skip
        groups = list(groups or [])
        project = group_compare.resolve_project(ctx.store, project, ids)
        detail = group_compare.compare_detail(
            ctx.store, ids, project, groups, metric, _float(str(budget)) if budget else None
        )
        if detail.get("error"):
            raise PreventUpdate
        header = ["run", "run_id", "step", "compute", detail["metric"]]
        comment = f"compute in {detail['unit']}; budget {fmt(detail['budget'])}" + (
            "; downsampled for display" if detail["sampled"] else ""
        )
        if not groups:  # runs only: the export it always was
            rows: Any = (
                (it["label"], it["id"], s, c, v)
                for it in detail["items"]
                for s, c, v in zip(it["steps"], it["compute"], it["values"], strict=True)
            )
            text = to_csv(header, rows, comment)
        else:  # a group's rows are its seeds', each named, with the group in its own column
            rows = (
                (seed["name"], seed["id"], s, c, v, it["name"] if is_group else "")
                for it in detail["items"]
                for is_group in [it.get("kind") == "group"]
                for seed in (it["seeds"] if is_group else [it])
                for s, c, v in zip(seed["steps"], seed["compute"], seed["values"], strict=True)
            )
            text = to_csv([*header, "group"], rows, comment)
        return {"content": text, "filename": "compare.csv", "type": "text/csv"}

    for graph in ("cmp-graph", "cmp-scatter"):
        svg_without_webgl(app, graph)

    # Keep the URL in step with the budget and the groups without reloading the page.
    app.clientside_callback(
        """function(budget, groups, metric, ids, project) {
            if (!ids) { return; }
            const u = new URL(window.location.href);
            if (ids.length) { u.searchParams.set('runs', ids.join(',')); }
            else { u.searchParams.delete('runs'); }
            u.searchParams.delete('group');
            for (const g of (groups || [])) { u.searchParams.append('group', g); }
            if (project && groups && groups.length) { u.searchParams.set('project', project); }
            if (metric) { u.searchParams.set('metric', metric); }
            if (budget) { u.searchParams.set('budget', String(budget)); }
            else { u.searchParams.delete('budget'); }
            window.history.replaceState(window.history.state, '', u.toString());
        }""",
        Input("cmp-budget", "value"),
        Input("cmp-groups", "value"),
        Input("cmp-metric", "data"),
        State("cmp-ids", "data"),
        State("cmp-project", "data"),
    )
