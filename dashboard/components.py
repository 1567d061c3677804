"""What every page shares: the callback context, graph config, tables, CSV export, empty
states. Pages import this module, never `scalewatch.dashboard.app` (which imports the pages)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import flask
from dash import ClientsideFunction, Dash, Input, Output, dash_table, html

from scalewatch.dashboard.auth import has_scope, request_info
from scalewatch.server.store.base import Store
from scalewatch.server.store.scoped import scoped

GRAPH_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}


@dataclass
class DashContext:
    """What callbacks need: the FastAPI app state (store, settings, token cache)."""

    state: Any  # starlette's State: attributes set by scalewatch.server.api.app.create_app

    @property
    def store(self) -> Store:
        """The store as the current request's token may use it: a session opened with a
        project-scoped token sees and changes only its projects, on every page and callback
        (`ScopedStore`; another project's run or alert is "not found")."""
        if not self.auth or not flask.has_request_context():
            return self.state.store
        req = flask.request
        info = request_info(self.state, dict(req.headers), dict(req.cookies))
        return cast(Store, scoped(self.state.store, info))

    @property
    def auth(self) -> bool:
        return bool(self.state.settings.auth)

    def can(self, scope: str) -> bool:
        """Whether the token of the current Dash request has `scope` (True with auth off)."""
        if not self.auth:
            return True
        req = flask.request
        return has_scope(request_info(self.state, dict(req.headers), dict(req.cookies)), scope)

    def scope(self) -> str:
        """The scope of the current Dash request's token ("admin" with auth off: the user
        runs the server), "" when there is none; what it may see of webhooks depends on it."""
        if not self.auth:
            return "admin"
        req = flask.request
        info = request_info(self.state, dict(req.headers), dict(req.cookies))
        return info.scope if info else ""


TABLE_STYLE: dict[str, Any] = {
    "style_table": {"overflowX": "auto"},
    "style_cell": {
        "fontFamily": "system-ui, -apple-system, Segoe UI, sans-serif",
        "fontSize": 13,
        "padding": "6px 10px",
        "textAlign": "left",
        "border": "none",
        "borderBottom": "1px solid #eceff1",
        "maxWidth": 360,
        "overflow": "hidden",
        "textOverflow": "ellipsis",
    },
    "style_header": {
        "fontWeight": 600,
        "whiteSpace": "normal",
        "height": "auto",
        "backgroundColor": "#f5f7fa",
        "borderBottom": "2px solid #cfd8dc",
    },
    "style_filter": {"backgroundColor": "#fbfcfd"},
    "markdown_options": {"link_target": "_self"},
}


def table(id_: str, columns: list[dict[str, Any]], **kwargs: Any) -> dash_table.DataTable:
    return dash_table.DataTable(id=id_, columns=columns, **{**TABLE_STYLE, **kwargs})


def column(name: str, id_: str, kind: str = "text", **extra: Any) -> dict[str, Any]:
    """A table column; kind "compute" is a number shown in engineering form (16k, 250k,
    1.04G: d3's SI prefixes, the table's nearest to `fmt`'s 1.04e9), sorted as a number."""
    col: dict[str, Any] = {"name": name, "id": id_,
                           "type": "numeric" if kind == "compute" else kind, **extra}
    if kind == "numeric":
        col["format"] = {"specifier": ",.4~r"}
    elif kind == "compute":
        col["format"] = {"specifier": ".3~s"}
    return col


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A cell a spreadsheet will not run: text starting like a formula (`=cmd|...`,
    `@SUM(...)`, `+`, `-`, tab, CR) gets a leading apostrophe (OWASP's advice). Numbers stay
    numbers, so negative values are untouched."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def to_csv(header: Sequence[str], rows: Iterable[Sequence[Any]], comment: str = "") -> str:
    buf = io.StringIO()
    if comment:
        buf.write(f"# {csv_cell(comment)}\n")
    w = csv.writer(buf)
    w.writerow([csv_cell(h) for h in header])
    for r in rows:
        w.writerow([csv_cell(v) for v in r])
    return buf.getvalue()


def write_denied(what: str, id_: str) -> html.Div:
    """The message for an action a read-only session may not take ("Acknowledging", ...)."""
    return html.Div(
        f"{what} needs a token with write scope; this session's token is read-only. Sign out "
        "and sign in with a write token.", className="msg-err", id=id_,
    )


def empty_state(text: str, id_: str | None = None) -> html.Div:
    kwargs = {"id": id_} if id_ else {}
    return html.Div(text, className="empty", **kwargs)


def headline(head: dict[str, str], id_: str) -> html.Div:
    """A page's headline number: ``head`` = {"label", "value", "note"} (the forecast of a run
    or of a recipe, built by ``dashboard.figures``)."""
    return html.Div(
        [
            html.Div(head["label"], className="headline-label"),
            html.Div(head["value"], className="headline-value"),
            html.Div(head["note"], className="headline-note"),
        ],
        id=id_,
        className="headline",
    )


def svg_without_webgl(app: Dash, graph_id: str) -> None:
    """Redraw the graph's WebGL traces as SVG in a browser without WebGL (no GPU, a remote
    desktop, a headless browser), where plotly would show "WebGL is not supported" instead of
    the chart (`assets/webgl_fallback.js`); with WebGL it changes nothing."""
    app.clientside_callback(
        ClientsideFunction(namespace="scalewatch", function_name="svgWithoutWebgl"),
        Output(graph_id, "figure", allow_duplicate=True),
        Input(graph_id, "figure"),
        prevent_initial_call=True,
    )
