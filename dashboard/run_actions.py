"""The Run page's "Rename or delete" panel: rename (write scope) and delete (admin scope, as
`DELETE /api/v1/runs/{id}`, after a confirmation). A rename goes through
`services.runs.rename_run`, the PATCH /api/v1/runs/{id} path (its `RunPatch` checks, then the
store's: unique within the project), so a new name gets the same checks and the same answers;
a delete is the store's `delete_run`, as the API's."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate
from pydantic import ValidationError

from scalewatch.dashboard.components import DashContext, write_denied
from scalewatch.server.domain.checks import field_errors
from scalewatch.server.services.runs import rename_run
from scalewatch.server.store.base import InvalidName, NameTaken, NotFound

PREFIX = "/dashboard/"


def panel() -> html.Details:
    return html.Details(
        id="run-actions",
        children=[
            html.Summary("Rename or delete this run", className="meta"),
            html.Div(
                className="toolbar",
                children=[
                    dcc.Input(id="run-rename-name", type="text", placeholder="new name",
                              debounce=False, style={"width": 280, "padding": "6px 8px"}),
                    html.Button("Rename", id="run-rename-btn", className="secondary"),
                    html.Span(style={"flex": 1}),
                    html.Button("Delete run…", id="run-delete-btn", className="danger"),
                ],
            ),  # fmt: skip
            html.Div(id="run-actions-msg"),
            dcc.ConfirmDialog(id="run-delete-confirm"),
            dcc.Location(id="run-goto", refresh=True),
        ],
    )


def _msg(text: str, ok: bool, id_: str) -> html.Div:
    return html.Div(text, className="msg-ok" if ok else "msg-err", id=id_)


def register_callbacks(app: Dash, ctx: DashContext) -> None:
    @app.callback(
        Output("run-actions-msg", "children"),
        Output("run-goto", "href"),
        Input("run-rename-btn", "n_clicks"),
        State("run-id", "data"),
        State("run-rename-name", "value"),
        prevent_initial_call=True,
    )
    def rename(_n: int | None, run_id: int, name: str | None) -> tuple[Any, ...]:
        if not ctx.can("write"):
            return write_denied("Renaming a run", "run-rename-denied"), no_update
        try:
            rename_run(ctx.store, run_id, name or "")
        except ValidationError as exc:  # the API's 422, in its words
            why = "; ".join(f"{e['loc']}: {e['msg']}" for e in field_errors(exc))
            return _msg(why, False, "run-rename-bad"), no_update
        except (InvalidName, NameTaken) as exc:
            return _msg(f"name: {exc}", False, "run-rename-bad"), no_update
        except NotFound as exc:
            return _msg(str(exc), False, "run-rename-bad"), no_update
        # A full reload: the title, the browser tab and every caption show the new name.
        return _msg(f"Renamed to {name}.", True, "run-rename-ok"), f"{PREFIX}run/{run_id}"

    @app.callback(
        Output("run-delete-confirm", "displayed"),
        Output("run-delete-confirm", "message"),
        Input("run-delete-btn", "n_clicks"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    def ask(_n: int | None, run_id: int) -> tuple[Any, ...]:
        try:
            run = ctx.store.get_run(run_id)
        except NotFound:
            raise PreventUpdate from None
        return True, (f"Delete run {run.name!r} of project {run.project!r} with all its "
                      "points, fits and alerts? This cannot be undone.")

    @app.callback(
        Output("run-actions-msg", "children", allow_duplicate=True),
        Output("run-goto", "href", allow_duplicate=True),
        Input("run-delete-confirm", "submit_n_clicks"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    def delete(_n: int | None, run_id: int) -> tuple[Any, Any]:
        if not ctx.can("admin"):
            return html.Div(
                "Deleting a run needs a token with admin scope (as DELETE /api/v1/runs/{id}); "
                "this session's token has less. Sign out and sign in with an admin token.",
                className="msg-err", id="run-delete-denied",
            ), no_update
        try:
            ctx.store.delete_run(run_id)
        except NotFound as exc:
            return _msg(str(exc), False, "run-delete-bad"), no_update
        return _msg("Run deleted.", True, "run-delete-ok"), PREFIX
