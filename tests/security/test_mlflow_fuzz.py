"""Property-based fuzzing of the MLflow-compatible API (SQLite and PostgreSQL): no input may
produce a 5xx. The MLflow routes are outside the OpenAPI schema (MLflow's own wire format), so
hypothesis drives them directly: each route gets objects of its own fields (and strays), whose
values mix what a client sends (the seeded runs' ids, metric keys) with what breaks servers:
lone surrogates, NUL, long text, NaN/Infinity tokens, integers beyond any column (10**400),
wrong types, nesting. At least 2,000 requests per database; the figures are printed."""

from __future__ import annotations

import json
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalewatch.server.ingest import PointRow
from tests.conftest import make_app

pytestmark = [
    pytest.mark.slow,  # a fuzzer: thousands of requests per database
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),  # long reprs
]

M = "/api/2.0/mlflow"
EXAMPLES_PER_ROUTE = 150

# (method, path, the fields the route reads)
ROUTES: list[tuple[str, str, list[str]]] = [
    ("GET", f"{M}/experiments/get-by-name", ["experiment_name"]),
    ("POST", f"{M}/experiments/create", ["name", "artifact_location", "tags"]),
    ("GET", f"{M}/experiments/get", ["experiment_id"]),
    ("POST", f"{M}/runs/create", ["experiment_id", "run_name", "tags", "start_time"]),
    ("GET", f"{M}/runs/get", ["run_id", "run_uuid"]),
    ("POST", f"{M}/runs/update", ["run_id", "status", "end_time", "run_name"]),
    ("POST", f"{M}/runs/log-batch", ["run_id", "metrics", "params", "tags"]),
    ("POST", f"{M}/runs/log-metric", ["run_id", "key", "value", "timestamp", "step"]),
    ("POST", f"{M}/runs/log-parameter", ["run_id", "key", "value"]),
    ("POST", f"{M}/runs/set-tag", ["run_id", "key", "value"]),
    ("POST", f"{M}/runs/search", ["experiment_ids", "filter", "max_results", "page_token",
                                  "order_by", "run_view_type"]),
    ("GET", f"{M}/metrics/get-history", ["run_id", "metric_key", "max_results", "page_token"]),
    ("GET", "/api/2.0/mlflow-artifacts/artifacts", ["path"]),
    ("PUT", "/api/2.0/mlflow-artifacts/artifacts/1/1/artifacts/config.json", ["stray"]),
    ("GET", "/api/2.0/mlflow-artifacts/artifacts/1/1/artifacts/config.json", ["stray"]),
]

NASTY_TEXT = ["\udfff", "\ud800x", "\x00", "a\x00b", " ", "", "x" * 5000, "é" * 300,
              "'", "\"", "attributes.run_name = 'r' AND status = 'FINISHED'", "../../etc",
              "1" * 400, "-1", "1e400", "NaN", "Infinity", "9" * 5000]
SPECIAL_NUMBERS = [10**400, -(10**400), 2**63, 2**63 - 1, 2**31, -1, 0, 1e308, -0.0,
                   float("inf"), float("-inf"), float("nan"), 1.5, True]


def _texts() -> st.SearchStrategy[str]:
    plain = st.text(max_size=30)
    return st.one_of(
        plain, st.sampled_from(NASTY_TEXT),
        st.tuples(plain, st.sampled_from(NASTY_TEXT), plain).map("".join),
    )


def _scalars(seeded: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(seeded["run_ids"] + seeded["experiment_ids"] + seeded["keys"]),
        _texts(), st.integers(), st.sampled_from(SPECIAL_NUMBERS),
        st.floats(allow_nan=True, allow_infinity=True), st.none(), st.booleans(),
    )


def _values(seeded: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    scalar = _scalars(seeded)
    entity = st.fixed_dictionaries(
        {}, optional={"key": st.one_of(st.sampled_from(seeded["keys"]), scalar),
                      "value": scalar, "timestamp": scalar, "step": scalar})
    return st.recursive(
        st.one_of(scalar, entity),
        lambda inner: st.one_of(st.lists(inner, max_size=6),
                                st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=12,
    )


def _payloads(fields: list[str], seeded: dict[str, list[str]]) -> st.SearchStrategy[dict]:
    values = _values(seeded)
    likely = {
        "run_id": st.one_of(st.sampled_from(seeded["run_ids"]), values),
        "experiment_id": st.one_of(st.sampled_from(seeded["experiment_ids"]), values),
        "experiment_ids": st.one_of(st.lists(st.sampled_from(seeded["experiment_ids"])), values),
        "metric_key": st.one_of(st.sampled_from(seeded["keys"]), values),
    }
    return st.fixed_dictionaries(
        {}, optional={f: likely.get(f, values) for f in fields} | {"stray": values})


def _request(client: TestClient, method: str, path: str, payload: dict) -> int:
    if method == "GET":
        # A query string carries text only; a lone surrogate goes as the bytes it would be.
        query = "&".join(
            f"{urllib.parse.quote(k)}="
            + urllib.parse.quote(str(v).encode("utf-8", "surrogatepass"), safe="")
            for k, v in payload.items()
        )
        return client.get(f"{path}?{query}").status_code
    body = json.dumps(payload)  # NaN / Infinity tokens, "\udfff" escapes, 10**400 digits
    return client.request(method, path, content=body.encode(),
                       headers={"Content-Type": "application/json"}).status_code


@pytest.fixture(params=["sqlite", "postgresql"])
def fuzzed(request: pytest.FixtureRequest, postgres: Any,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict]]:
    from tests.support.databases import migrated_sqlite, require_postgres

    if request.param == "sqlite":
        url = migrated_sqlite(tmp_path_factory.mktemp("mlfuzz"), "f.db")
    else:
        require_postgres(postgres)
        url = postgres.new_database()
    app = make_app(url)
    store = app.state.store
    run_ids, experiment_ids = [], ["0"]
    for project in ("fuzz-a", "fuzz-b"):
        experiment_ids.append(str(store.create_project(project)[0].id))
        for name in ("r1", "r2"):
            run, _ = store.get_or_create_run(project, name, compute_unit="steps")
            store.ingest_points(run.id, [PointRow("acc", s, float(s), 0.1, None)
                                            for s in range(20)])
            run_ids.append(str(run.id))
    seeded = {"run_ids": run_ids, "experiment_ids": experiment_ids, "keys": ["acc", "lr"]}
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, seeded
    store.engine.dispose()
    if request.param == "postgresql":
        postgres.drop(url)


def test_no_mlflow_input_causes_a_server_error(fuzzed: tuple[TestClient, dict]) -> None:
    client, seeded = fuzzed
    statuses: Counter[int] = Counter()
    failures: list[tuple[str, dict, int]] = []

    def make_check(method: str, path: str, fields: list[str]) -> Callable[[], None]:
        @settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(payload=_payloads(fields, seeded))
        def check(payload: dict) -> None:
            status = _request(client, method, path, payload)
            statuses[status] += 1
            if status >= 500:
                failures.append((path, payload, status))

        return check  # type: ignore[no-any-return]

    for method, path, fields in ROUTES:
        make_check(method, path, fields)()
    total = sum(statuses.values())
    print(f"\nMLflow fuzz: {total} requests, statuses {dict(sorted(statuses.items()))}")
    assert not failures, failures[:5]
    # Nothing the fuzzer got stored poisons later reads (a stored lone surrogate did).
    listed = client.get("/api/v1/runs", params={"limit": 1000})
    assert listed.status_code == 200, listed.text
    for run in listed.json()["runs"]:
        assert client.get(f"{M}/runs/get", params={"run_id": run["id"]}).status_code == 200
    every = client.post(f"{M}/runs/search", json={"experiment_ids": seeded["experiment_ids"]})
    assert every.status_code == 200, every.text
    assert total >= 2_000
    # The fuzzer reached the handlers: accepted and refused inputs both.
    assert sum(n for s, n in statuses.items() if s < 300) > 100
    assert sum(n for s, n in statuses.items() if 400 <= s < 500) > 100
