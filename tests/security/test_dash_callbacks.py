"""Issue 35: the Dash callback endpoint refuses what its callbacks were not written for (a 4xx
naming the input, never a 500 or minutes of work), every registered callback is covered by the
one check in front of them, Dash's file route answers 404 to traversal attempts, and a bearer
write token in an `Authorization` header works for the write callbacks."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.dashboard.callback_guard import server_side, spec_for
from scalewatch.server import limits
from scalewatch.server.scopes import AUTH_COOKIE
from tests.security.conftest import Authed

UPDATE = "/dashboard/_dash-update-component"


def _login(client: TestClient, token: str) -> None:
    r = client.post("/login", data={"token": token, "next": "/dashboard/"}, follow_redirects=False)
    assert r.status_code == 303 and AUTH_COOKIE in client.cookies


@pytest.fixture
def signed_in(authed_db: Authed) -> Authed:
    _login(authed_db.client, authed_db.tokens["read"])
    authed_db.deps = authed_db.client.get("/dashboard/_dash-dependencies").json()  # type: ignore[attr-defined]
    return authed_db


def _call(a: Authed, output: str, values: dict, changed: list[str] | None = None):  # noqa: ANN202
    return dash_call(a.client, output, values, changed=changed, deps=a.deps)  # type: ignore[attr-defined]


def test_twenty_thousand_run_ids_are_refused_at_once(signed_in: Authed) -> None:
    ids = list(range(1, 20_001))
    started = time.monotonic()
    r = _call(signed_in, "cmp-scatter", {"cmp-ids.data": ids})
    assert r.status_code == 400
    assert "cmp-ids.data" in r.json()["detail"] and f"at most {limits.MAX_COMPARE_RUNS}" in r.text
    # a refusal, not 44 s of work: a generous bound that only the old behaviour breaks
    assert time.monotonic() - started < 10
    ok = _call(signed_in, "cmp-scatter", {"cmp-ids.data": [1, 2]})
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("output", "values", "where"),
    [
        ("run-graph", {"run-id.data": 10**30}, "run-id.data"),
        ("run-csv", {"run-id.data": 10**30, "run-csv-btn.n_clicks": 1}, "run-id.data"),
        ("run-graph", {"run-id.data": 1, "run-cache.data": {"metric": "m"}}, "run-cache.data"),
        ("cmp-graph", {"cmp-ids.data": [1], "cmp-budget.value": 1e308}, "cmp-budget.value"),
        ("cmp-graph", {"cmp-ids.data": ["x", {}]}, "cmp-ids.data[0]"),
        ("cmp-scatter", {"cmp-ids.data": ["x", {}]}, "cmp-ids.data[0]"),
        ("cmp-groups", {"cmp-ids.data": [2**40]}, "cmp-ids.data[0]"),
        ("cmp-graph", {"cmp-ids.data": [1], "cmp-token.data": {"data": [10**30]}},
         "cmp-token.data"),
        ("grp-graph", {"grp-key.data": {"project": "p", "grup": "g"}}, "grp-key.data"),
        ("grp-graph", {"grp-key.data": {"x": 1}}, "grp-key.data"),
        ("grp-csv", {"grp-key.data": None, "grp-csv-btn.n_clicks": 1}, "grp-key.data"),
        ("runs-table", {"runs-project.value": "p\x00"}, "runs-project.value"),
        ("runs-table", {"runs-project.value": ["p"]}, "runs-project.value"),
        ("alerts-msg", {"alerts-ack.n_clicks": 1, "alerts-table.selected_row_ids": [-1]},
         "alerts-table.selected_row_ids[0]"),
    ],
)  # fmt: skip
def test_bad_callback_inputs_are_400_naming_the_input(
    signed_in: Authed, output: str, values: dict, where: str
) -> None:
    r = _call(signed_in, output, values)
    assert r.status_code == 400, r.text
    assert r.json()["detail"].startswith(where)


def test_json_infinity_and_nan_are_refused(signed_in: Authed) -> None:
    body = {
        "output": "cmp-scatter.figure",
        "outputs": {"id": "cmp-scatter", "property": "figure"},
        "inputs": [{"id": "cmp-ids", "property": "data", "value": [1]},
                   {"id": "cmp-groups", "property": "value", "value": None},
                   {"id": "cmp-project", "property": "data", "value": None}],
        "state": [{"id": "cmp-metric", "property": "data", "value": None}],
        "changedPropIds": [],
    }  # fmt: skip
    raw = json.dumps(body).replace('"value": [1]', '"value": [Infinity]')
    r = signed_in.client.post(UPDATE, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "cmp-ids.data[0]" in r.text
    # a lone surrogate (JSON can carry one as an escape) cannot be stored or sent back
    body["state"] = [{"id": "cmp-metric", "property": "data", "value": "m\udfff"}]
    r = signed_in.client.post(UPDATE, content=json.dumps(body),
                              headers={"content-type": "application/json"})
    assert r.status_code == 400 and "cmp-metric.data" in r.text


@pytest.mark.parametrize(
    "body",
    [
        {},
        [],
        "x",
        {"output": "nope.children", "outputs": {"id": "nope", "property": "children"}},
        {"output": "cmp-scatter.figure@ee0b90792c905448c3428e39b46854c5"
                   "8fe2978476811b7b699e18b6f3e50",  # a clientside callback
         "outputs": {"id": "cmp-scatter", "property": "figure"},
         "inputs": [{"id": "cmp-scatter", "property": "figure", "value": None}]},
        {"output": "run-csv.data", "outputs": {"id": "run-csv", "property": "data"},
         "inputs": [], "state": []},
        {"output": "run-csv.data", "outputs": {"id": "other", "property": "data"},
         "inputs": [{"id": "run-csv-btn", "property": "n_clicks", "value": 1}],
         "state": [{"id": "run-id", "property": "data", "value": 1},
                   {"id": "run-cache", "property": "data", "value": None}]},
        {"output": "run-csv.data", "outputs": {"id": "run-csv", "property": "data"},
         "inputs": [{"id": "run-id", "property": "data", "value": 1}],
         "state": [{"id": "run-id", "property": "data", "value": 1},
                   {"id": "run-cache", "property": "data", "value": None}]},
    ],
)  # fmt: skip
def test_malformed_callback_requests_are_400(signed_in: Authed, body: object) -> None:
    r = signed_in.client.post(UPDATE, json=body)
    assert r.status_code == 400, r.text


@pytest.mark.parametrize(
    "path",
    [
        "dash/..%2F..%2Fsetup.py",
        "dash/%2e%2e/%2e%2e/etc/passwd",
        "dash/deps/..%2f..%2f__init__.py",
        "nope/x.js",
        "dash/x.js",
        "plotly/..%2F..%2F..%2Fetc%2Fpasswd",
    ],
)
def test_component_suites_traversal_is_404(signed_in: Authed, path: str) -> None:
    r = signed_in.client.get(f"/dashboard/_dash-component-suites/{path}")
    assert r.status_code == 404
    assert "root:" not in r.text


def test_every_server_callback_input_has_a_declared_check(signed_in: Authed) -> None:
    dash_app = signed_in.app.state.dash_app
    missing = [
        f"{item['id']}.{item['property']}"
        for cb in dash_app.callback_map.values()
        if server_side(cb)
        for item in [*cb.get("inputs", []), *cb.get("state", [])]
        if spec_for(item["id"], item["property"]) is None
    ]
    assert not missing
    assert len(dash_app.callback_map) >= 25  # every page's callbacks were seen


def test_a_bearer_write_token_may_use_the_write_callbacks(authed_db: Authed) -> None:
    """Flask hands the header over as "Authorization": it used to be missed, and the write
    callbacks answered "needs a token with write scope" to a write token."""
    c = authed_db.client
    rid = c.post("/api/v1/runs", json={"project": "p", "name": "r"},
                 headers=authed_db.h("write")).json()["id"]  # fmt: skip
    rule = c.post(
        "/api/v1/alert-rules",
        json={"project": "p", "kind": "stalled", "run_id": rid, "params": {"minutes": 30}},
        headers=authed_db.h("write"),
    )
    assert rule.status_code == 201, rule.text
    deps = c.get("/dashboard/_dash-dependencies", headers=authed_db.h("read")).json()
    values = {"rules-toggle.n_clicks": 1, "rules-table.selected_row_ids": [rule.json()["id"]]}
    for scope, allowed in (("read", False), ("write", True)):
        c.headers.update(authed_db.h(scope))
        r = dash_call(c, "rules-msg", values, changed=["rules-toggle.n_clicks"], deps=deps)
        assert r.status_code == 200, r.text
        said = json.dumps(r.json()["response"])
        assert ("rules-ok" in said) is allowed and ("rules-denied" in said) is not allowed
    assert c.get(f"/api/v1/alert-rules/{rule.json()['id']}",
                 headers=authed_db.h("read")).json()["enabled"] is False  # fmt: skip


@pytest.mark.parametrize("pathname", [None, "", "x", "/run/1", "team/math", "/dashboar"])
def test_the_page_router_refuses_a_path_outside_the_dashboard(
    signed_in: Authed, pathname: str | None
) -> None:
    """Dash's page router (the `_pages_content` callback, registered at the first dashboard
    request, so the fuzzer's list of callbacks never held it) raised UnsupportedRelativePath,
    a 500 and a traceback, for any pathname not under /dashboard (null and "" too): the
    browser only sends paths under it."""
    r = _call(signed_in, "_pages_content", {"_pages_location.pathname": pathname,
                                            "_pages_location.search": ""})
    assert r.status_code == 400, r.text
    assert r.json()["detail"].startswith("_pages_location.pathname"), r.text
    for ok in ("/dashboard/run/1", "/dashboard/", "/dashboard", "/dashboard/nope"):
        page = _call(signed_in, "_pages_content", {"_pages_location.pathname": ok,
                                                   "_pages_location.search": None})
        assert page.status_code == 200, (ok, page.text[:300])


@pytest.mark.parametrize(
    ("config", "cell"),
    [
        ({"seed": 2**70}, str(2**70)),  # beyond 64 bits: the table callback was a 500
        ({"seed": 2**60}, str(2**60)),  # beyond 2^53: shown, then its CSV export refused
        ({"k" * 250: "v"}, "v"),  # an MLflow param key (<= 250): its column refused (200)
        ({"prompt": "x" * 6_000}, "x" * 6_000),  # an MLflow param value (<= 6,000): refused
    ],
)
def test_any_config_the_api_stores_shows_and_exports_on_the_runs_page(
    signed_in: Authed, config: dict, cell: str
) -> None:
    """A config POST /runs accepts (201) must not break the Runs page: an integer beyond 64
    bits made its table callback a 500 for the whole project; an integer beyond 2^53, a key
    over 193 characters or a value over 4,096 (MLflow params allow 250 and 6,000) made the
    page's own rows fail the callback guard, so "Download CSV" answered 400."""
    c, h = signed_in.client, {"Authorization": f"Bearer {signed_in.tokens['write']}"}
    made = c.post("/api/v1/runs", json={"project": "cfg", "name": "r", "config": config},
                  headers=h)
    assert made.status_code == 201, made.text
    table = _call(signed_in, "runs-table", {"runs-project.value": "cfg",
                                            "runs-view.value": "runs"})
    assert table.status_code == 200, table.text[:300]
    out = table.json()["response"]["runs-table"]
    key = "config." + next(iter(config))
    assert [row[key] for row in out["data"]] == [cell]
    csv = _call(signed_in, "runs-csv", {"runs-csv-btn.n_clicks": 1, "runs-view.value": "runs",
                                        "runs-table.data": out["data"],
                                        "runs-table.columns": out["columns"]})
    assert csv.status_code == 200, csv.text[:300]
    content = csv.json()["response"]["runs-csv"]["data"]["content"]
    assert key in content and cell in content


def test_a_run_with_steps_past_2_53_keeps_updating(signed_in: Authed) -> None:
    """Steps go to 2^62 (the API's bound), but the Run page's change token carried the last
    step as a number, which the callback guard refuses past 2^53 (a browser cannot hold it
    exactly): every refresh of such a run was a 400 and its page stopped updating."""
    c, h = signed_in.client, {"Authorization": f"Bearer {signed_in.tokens['write']}"}
    rid = c.post("/api/v1/runs", json={"project": "p", "name": "big-steps"}, headers=h).json()["id"]
    base = 2**60
    pts = [{"step": base + s, "compute": float(s + 1), "metrics": {"m": s / 10}} for s in range(5)]
    assert c.post(f"/api/v1/runs/{rid}/points", json={"points": pts}, headers=h).status_code == 200
    first = _call(signed_in, "run-graph", {"run-id.data": rid})
    assert first.status_code == 200, first.text[:300]
    cache = first.json()["response"]["run-cache"]["data"]
    more = [{"step": base + 9, "compute": 10.0, "metrics": {"m": 0.9}}]
    assert c.post(f"/api/v1/runs/{rid}/points", json={"points": more}, headers=h).status_code == 200
    tick = _call(signed_in, "run-graph",
                 {"run-id.data": rid, "run-tick.n_intervals": 1, "run-cache.data": cache},
                 changed=["run-tick.n_intervals"])
    assert tick.status_code == 200, tick.text[:300]
    assert tick.json()["response"]["run-cache"]["data"]["token"] != cache["token"]


@pytest.mark.parametrize(
    ("page", "search", "said"),
    [
        ("compare", "?runs=1,2&budget=5&budget=6", None),  # a repeated key: a 500 before
        ("run/1", "?metric=" + "m" * 300, "metric is longer than 250 characters"),
        ("run/1", "?metric=" + "m" * 5_000, "metric is longer than 250 characters"),
        ("run/1", "?metric=a&metric=b", None),
        ("", "?project=" + "p" * 300, "project is longer than 200 characters"),
        ("", "?project=a&project=b", None),
        ("alerts", "?state=a&state=b", None),
        ("compare", "?runs=1&project=" + "p" * 300 + "&group=x", "project is longer"),
        ("group", "?project=p&group=" + "g" * 300, "group is longer"),
    ],
)
def test_a_link_no_page_can_hold_says_so(signed_in: Authed, page: str, search: str,
                                         said: str | None) -> None:
    """A query value the page's components cannot hold (a repeated key, a name longer than
    any) made every callback of the page a 400 (a blank page, no word), the budget a 500;
    a query string past 4,096 characters blanked the whole page. The page now opens (a
    repeated key: its first value) or says what is wrong with the link."""
    r = _call(signed_in, "_pages_content", {"_pages_location.pathname": f"/dashboard/{page}",
                                            "_pages_location.search": search})
    assert r.status_code == 200, r.text[:300]
    shown = json.dumps(r.json()["response"])
    if said:
        assert said in shown, shown[:300]
    else:
        assert "longer than" not in shown


def test_callback_bodies_too_deep_or_chunked_are_4xx(signed_in: Authed) -> None:
    deep = signed_in.client.post(UPDATE, content="[" * 3000 + "]" * 3000,
                                 headers={"Content-Type": "application/json"})
    assert deep.status_code == 400 and "nested" in deep.json()["detail"], deep.text
    body = json.dumps({"output": "x.y", "inputs": []}).encode()
    chunked = signed_in.client.post(UPDATE, content=iter([body]),
                                    headers={"Content-Type": "application/json"})
    assert chunked.status_code == 411 and "Content-Length" in chunked.json()["detail"]


def test_the_rule_form_refuses_a_run_id_no_run_can_have() -> None:
    from scalewatch.dashboard.alert_rules import new_rule
    from scalewatch.server.alerts.checks import InvalidRule

    for watches in ("run:99999999999999999999999", "run:1_0", "run:-5", "run:²"):
        with pytest.raises(InvalidRule, match="not a run"):
            new_rule("p", watches, "asymptote_drop", {}, None, None)
    assert new_rule("p", "run:7", "asymptote_drop", {}, None, None).run_id == 7


def test_a_run_deleted_while_its_page_is_open_says_so(authed_db: Authed) -> None:
    """The page's tick met a deleted run and did nothing: the page went on showing it as
    running. Now its header says the run is gone, as a fresh load does."""
    c = authed_db.client
    _login(c, authed_db.tokens["read"])
    rid = c.post("/api/v1/runs", json={"project": "p", "name": "gone"},
                 headers=authed_db.h("write")).json()["id"]
    deps = c.get("/dashboard/_dash-dependencies").json()
    cache = {"metric": "reward", "token": [0], "last_step": -1, "shown": 0, "fit_until": None}
    assert c.delete(f"/api/v1/runs/{rid}", headers=authed_db.h("admin")).status_code == 204
    r = dash_call(c, "run-header", {"run-tick.n_intervals": 3, "run-id.data": rid,
                                    "run-cache.data": cache, "run-metric.value": "reward"},
                  changed=["run-tick.n_intervals"], deps=deps)
    assert r.status_code == 200, r.text
    assert f"Run {rid} does not exist (deleted?)" in json.dumps(r.json()["response"])
