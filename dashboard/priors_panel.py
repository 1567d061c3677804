"""The Runs page's "forecast priors" panel: switch a project's opt-in priors on or off.

Both priors are learned from the project's finished runs (``fitting/noise_prior.py``,
``fitting/b_prior.py``); saving sets the project's defaults exactly as
``PATCH /api/v1/projects/{project}`` does, and every run of the project that does not set its
own is refitted. An explicit prior set through the API (``[centre, scale]``) shows as such:
saving keeps it while its box stays ticked. Saving needs a token with write scope.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

from scalewatch.dashboard.components import DashContext
from scalewatch.server.fitting.b_prior import MIN_RUNS as B_MIN_RUNS
from scalewatch.server.store.base import RunQuery, Store

KEYS = ("noise_prior", "b_prior")
NAMES = {"noise_prior": "noise prior", "b_prior": "B prior"}
OPTIONS = [
    {"label": " Evaluation noise: how autocorrelated this project's evaluations are, and how "
              "far its forecasts have drifted", "value": "noise_prior"},
    {"label": " B: the efficiency exponent of this project's finished runs", "value": "b_prior"},
]
EXPLAIN = (
    "Off by default. A run young enough that its ceiling is still uncertain borrows what this "
    "project's finished runs have shown: the ceiling A itself never gets a prior, and a run "
    "whose recipe differs keeps its own B (the prior has heavy tails). Each run's page names "
    "the priors its fit used. Saving refits every run of the project that does not set its "
    "own (fit_settings)."
)


def panel() -> html.Details:
    """Collapsed under the toolbar; shown once a project is picked."""
    return html.Details(
        id="runs-priors",
        style={"display": "none"},
        children=[
            html.Summary("Forecast priors for this project", className="meta"),
            html.Div(EXPLAIN, className="note"),
            dcc.Checklist(id="runs-priors-on", options=OPTIONS, value=[],
                          labelStyle={"display": "block", "fontSize": 14}),
            html.Div(id="runs-priors-status", className="note"),
            html.Button("Save priors", id="runs-priors-save", className="secondary"),
            html.Div(id="runs-priors-msg"),
            dcc.Store(id="runs-priors-saved", data=0),
        ],
    )


def _fmt(value: Any) -> str:
    return f"[{value[0]:g}, {value[1]:g}]" if isinstance(value, list) else str(value)


def status_text(project: dict[str, Any], finished: int) -> str:
    """What the project's finished runs can teach, and any explicit prior in force."""
    lines = [
        f"{finished} finished run{'s' if finished != 1 else ''} to learn from: the noise prior "
        f"needs one, the B prior {B_MIN_RUNS} whose ceiling is identified (until then a fit "
        "uses none and says so)."
    ]
    for key, name in (("noise_prior", "noise (rho mean, sd)"), ("b_prior", "B (ln B centre, "
                                                                           "scale)")):
        if isinstance(project.get(key), list):
            lines.append(f"Explicit {name} prior set through the API: {_fmt(project[key])}; "
                         "unticking clears it.")
    return " ".join(lines)


def changes_for(project: dict[str, Any], ticked: list[str]) -> dict[str, Any]:
    """The PATCH that makes the project's defaults match the ticked boxes: a ticked box with no
    prior learns one from the project, an unticked one clears whatever was set (an explicit
    prior stays while ticked). Empty when nothing changes."""
    changes: dict[str, Any] = {}
    for key in KEYS:
        current = project.get(key)
        if key in ticked and current is None:
            changes[key] = "project"
        elif key not in ticked and current is not None:
            changes[key] = None
    return changes


def _finished_runs(store: Store, project: str) -> int:
    return store.list_runs(RunQuery(project=project, status="finished", limit=1))[1]


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("runs-priors", "style"),
        Output("runs-priors-on", "value"),
        Output("runs-priors-status", "children"),
        Input("runs-project", "value"),
        Input("runs-priors-saved", "data"),
    )
    def show(project: str | None, _saved: int) -> tuple:
        found = ctx.store.get_project(name=project) if project else None
        if found is None:
            return {"display": "none"}, [], ""
        ticked = [key for key in KEYS if found.get(key) is not None]
        return {}, ticked, status_text(found, _finished_runs(ctx.store, found["name"]))

    @app.callback(
        Output("runs-priors-msg", "children"),
        Output("runs-priors-saved", "data"),
        Input("runs-priors-save", "n_clicks"),
        State("runs-project", "value"),
        State("runs-priors-on", "value"),
        State("runs-priors-saved", "data"),
        prevent_initial_call=True,
    )
    def save(_n: int, project: str | None, ticked: list[str] | None, saved: int) -> tuple:
        found = ctx.store.get_project(name=project) if project else None
        if found is None:
            raise PreventUpdate
        if not ctx.can("write"):
            return html.Div(
                "Changing a project's priors needs a token with write scope; this session's "
                "token is read-only.", className="msg-err", id="runs-priors-denied",
            ), no_update
        changes = changes_for(found, ticked or [])
        if not changes:
            return html.Div("Nothing to change.", className="msg-ok",
                            id="runs-priors-same"), no_update
        ctx.store.update_project(found["name"], changes)
        notify = getattr(ctx.state, "refit_notify", None)
        if notify is not None:  # the refitter would find the runs at its next poll anyway
            notify()
        said = ", ".join(f"{NAMES[k]} {'on' if v else 'off'}" for k, v in changes.items())
        return html.Div(f"Saved ({said}); the project's runs are being refitted.",
                        className="msg-ok", id="runs-priors-ok"), (saved or 0) + 1
