"""Issue 36 item 7: Compare with runs fitted on different metrics keeps the runs' pills and
offers a metric picker (the metrics every run logs, their fit metrics first); picking one
draws the runs on it (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.ingest import PointRow
from scalewatch.server.refit import Refitter
from tests.dashboard.seed import fitted_client, series


def _runs_on_two_metrics(store: Any) -> list[int]:
    ids = []
    for k, (name, fit_metric) in enumerate([("on-acc", "acc"), ("on-reward", "reward")]):
        run, _ = store.get_or_create_run("p", name, fit_metric=fit_metric)
        cs, y = series({"A": 0.6 + 0.05 * k, "B": 1.9, "C_mid": 2500.0}, seed=k)
        rows = [PointRow(m, i, float(ci), float(yi) - (0.1 if m == "reward" else 0), None)
                for m in ("acc", "reward")
                for i, (ci, yi) in enumerate(zip(cs, y, strict=True))]  # fmt: skip
        store.ingest_points(run.id, rows)
        ids.append(run.id)
    store.get_or_create_run("p", "only-acc", fit_metric="acc")  # not compared
    return ids


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with fitted_client(database_url, _runs_on_two_metrics) as c:
        yield c


def _render(c: TestClient, metric: str | None) -> dict:
    r = dash_call(c, "cmp-graph", {"cmp-ids.data": c.ids, "cmp-metric.data": metric},  # type: ignore[attr-defined]
                  deps=c.deps)  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    return r.json()["response"]


def test_mixed_fit_metrics_keep_the_pills_and_offer_a_picker(client: TestClient) -> None:
    out = _render(client, None)
    said = json.dumps(out["cmp-verdict"])
    assert "different metrics" in said and "pick the metric" in said
    pills = out["cmp-chips"]["children"]
    assert [p["props"]["children"] for p in pills] == ["on-acc", "on-reward"]
    assert out["cmp-metric-pick"]["options"] == ["acc", "reward"]
    # Picking a metric sets the page's metric (and so its URL and the render's input) ...
    r = dash_call(client, "cmp-metric", {"cmp-metric-pick.value": "reward"},
                  changed=["cmp-metric-pick.value"], deps=client.deps)  # type: ignore[attr-defined]
    assert r.json()["response"]["cmp-metric"]["data"] == "reward"
    # ... and the runs are drawn and compared on it, pills and picker still there.
    _render(client, "reward")  # queues the fit of on-acc's reward, as /compare?metric= does
    Refitter(client.app.state.store).run_once()  # type: ignore[attr-defined]
    out = _render(client, "reward")
    metas = [t.get("meta") for t in out["cmp-graph"]["figure"]["data"]]
    assert metas.count("points") == 2 and metas.count("fit") == 2
    assert "reward" in json.dumps(out["cmp-graph"]["figure"]["layout"])
    assert len(out["cmp-chips"]["children"]) == 2
    assert out["cmp-metric-pick"]["options"] == ["acc", "reward"]
    assert "on-acc vs on-reward" in json.dumps(out["cmp-verdict"])
