"""Issue 35: property-based fuzzing of the Dash callback endpoint. For every registered
server-side callback, hypothesis builds `_dash-update-component` requests whose inputs and
states are either valid values drawn from the callback guard's own specs (seeded runs, groups
and rules among them, so the callbacks run their real paths) or hostile JSON (huge and
negative numbers, Infinity, wrong types, lone surrogates, long lists), sent with a read-scope
and a write-scope session cookie. No request may be answered with a 5xx."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalewatch.dashboard.callback_guard import server_side, spec_for
from scalewatch.dashboard.checks import (
    Bool,
    Either,
    Int,
    Json,
    ListOf,
    Maybe,
    Num,
    Record,
    Spec,
    Text,
)
from scalewatch.server.ingest import PointRow
from scalewatch.server.refit import Refitter
from scalewatch.server.scopes import AUTH_COOKIE
from tests.conftest import make_app
from tests.dashboard.seed import series

EXAMPLES = 2_000  # requests per backend
UPDATE = "/dashboard/_dash-update-component"
NAMES = ["p", "g", "seed-0", "seed-1", "lone", "val/acc", "reward", "nope", "runs", "groups",
         "active", "open", "all", "asymptote_drop", "stalled", "every", "group:g", "run:1",
         "noise_prior", "b_prior", "p\x1fg", "/run/1", "/compare", "?runs=1,2",
         "?project=p&group=g", "/group", "/alerts", "?runs=1,99999999999", "/run/²"]  # fmt: skip

JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([10**30, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -1e308]),
    st.text(max_size=12), st.sampled_from(["\udfff", "x\x00", "1e308", "inf", "nan"] + NAMES),
)  # fmt: skip
HOSTILE = st.recursive(
    JSON_LEAF,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.sampled_from(["project", "group", "metric", "x", "token", "id"]),
                        kids, max_size=4),
    ),
    max_leaves=8,
) | st.lists(st.integers(1, 50), min_size=21, max_size=40)  # over the compare cap


def _text(spec: Text) -> st.SearchStrategy[str]:
    if spec.choices:
        return st.sampled_from(spec.choices)
    free = st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
                   max_size=min(spec.max_len, 24))  # fmt: skip
    text = st.one_of(st.sampled_from([n for n in NAMES if len(n) <= spec.max_len]), free)
    return text.map(lambda t: spec.prefix + t) if spec.prefix else text


def valid(spec: Spec) -> st.SearchStrategy[Any]:  # noqa: PLR0911 - one case per spec kind
    """Values that pass `spec`, biased towards what the seeded database holds."""
    if isinstance(spec, Int):
        return st.one_of(st.integers(max(spec.lo, -1), min(spec.hi, 12)),
                         st.integers(spec.lo, spec.hi))  # fmt: skip
    if isinstance(spec, Num):
        return st.floats(max(spec.lo, -1e6), min(spec.hi, sys.float_info.max),
                         allow_nan=False, allow_infinity=False)  # fmt: skip
    if isinstance(spec, Text):
        return _text(spec)
    if isinstance(spec, Bool):
        return st.booleans()
    if isinstance(spec, Maybe):
        return st.one_of(st.none(), valid(spec.inner))
    if isinstance(spec, Either):
        return st.one_of(*(valid(o) for o in spec.options))
    if isinstance(spec, ListOf):
        return st.lists(valid(spec.item), max_size=min(spec.max_items, 6))
    if isinstance(spec, Record):
        return st.fixed_dictionaries(
            {k: valid(v) for k, v in spec.fields.items() if k in spec.required},
            optional={k: valid(v) for k, v in spec.fields.items() if k not in spec.required},
        )
    if isinstance(spec, Json):
        return HOSTILE.filter(lambda v: _passes(spec, v))
    raise AssertionError(f"no generator for {spec!r}")


def _passes(spec: Spec, value: Any) -> bool:
    try:
        spec.check(value, "x")
    except ValueError:
        return False
    return True


def _item(reg: dict[str, Any]) -> st.SearchStrategy[Any]:
    cid, prop = reg["id"], reg["property"]
    spec = spec_for(cid, prop)
    assert spec is not None, (cid, prop)
    value = st.one_of(valid(spec), valid(spec), HOSTILE)  # two in three valid
    if isinstance(cid, str) and cid.startswith("{"):
        kind = json.loads(cid)["type"]
        one = st.builds(
            lambda name, v: {"id": {"type": kind, "name": name}, "property": prop, "value": v},
            st.sampled_from(["threshold", "drop", "minutes", "x"]), value,
        )  # fmt: skip
        return st.lists(one, max_size=4)
    return value.map(lambda v: {"id": cid, "property": prop, "value": v})


def _outputs(output: str) -> Any:
    parts = output[2:-2].split("...") if output.startswith("..") else [output]
    outs = [dict(zip(("id", "property"), p.rsplit(".", 1), strict=True)) for p in parts]
    return outs if output.startswith("..") else outs[0]


def requests_for(output: str, reg: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    ids = [f"{i['id']}.{i['property']}" for i in reg["inputs"]]
    return st.fixed_dictionaries({
        "output": st.just(output),
        "outputs": st.just(_outputs(output)),
        "inputs": st.tuples(*(_item(i) for i in reg["inputs"])).map(list),
        "state": st.tuples(*(_item(i) for i in reg.get("state") or [])).map(list),
        "changedPropIds": st.lists(st.sampled_from(ids), max_size=2, unique=True),
    })  # fmt: skip


def _seed(app: Any) -> None:
    store = app.state.store
    for k, (name, group) in enumerate([("seed-0", "g"), ("seed-1", "g"), ("lone", None)]):
        run, _ = store.get_or_create_run("p", name, target_compute=20_000.0, group=group)
        c, y = series({"A": 0.6 + 0.02 * k, "B": 1.9, "C_mid": 2500.0}, seed=k)
        store.ingest_points(run.id, [PointRow("val/acc", i, float(ci), float(yi), None)
                                        for i, (ci, yi) in enumerate(zip(c, y, strict=True))])
    Refitter(store).run_once()
    store.create_alert_rule("p", "stalled", {"minutes": 30}, run_id=1, enabled=True)


@pytest.fixture
def fuzzed(database_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    app = make_app(database_url, auth=True)
    store = app.state.store
    _seed(app)
    with TestClient(app, raise_server_exceptions=False) as client:
        sessions = {}
        for scope in ("read", "write"):
            token = store.create_token(f"fuzz-{scope}", scope)[1]
            client.cookies.clear()
            r = client.post("/login", data={"token": token}, follow_redirects=False)
            assert r.status_code == 303
            sessions[scope] = client.cookies[AUTH_COOKIE]
        yield client, sessions
    store.engine.dispose()


def test_no_callback_request_is_a_server_error(fuzzed: tuple[TestClient, dict[str, str]]) -> None:
    client, sessions = fuzzed
    dash_app = client.app.state.dash_app  # type: ignore[attr-defined]
    # Dash registers its page router at the first dashboard request: without one, the fuzzer
    # never sent it anything (and missed its 500 for a path outside /dashboard).
    assert client.get("/dashboard/_dash-dependencies").status_code == 200
    callbacks = sorted((o, r) for o, r in dash_app.callback_map.items() if server_side(r))
    assert any("_pages_content" in o for o, _ in callbacks)
    strategy = st.tuples(
        st.sampled_from(sorted(sessions)),
        st.sampled_from(callbacks).flatmap(lambda c: requests_for(*c)),
    )
    statuses: Counter[int] = Counter()
    failures: list[tuple[int, str, str]] = []

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(call=strategy)
    def send(call: tuple[str, dict[str, Any]]) -> None:
        scope, body = call
        client.cookies.set(AUTH_COOKIE, sessions[scope])
        r = client.post(UPDATE, content=json.dumps(body),
                        headers={"content-type": "application/json"})  # fmt: skip
        statuses[r.status_code] += 1
        if r.status_code >= 500:
            failures.append((r.status_code, json.dumps(body)[:600], r.text[:200]))

    send()
    print(f"dash callback fuzz: {sum(statuses.values())} requests, statuses {dict(statuses)}")
    assert not failures, failures[:3]
    # The fuzzer really got through: thousands of calls, both run and refused.
    assert sum(statuses.values()) >= EXAMPLES
    assert statuses[200] + statuses[204] > EXAMPLES // 10 and statuses[400] > EXAMPLES // 10
