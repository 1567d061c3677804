"""The Runs page's "forecast settings" panel: a project's fitted metric and opt-in priors.

What it saves is what ``PATCH /api/v1/projects/{project}`` sets, through the same service
(`services.projects.update_project`) and checks (`ProjectPatch`): the project's default fit
metric (a run's own `fit_metric` still wins) and its learned priors (``fitting/noise_prior.py``,
``fitting/b_prior.py``); every run of the project that does not set its own is refitted. An
explicit prior set through the API (``[centre, scale]``) shows as such and stays while its box
is ticked. Saving needs a token with write scope.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate
from pydantic import ValidationError

from scalewatch.dashboard.components import DashContext
from scalewatch.dashboard.data import MAX_TABLE_RUNS
from scalewatch.server.domain.changes import ProjectPatch
from scalewatch.server.domain.checks import field_errors
from scalewatch.server.domain.runs import Project
from scalewatch.server.fitting.b_prior import MIN_RUNS as B_MIN_RUNS
from scalewatch.server.fitting.hindcast import MIN_HINDCASTS
from scalewatch.server.services import projects
from scalewatch.server.store.base import RunQuery, Store

PRIORS = ("noise_prior", "b_prior")
NAMES = {"fit_metric": "fitted metric", "noise_prior": "noise prior", "b_prior": "B prior"}
OPTIONS = [
    {"label": " Evaluation noise: how autocorrelated this project's evaluations are",
     "value": "noise_prior"},
    {"label": " B: the efficiency exponent of this project's finished runs", "value": "b_prior"},
]
METRIC_NOTE = (
    "The metric every run of the project is fitted on, unless the run sets its own. Automatic: "
    "each run's validation metric when its framework's is recognised, else its reward."
)
PRIORS_NOTE = (
    "Priors, off by default. A run young enough that its ceiling is still uncertain borrows "
    "what this project's finished runs have shown: the ceiling A itself never gets a prior, "
    "and a run whose recipe differs keeps its own B (the prior has heavy tails). Each run's "
    "page names the priors its fit used."
)


def panel() -> html.Details:
    """Collapsed under the toolbar; shown once a project is picked."""
    return html.Details(
        id="runs-settings",
        style={"display": "none"},
        children=[
            html.Summary("Forecast settings for this project", className="meta"),
            html.Div(METRIC_NOTE, className="note"),
            dcc.Dropdown(id="runs-settings-metric", placeholder="automatic", clearable=True,
                         style={"width": 420}),
            html.Div(PRIORS_NOTE, className="note"),
            dcc.Checklist(id="runs-settings-priors", options=OPTIONS, value=[],
                          labelStyle={"display": "block", "fontSize": 14}),
            html.Div(id="runs-settings-status", className="note"),
            html.Button("Save settings", id="runs-settings-save", className="secondary"),
            html.Div(id="runs-settings-msg"),
            dcc.Store(id="runs-settings-saved", data=0),
        ],
    )


def _fmt(value: Any) -> str:
    return f"[{value[0]:g}, {value[1]:g}]" if isinstance(value, (list, tuple)) else str(value)


def status_text(project: Project, finished: int) -> str:
    """What the project's finished runs can teach, and any explicit prior in force."""
    lines = [
        f"{finished} finished run{'s' if finished != 1 else ''} to learn from: the noise prior "
        f"needs one, the B prior {B_MIN_RUNS} whose ceiling is identified (until then a fit "
        "uses none and says so).",
        # Not a setting (always on), but a user sizing up forecasts should know which applies.
        "Forecast intervals are as wide as this project's finished runs needed beyond their "
        "own forecasts (learned automatically; each run's page says so)."
        if finished >= MIN_HINDCASTS else
        "Forecast intervals use a default width learned on public RL curves until "
        f"{MIN_HINDCASTS} runs have finished ({MIN_HINDCASTS - finished} more to go); then, "
        "automatically, the width this project's own runs needed.",
    ]
    for key, name in (("noise_prior", "noise (rho mean, sd)"),
                      ("b_prior", "B (ln B centre, scale)")):
        if isinstance(value := getattr(project, key), tuple):
            lines.append(f"Explicit {name} prior set through the API: {_fmt(value)}; "
                         "unticking clears it.")
    return " ".join(lines)


def changes_for(project: Project, metric: str | None, ticked: list[str]) -> dict[str, Any]:
    """The PATCH that makes the project's defaults what the panel shows: the metric picked
    (None: automatic), a ticked box with no prior learns one from the project, an unticked
    one clears whatever was set (an explicit prior stays while ticked). Empty: no change."""
    changes: dict[str, Any] = {}
    if (metric or None) != project.fit_metric:
        changes["fit_metric"] = metric or None
    for key in PRIORS:
        current = getattr(project, key)
        if key in ticked and current is None:
            changes[key] = "project"
        elif key not in ticked and current is not None:
            changes[key] = None
    return changes


def said(changes: dict[str, Any]) -> str:
    """The saved changes in words: "fitted metric val/acc, B prior on"."""
    def value(key: str, v: Any) -> str:
        if key == "fit_metric":
            return str(v) if v else "automatic"
        return "on" if v else "off"

    return ", ".join(f"{NAMES[k]} {value(k, v)}" for k, v in changes.items())


def _metrics(store: Store, project: str) -> list[str]:
    """The metrics the project's runs log: the fit metric's choices."""
    runs, _ = store.list_runs(RunQuery(project=project, limit=MAX_TABLE_RUNS))
    return sorted({name for run in runs for name in run.latest})


def _finished_runs(store: Store, project: str) -> int:
    """How many of the project's runs are finished: the store's count, not a count of the
    runs one page of the list holds."""
    return store.list_runs(RunQuery(project=project, status="finished", limit=1))[1]


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("runs-settings", "style"),
        Output("runs-settings-metric", "options"),
        Output("runs-settings-metric", "value"),
        Output("runs-settings-priors", "value"),
        Output("runs-settings-status", "children"),
        Input("runs-project", "value"),
        Input("runs-settings-saved", "data"),
    )
    def show(project: str | None, _saved: int) -> tuple[Any, ...]:
        found = ctx.store.get_project(name=project) if project else None
        if found is None:
            return {"display": "none"}, [], None, [], ""
        metrics = _metrics(ctx.store, found.name)
        metric = found.fit_metric
        if metric and metric not in metrics:  # set before any run logged it
            metrics.append(metric)
        ticked = [key for key in PRIORS if getattr(found, key) is not None]
        finished = _finished_runs(ctx.store, found.name)
        return {}, metrics, metric, ticked, status_text(found, finished)

    @app.callback(
        Output("runs-settings-msg", "children"),
        Output("runs-settings-saved", "data"),
        Input("runs-settings-save", "n_clicks"),
        State("runs-project", "value"),
        State("runs-settings-metric", "value"),
        State("runs-settings-priors", "value"),
        State("runs-settings-saved", "data"),
        prevent_initial_call=True,
    )
    def save(
        _n: int, project: str | None, metric: str | None, ticked: list[str] | None, saved: int
    ) -> tuple[Any, ...]:
        found = ctx.store.get_project(name=project) if project else None
        if found is None:
            raise PreventUpdate
        if not ctx.can("write"):
            return html.Div(
                "Changing a project's forecast settings needs a token with write scope; this "
                "session's token is read-only.", className="msg-err", id="runs-settings-denied",
            ), no_update
        new_metric = metric and metric != found.fit_metric
        if new_metric and metric not in _metrics(ctx.store, found.name):
            return html.Div(f"No run of {found.name!r} logs a metric {metric!r}.",
                            className="msg-err", id="runs-settings-bad"), no_update
        changes = changes_for(found, metric, ticked or [])
        if not changes:
            return html.Div("Nothing to change.", className="msg-ok",
                            id="runs-settings-same"), no_update
        try:  # the API's checks and service: PATCH /api/v1/projects/{project}
            projects.update_project(ctx.store, found.name, ProjectPatch.model_validate(changes))
        except ValidationError as exc:
            why = "; ".join(f"{e['loc']}: {e['msg']}" for e in field_errors(exc))
            return html.Div(why, className="msg-err", id="runs-settings-bad"), no_update
        notify = getattr(ctx.state, "refit_notify", None)
        if notify is not None:  # the refitter would find the runs at its next poll anyway
            notify()
        return html.Div(f"Saved ({said(changes)}); the project's runs are being refitted.",
                        className="msg-ok", id="runs-settings-ok"), (saved or 0) + 1
