"""One check in front of every Dash callback: the `_dash-update-component` request is read
and checked before Dash runs anything, so no callback sees a value it was not written for.

A callback request names its callback by its output and carries each input's and state's
value. Here the request must name a registered server-side callback, carry exactly its
inputs and states in order, and every value must fit the spec declared for its component and
property in `SPECS` (lists capped at the documented limits, ids 32-bit, numbers finite, text
storable). Anything else is a 400 that says what and where. A callback whose input has no
spec is refused too (fail closed); tests/security/test_dash_callbacks.py checks every
registered callback is covered.

Also: a `_dash-component-suites` path Dash does not serve (another package, `..`) is a 404,
not the 500 of Dash's own DependencyException.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import flask
from dash import Dash
from dash.exceptions import DependencyException

from scalewatch.dashboard.checks import (
    Bool,
    Either,
    Int,
    Json,
    ListOf,
    Maybe,
    Num,
    Record,
    Refused,
    Spec,
    Text,
)
from scalewatch.server import limits

ROWS = limits.MAX_DASHBOARD_ROWS
DASHBOARD_PATH = "/dashboard"  # the app's requests_pathname_prefix, without its final "/"
RUN_ID = Int(1, limits.MAX_ID)
COUNT = Maybe(Int(0, 2**31 - 1))  # n_clicks, n_intervals, the pages' change counters
NAME = Text(limits.MAX_NAME_LENGTH)  # project and run names
METRIC = Text(limits.MAX_METRIC_NAME_LENGTH)  # metric names (as long as MLflow's metric keys)
GROUP = Text(limits.MAX_GROUP_LENGTH)
FLOAT = Num(-sys.float_info.max, sys.float_info.max)
ROW_IDS = Maybe(ListOf(RUN_ID, ROWS))  # the ids of the ticked rows of a table
# A table's rows and columns, sent back for its CSV export: objects of plain cells. A run's
# config is a column per key ("config.KEY") and a cell per value, as long as the config the API
# stores (MLflow params alone have 250-character keys and 6,000-character values); the body
# cap bounds the whole.
CELL = limits.MAX_CONFIG_BYTES + len("config.")
TABLE_ROWS = Maybe(ListOf(
    Record({}, extra=Json(max_items=100, max_depth=1, max_text=CELL), max_key=CELL), ROWS))
TABLE_COLUMNS = Maybe(ListOf(
    Record({"id": Text(CELL), "name": Text(CELL)}, required=frozenset({"id"}),
           extra=Json(max_items=20, max_depth=2)),
    1_000,
))  # fmt: skip
TOKEN = Maybe(Json(max_items=ROWS, max_depth=6))  # a change token the server sent the page

SPECS: dict[str, Spec] = {
    # Runs page and its forecast-settings panel
    "runs-project.value": Maybe(NAME),
    "runs-view.value": Maybe(Text(16, ("runs", "groups"))),
    "runs-tick.n_intervals": COUNT,
    "runs-digest.data": Maybe(Text(64)),
    "runs-table.selected_row_ids": ROW_IDS,
    "groups-table.selected_row_ids": Maybe(
        ListOf(Text(limits.MAX_NAME_LENGTH + limits.MAX_GROUP_LENGTH + 1), ROWS)
    ),
    "runs-table.data": TABLE_ROWS,
    "runs-table.columns": TABLE_COLUMNS,
    "groups-table.data": TABLE_ROWS,
    "groups-table.columns": TABLE_COLUMNS,
    "runs-csv-btn.n_clicks": COUNT,
    "runs-settings-saved.data": COUNT,
    "runs-settings-save.n_clicks": COUNT,
    "runs-settings-metric.value": Maybe(METRIC),
    "runs-settings-priors.value": Maybe(ListOf(Text(16, ("noise_prior", "b_prior")), 2)),
    # Run page
    "run-id.data": RUN_ID,
    "run-metric.value": Maybe(METRIC),
    "run-tick.n_intervals": COUNT,
    "run-csv-btn.n_clicks": COUNT,
    "run-rename-name.value": Maybe(Text(4 * limits.MAX_NAME_LENGTH)),  # the store says why
    "run-rename-btn.n_clicks": COUNT,
    "run-delete-btn.n_clicks": COUNT,
    "run-delete-confirm.submit_n_clicks": COUNT,
    "run-cache.data": Maybe(Record(
        {"metric": METRIC, "token": ListOf(Json(max_items=8, max_depth=1), 8),
         "last_step": Int(-1, limits.MAX_STEP), "shown": Int(0, 2**31 - 1),
         "fit_until": Maybe(FLOAT)},
        required=frozenset({"metric", "token", "last_step", "shown"}),
    )),  # fmt: skip
    # Group page
    "grp-key.data": Record(
        {"project": NAME, "group": GROUP, "metric": Maybe(METRIC)},
        required=frozenset({"project", "group"}),
    ),
    "grp-tick.n_intervals": COUNT,
    "grp-token.data": TOKEN,
    "grp-csv-btn.n_clicks": COUNT,
    # Compare page: at most MAX_COMPARE_RUNS runs and groups, as the API's /compare
    "cmp-ids.data": ListOf(RUN_ID, limits.MAX_COMPARE_RUNS),
    "cmp-groups.value": Maybe(ListOf(GROUP, limits.MAX_COMPARE_RUNS)),
    "cmp-project.data": Maybe(NAME),
    "cmp-metric.data": Maybe(METRIC),
    "cmp-metric-pick.value": Maybe(METRIC),
    "cmp-budget.value": Maybe(Either((Num(0, limits.MAX_BUDGET), Text(64)))),
    "cmp-tick.n_intervals": COUNT,
    "cmp-token.data": TOKEN,
    "cmp-csv-btn.n_clicks": COUNT,
    # Alerts page and its rules panel
    "alerts-state.value": Maybe(Text(16)),
    "alerts-tick.n_intervals": COUNT,
    "alerts-acked.data": COUNT,
    "alerts-table.selected_row_ids": ROW_IDS,
    "alerts-ack.n_clicks": COUNT,
    "rules-changed.data": COUNT,
    "rules-table.selected_row_ids": ROW_IDS,
    "rules-delete.n_clicks": COUNT,
    "rules-toggle.n_clicks": COUNT,
    "rules-confirm.submit_n_clicks": COUNT,
    "rules-new.open": Maybe(Bool()),
    "rule-project.value": Maybe(NAME),
    "rule-watches.value": Maybe(Text(limits.MAX_GROUP_LENGTH + 16)),
    "rule-kind.value": Maybe(Text(64)),
    "rule-param.id": Record({"type": Text(16, ("rule-param",)), "name": Text(64)},
                            required=frozenset({"type", "name"})),
    "rule-param.value": Maybe(FLOAT),
    "rule-webhook.value": Maybe(Text(4096)),
    "rule-secret.value": Maybe(Text(4096)),
    "rule-create.n_clicks": COUNT,
    # Dash's pages: the location the layout is built for. Dash's router raises (a 500) for a
    # path outside its prefix, null included; the browser only sends paths under it.
    "_pages_location.pathname": Text(4096, prefix=DASHBOARD_PATH),
    # A page's query string: long enough that a page can say which of its values is too long
    # (each page bounds its own: dashboard/links.py); 4,096 left a longer link a blank page.
    "_pages_location.search": Maybe(Text(65_536)),
}
MAX_PATTERN_ITEMS = 32  # components one ALL-pattern input may match (a rule's parameters)
MAX_CHANGED = 64


def _component_key(cid: Any, prop: str) -> str:
    """`SPECS`' key: "id.property", or for a pattern-matching id its "type.property"."""
    if isinstance(cid, str) and cid.startswith("{"):
        cid = json.loads(cid)
    if isinstance(cid, dict):
        return f"{cid.get('type')}.{prop}"
    return f"{cid}.{prop}"


def spec_for(cid: Any, prop: str) -> Spec | None:
    return SPECS.get(_component_key(cid, prop))


def _outputs_of(output: str) -> list[tuple[str, str]]:
    """(id, property) of each output named in a callback's output string (properties without
    the `@hash` of `allow_duplicate`)."""
    parts = output[2:-2].split("...") if output.startswith("..") else [output]
    out = []
    for part in parts:
        cid, _, prop = part.rpartition(".")
        out.append((cid, prop.split("@", 1)[0]))
    return out


def _check_outputs(body: dict[str, Any], output: str) -> None:
    want = _outputs_of(output)
    got = body.get("outputs")
    items = got if isinstance(got, list) else [got]
    if not isinstance(got, list) and len(want) > 1:
        raise Refused("outputs: expected a list of this callback's outputs")
    seen = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("property"), str):
            raise Refused("outputs: each output needs an id and a property")
        cid = item.get("id")
        cid = json.dumps(cid, sort_keys=True, separators=(",", ":")) \
            if isinstance(cid, dict) else cid
        seen.append((cid, item["property"].split("@", 1)[0]))
    if seen != want:
        raise Refused(f"outputs: do not match the callback of output {output[:80]!r}")


def _check_item(item: Any, registered: dict[str, Any], where: str) -> None:
    cid, prop = registered["id"], registered["property"]
    spec = spec_for(cid, prop)
    if spec is None:
        raise Refused(f"{where}: {_component_key(cid, prop)} has no declared check")
    name = _component_key(cid, prop)
    if isinstance(cid, str) and cid.startswith("{"):  # pattern: a list of matched components
        if not isinstance(item, list) or len(item) > MAX_PATTERN_ITEMS:
            raise Refused(f"{where} ({name}): expected a list of at most "
                          f"{MAX_PATTERN_ITEMS} components")
        pattern = json.loads(cid)
        for i, one in enumerate(item):
            if not isinstance(one, dict) or one.get("property") != prop \
                    or not isinstance(one.get("id"), dict) \
                    or one["id"].get("type") != pattern.get("type"):
                raise Refused(f"{where}[{i}] ({name}): not a component of this pattern")
            spec.check(one.get("value"), f"{name}[{i}]")
        return
    if not isinstance(item, dict) or item.get("id") != cid or item.get("property") != prop:
        raise Refused(f"{where}: expected {name}")
    spec.check(item.get("value"), name)


def server_side(registered: dict[str, Any]) -> bool:
    """A callback the server runs (clientside ones are listed in the map too, without one)."""
    return "callback" in registered


def check_request(dash_app: Dash, body: Any) -> None:
    """Raise Refused unless `body` is a well-formed call of one of `dash_app`'s callbacks with
    every value within its spec."""
    if not isinstance(body, dict):
        raise Refused("body: expected a JSON object")
    output = body.get("output")
    registered = dash_app.callback_map.get(output) if isinstance(output, str) else None
    if registered is None or not server_side(registered) or not isinstance(output, str):
        raise Refused("output: names no server-side callback of this dashboard")
    _check_outputs(body, output)
    for kind in ("inputs", "state"):
        want = registered.get(kind) or []
        got = body.get(kind, [])
        if not isinstance(got, list) or len(got) != len(want):
            raise Refused(f"{kind}: expected {len(want)} items for this callback")
        for i, (item, reg) in enumerate(zip(got, want, strict=True)):
            _check_item(item, reg, f"{kind}[{i}]")
    changed = body.get("changedPropIds", [])
    if not isinstance(changed, list) or len(changed) > MAX_CHANGED:
        raise Refused(f"changedPropIds: expected a list of at most {MAX_CHANGED} ids")
    for i, prop_id in enumerate(changed):
        Text(4096).check(prop_id, f"changedPropIds[{i}]")


def install(dash_app: Dash) -> None:
    """Check callback requests before Dash dispatches them; 404 for files Dash does not serve."""
    server = dash_app.server
    # The page router's pathname spec names the prefix: a move of the app must move it too.
    assert dash_app.config.requests_pathname_prefix.rstrip("/") == DASHBOARD_PATH
    update_path = dash_app.config.routes_pathname_prefix + "_dash-update-component"

    @server.before_request
    def _check_callback() -> flask.Response | None:
        if flask.request.path != update_path or flask.request.method != "POST":
            return None
        if (flask.request.content_length or 0) > limits.MAX_BODY_BYTES:
            return _refuse(f"body larger than {limits.MAX_BODY_BYTES} bytes", 413)
        if flask.request.content_length is None:  # chunked: Flask reads it as empty here
            return _refuse("a callback request needs a Content-Length (not a chunked body)", 411)
        try:
            body = flask.request.get_json(silent=True)
        except RecursionError:  # `silent` catches ValueError only: "[" * 3000 was a 500
            return _refuse("body: JSON nested too deeply", 400)
        try:
            check_request(dash_app, body)
        except Refused as exc:
            return _refuse(str(exc), 400)
        return None

    @server.errorhandler(DependencyException)
    def _no_such_file(_exc: DependencyException) -> flask.Response:
        return _refuse("no such dashboard file", 404)


def _refuse(detail: str, status: int) -> flask.Response:
    response = flask.jsonify({"detail": detail})
    response.status_code = status
    return response
