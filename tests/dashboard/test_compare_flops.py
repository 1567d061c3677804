"""Compare of runs counted in FLOPs (SQLite and PostgreSQL): budgets of 1e20-1e26 are the
usual case there, and the page renders them (it was a 500 for every budget past 2^63)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.ingest import PointRow
from tests.dashboard.seed import fitted_client, series

FLOPS_PER_GPU_HOUR = 1e18  # scales a GPU-hours curve to a FLOPs one


def _flops_runs(store: Any) -> list[int]:
    ids = []
    for k in range(2):
        run, _ = store.get_or_create_run(
            "p", f"flops-{k}", compute_unit="flops", target_compute=2e4 * FLOPS_PER_GPU_HOUR)
        cs, y = series({"A": 0.6 + 0.05 * k, "B": 1.9, "C_mid": 2500.0}, seed=k)
        store.ingest_points(run.id, [
            PointRow("val/acc", i, float(ci) * FLOPS_PER_GPU_HOUR, float(yi), None)
            for i, (ci, yi) in enumerate(zip(cs, y, strict=True))])
        ids.append(run.id)
    return ids


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with fitted_client(database_url, _flops_runs) as c:
        yield c


@pytest.mark.parametrize("budget", [None, 3e22, "5e23", 1e19])
def test_compare_renders_flops_budgets(client: TestClient, budget: float | str | None) -> None:
    """The page showed a whole budget as an int (3000, not 3000.0), and past 2^63 (every
    FLOPs budget: the default is the runs' target, 2e22 here) Dash could not send the int:
    a 500 and a traceback instead of the comparison."""
    r = dash_call(client, "cmp-graph", {"cmp-ids.data": client.ids,  # type: ignore[attr-defined]
                                        "cmp-budget.value": budget},
                  deps=client.deps)  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text[:300]
    out = r.json()["response"]
    shown = out["cmp-budget"]["value"]
    want = 2e22 if budget is None else float(budget)
    assert float(shown) == want
    assert out["cmp-graph"]["figure"]["data"], "no runs drawn"
