"""Run: points, fit, extrapolation with band, fit history, residuals, config, alerts.

Live: every tick asks the store for the run's newest step and fit time (one cheap read). If
only points arrived, just those points are fetched (`since_step`) and appended to the chart
with `Patch()`; a new fit rebuilds the figures.
"""

from __future__ import annotations

import json
from typing import Any

from dash import Dash, Input, Output, Patch, State, dcc, html, no_update
from dash import ctx as dash_ctx
from dash.exceptions import PreventUpdate

from scalewatch.dashboard import data, run_actions
from scalewatch.dashboard.components import (
    GRAPH_CONFIG,
    DashContext,
    column,
    empty_state,
    headline,
    table,
    to_csv,
)
from scalewatch.dashboard.figures import (
    RUN_CHART_HEIGHT,
    fmt,
    forecast_headline,
    history_figure,
    residuals_figure,
    run_figure,
    withheld_notice,
)
from scalewatch.dashboard.links import BadLink, bad_link, link_text
from scalewatch.server import limits
from scalewatch.server.domain.checks import parse_id
from scalewatch.server.fitting import FitResult, predict
from scalewatch.server.store.base import NotFound

PATH_TEMPLATE = "/run/<run_id>"
TITLE = "Run"
TICK_MS = 2000
REBUILD_AFTER = 2500  # points on screen before a live page re-downsamples from the database


def layout(run_id: str | None = None, metric: Any = None, **_: Any) -> html.Div:
    rid = parse_id(str(run_id)) if run_id else None
    if not rid:  # not an id (parse_id: ASCII digits within the 32-bit range), or id 0
        return empty_state(f"No run {run_id!r}.")
    try:
        metric = link_text(metric, "metric", limits.MAX_METRIC_NAME_LENGTH)
    except BadLink as exc:
        return bad_link(exc)

    return html.Div(
        [
            dcc.Store(id="run-id", data=rid),
            dcc.Store(id="run-cache"),
            html.Div(id="run-header"),
            html.Div(
                className="toolbar",
                children=[
                    html.Label("metric", htmlFor="run-metric"),
                    dcc.Dropdown(
                        id="run-metric",
                        value=metric or None,
                        # The link's metric is an option from the start: a dropdown clears a
                        # value that is not among its options, before the run's list arrives.
                        options=[metric] if metric else [],
                        clearable=False,
                        style={"width": 240},
                    ),
                    html.Span(id="run-note", className="note"),
                    html.Span(style={"flex": 1}),
                    html.Button("Download CSV", id="run-csv-btn", className="secondary"),
                    dcc.Download(id="run-csv"),
                ],
            ),  # fmt: skip
            run_actions.panel(),
            html.Div(
                dcc.Graph(id="run-graph", config=GRAPH_CONFIG, style={"height": RUN_CHART_HEIGHT}),
                className="card",
            ),
            html.Div(
                className="grid2",
                children=[
                    html.Div(
                        dcc.Graph(id="run-history", config=GRAPH_CONFIG, style={"height": 330}),
                        className="card",
                    ),
                    html.Div(
                        dcc.Graph(id="run-residuals", config=GRAPH_CONFIG, style={"height": 330}),
                        className="card",
                    ),
                ],
            ),
            # Full width, the alerts first: their messages are long sentences, which half of a
            # 1400 px page cut off; the config is short.
            html.H3("Alerts"),
            html.Div(id="run-alerts"),
            html.H3("Config"),
            html.Pre(id="run-config", className="config"),
            dcc.Interval(id="run-tick", interval=TICK_MS),
        ]
    )


def _header(d: dict[str, Any]) -> html.Div:
    run = d["run"]
    tags = ", ".join(run.get("tags") or [])
    pts = d["points"]
    bits = [
        f"project {run['project']}",
        f"status {run['status']}",
        f"{pts['total']:,} points of {d['metric']}",
        f"last compute {fmt(run.get('last_compute'))} {d['unit']}",
    ]
    if d.get("target"):
        bits.append(f"target {fmt(d['target'])} {d['unit']}")
    if tags:
        bits.append(f"tags {tags}")
    head = forecast_headline(d["fit"], d.get("target"), d["unit"])
    withheld = _withheld_box(d["fit"], d["unit"])
    return html.Div(
        [
            html.H2(
                [
                    # A short line in the run's chart colour (a legend key, not a status light).
                    html.Span(className="run-swatch", title="this run's colour in charts",
                              style={"backgroundColor": d["color"]}),
                    run["name"],
                ],
                id="run-title",
            ),
            html.Div(" · ".join(bits), className="meta"),
            html.Div(_fit_metric_text(run), id="run-fit-metric", className="meta"),
            *_fit_metric_warning(run),
            *_refit_lag(d.get("refit_wait")),
            headline(head, "run-headline"),
            *([withheld] if withheld is not None else []),
        ]
    )


# Below this a fit simply has not caught up with the newest evaluation yet; beyond it the
# refitter is behind (a backlog), and the fit shown is older than the run.
REFIT_LAG_SHOWN = 30.0


def _refit_lag(wait: float | None) -> list[html.Div]:
    if wait is None or wait <= REFIT_LAG_SHOWN:
        return []
    return [html.Div(
        f"The fit is behind: the newest points have waited {wait:,.0f} s for a refit (the "
        "server's refitter has a backlog). The fit below is from before them.",
        id="run-refit-lag", className="warn-box", role="status")]


def _withheld_box(fit: dict[str, Any] | None, unit: str) -> html.Div | None:
    """A warning box saying why the fit withholds A and how much more compute would identify
    it (``withheld_notice``); None when A is claimed."""
    notice = withheld_notice(fit, unit)
    if notice is None:
        return None
    body: list[Any] = [html.Div(notice["title"], className="withheld-title")]
    if notice["reasons"]:
        body.append(html.Ul([html.Li(r) for r in notice["reasons"]]))
    if notice["compute"]:
        body.append(html.Div(notice["compute"], className="withheld-compute"))
    return html.Div(body, id="run-withheld", className="withheld", role="status")


def _fit_metric_text(run: dict[str, Any]) -> str:
    """Which metric the run's fit follows and why (its own, the project's default, or the
    framework metric recognised by name)."""
    why = run.get("fit_metric_reason")
    return f"fits {run.get('fit_metric')}" + (f" ({why})" if why else "")


def _fit_metric_warning(run: dict[str, Any]) -> list[html.Div]:
    """The fit follows a training reward although the run logs a validation-looking metric:
    said as a warning above the forecast, not in the caption."""
    warning = run.get("fit_metric_warning")
    if not warning:
        return []
    return [html.Div([html.Strong("Check the fitted metric: "), warning],
                     id="run-fit-metric-warning", className="warn-box", role="alert")]


def _note(d: dict[str, Any], shown: int) -> str:
    pts = d["points"]
    if pts["downsampled"]:
        return (
            f"showing {shown:,} of {pts['total']:,} points (downsampled in the database: each "
            "bucket keeps its first, last, lowest and highest point)"
        )
    return ""


def _alerts(d: dict[str, Any]) -> Any:
    if d["alerts"] is None:
        return empty_state("Alerts are not enabled on this server.")
    if not d["alerts"]:
        return empty_state("No alerts for this run.")
    rows = [
        {
            "state": a.state,
            "kind": a.kind.value,
            "message": a.message,
            "created_at": data.utc_text(a.created_at),
        }
        for a in d["alerts"]
    ]
    cols = [column(n, n) for n in ("state", "kind", "message", "created_at")]
    # The message wraps instead of ending in an ellipsis.
    return table("run-alerts-table", cols, data=rows, page_size=10,
                 style_data_conditional=[{"if": {"column_id": "message"},
                                          "whiteSpace": "normal", "maxWidth": 760}])


def _figures(d: dict[str, Any]) -> tuple[Any, ...]:
    common = {"color": d["color"], "unit": d["unit"]}
    main = run_figure(
        d["points"],
        d["fit"],
        metric=d["metric"],
        title=f"{d['run']['name']}: {d['metric']}",
        warmup=d["warmup"],
        fit_until=d["fit_until"],
        target=d["target"],
        **common,
    )
    main.update_layout(uirevision=f"{d['run']['id']}:{d['metric']}")
    hist = history_figure(d["history"], **common)
    resid = residuals_figure(
        d["points"], d["fit"], warmup=d["warmup"], fit_until=d["fit_until"], **common
    )
    return main, hist, resid


def _gone(run_id: int) -> html.Div:
    return empty_state(f"Run {run_id} does not exist (deleted?).")


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    run_actions.register_callbacks(app, ctx)

    @app.callback(
        Output("run-graph", "figure"),
        Output("run-history", "figure"),
        Output("run-residuals", "figure"),
        Output("run-header", "children"),
        Output("run-config", "children"),
        Output("run-alerts", "children"),
        Output("run-note", "children"),
        Output("run-metric", "options"),
        Output("run-cache", "data"),
        Input("run-metric", "value"),
        Input("run-tick", "n_intervals"),
        State("run-id", "data"),
        State("run-cache", "data"),
    )
    def render(
        metric: str | None, _tick: int | None, run_id: int, cache: dict[str, Any] | None
    ) -> tuple[Any, ...]:
        store = ctx.store
        if dash_ctx.triggered_id == "run-metric" and cache and metric == cache["metric"]:
            raise PreventUpdate  # the dropdown was only synced to what is already shown
        if dash_ctx.triggered_id == "run-tick" and cache is not None \
                and (metric or cache["metric"]) == cache["metric"]:
            try:
                run = store.get_run(run_id)
            except NotFound:  # deleted while the page is open: say so (it went on as if alive)
                return (no_update,) * 3 + (_gone(run_id),) + (no_update,) * 5
            token = data.change_token(run)
            if token == cache["token"]:
                raise PreventUpdate  # nothing new: one small query, nothing sent
            if token[1:] == cache["token"][1:] and 0 < cache["shown"] < REBUILD_AFTER:
                new = data.new_points(store, run_id, cache["metric"], cache["last_step"])
                if not new["steps"]:
                    return (*(no_update,) * 8, {**cache, "token": token})
                return _append(new, cache, token)
        try:
            d = data.run_detail(store, run_id, metric)
        except NotFound:
            return (no_update,) * 3 + (_gone(run_id),) + (no_update,) * 5
        main, hist, resid = _figures(d)
        steps = d["points"]["steps"]
        cache = {
            "metric": d["metric"],
            "token": d["token"],
            "last_step": steps[-1] if steps else -1,
            "shown": len(steps),
            "fit_until": d["fit_until"],
        }
        options = [{"label": m, "value": m} for m in d["metrics"]]
        config = json.dumps(d["run"].get("config") or {}, indent=2, sort_keys=True)
        return (
            main,
            hist,
            resid,
            _header(d),
            config,
            _alerts(d),
            _note(d, len(steps)),
            options,
            cache,
        )

    @app.callback(
        Output("run-metric", "value"),
        Input("run-cache", "data"),
        State("run-metric", "value"),
    )
    def sync_metric(cache: dict[str, Any] | None, current: str | None) -> Any:
        if not cache or cache["metric"] == current:
            raise PreventUpdate
        return cache["metric"]

    @app.callback(
        Output("run-csv", "data"),
        Input("run-csv-btn", "n_clicks"),
        State("run-id", "data"),
        State("run-cache", "data"),
        prevent_initial_call=True,
    )
    def download(_n: int, run_id: int, cache: dict[str, Any] | None) -> dict[str, Any]:
        try:
            d = data.run_detail(ctx.store, run_id, (cache or {}).get("metric"))
        except NotFound:
            raise PreventUpdate from None  # the page already says the run is gone
        pts = d["points"]
        res = FitResult.from_dict(d["fit"])
        fitted = predict(res, pts["compute"]) if res.params else [None] * len(pts["compute"])
        rows = (
            (s, c, v, None if f is None or f != f else round(float(f), 6))
            for s, c, v, f in zip(pts["steps"], pts["compute"], pts["values"], fitted, strict=True)
        )
        comment = f"run {d['run']['name']} ({run_id}), compute in {d['unit']}" + (
            f"; downsampled: {len(pts['steps'])} of {pts['total']} points"
            if pts["downsampled"]
            else ""
        )
        text = to_csv(["step", "compute", d["metric"], "fit"], rows, comment)
        return {"content": text, "filename": f"run-{run_id}-{d['metric']}.csv", "type": "text/csv"}


def _append(new: dict[str, Any], cache: dict[str, Any], token: list[Any]) -> tuple[Any, ...]:
    """Extend the points (or held-out) trace with only the new points."""
    fig = Patch()
    until = cache.get("fit_until")
    inside = [(c, v) for c, v in zip(new["compute"], new["values"], strict=True) if c > 0]
    held = [(c, v) for c, v in inside if until and c > until]
    inside = [(c, v) for c, v in inside if not (until and c > until)]
    if inside:
        fig["data"][0]["x"].extend([c for c, _ in inside])
        fig["data"][0]["y"].extend([v for _, v in inside])
    if held:
        fig["data"][1]["x"].extend([c for c, _ in held])
        fig["data"][1]["y"].extend([v for _, v in held])
        fig["data"][1]["visible"] = True
        fig["data"][1]["showlegend"] = True
    cache = {
        **cache,
        "token": token,
        "last_step": new["steps"][-1],
        "shown": cache["shown"] + len(new["steps"]),
    }
    return (fig, *(no_update,) * 7, cache)
