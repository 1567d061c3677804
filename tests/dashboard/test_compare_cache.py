"""The Compare page's caches (the comparison, the fits' curves) and its rollup points: a cached
answer is reused only while nothing it depends on changed, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalewatch.dashboard import data
from scalewatch.dashboard.figures.compare import compare_figure_dict
from scalewatch.server.fitting import FitOptions, fit_curve
from scalewatch.server.ingest import PointRow
from scalewatch.server.services import compare as compare_service
from scalewatch.server.services.fits import fit_record
from scalewatch.server.store import point_reads_sql
from tests.dashboard.seed import CROSSING, series

METRIC = "val_pass_rate"


def _store_fit(store: Any, run_id: int, c: np.ndarray, y: np.ndarray) -> None:
    """A fit of the run's points stored through the refit queue, as the refitter does."""
    res = fit_curve(c, y, FitOptions(target_compute=float(c[-1]) * 4))
    while claimed := store.claim_dirty_series("test", limit=50):
        for d in claimed:
            fit = dict(fit_record(res, metric=METRIC)) if d.run_id == run_id else None
            store.finish_refit(d.series_id, "test", d.requested, fit, True)


def _ingest(store: Any, run_id: int, c: np.ndarray, y: np.ndarray, start: int = 0) -> None:
    store.ingest_points(run_id, [PointRow(METRIC, start + i, float(ci), float(yi), None)
                                 for i, (ci, yi) in enumerate(zip(c, y, strict=True))])  # fmt: skip


@pytest.fixture
def two_runs(store: Any) -> tuple[Any, list[int], dict[int, tuple]]:
    ids, curves = [], {}
    for k, params in enumerate(CROSSING.values()):
        c, y = series(params, seed=k)
        run, _ = store.get_or_create_run("p", f"r{k}", target_compute=40000.0)
        _ingest(store, run.id, c, y)
        _store_fit(store, run.id, c, y)
        ids.append(run.id)
        curves[run.id] = (c, y)
    compare_service.COMPARISONS.clear()
    return store, ids, curves


def test_comparison_is_reused_until_points_or_a_fit_change(two_runs, monkeypatch) -> None:
    store, ids, curves = two_runs
    calls: list[int] = []
    real = compare_service.compare_fits

    def counting(*a: Any, **k: Any) -> dict[str, Any]:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(compare_service, "compare_fits", counting)
    first = data.compare_detail(store, ids, None, None)
    again = data.compare_detail(store, ids, None, None)
    assert len(calls) == 1 and again["comparison"] == first["comparison"]
    again["comparison"]["pairs"].clear()  # a caller's copy: the cached one is untouched
    assert data.compare_detail(store, ids, None, None)["comparison"] == first["comparison"]
    assert len(calls) == 1

    data.compare_detail(store, ids, None, 123456.0)  # another budget: another comparison
    assert len(calls) == 2

    # New points of one run (no new fit yet): its points changed, so the verdict is redone.
    c, y = curves[ids[0]]
    _ingest(store, ids[0], c[-5:] * 1.5, y[-5:], start=len(c))
    data.compare_detail(store, ids, None, None)
    assert len(calls) == 3
    data.compare_detail(store, ids, None, None)
    assert len(calls) == 3

    # A new fit of that run: the verdict uses it.
    c2, y2 = np.concatenate([c, c[-5:] * 1.5]), np.concatenate([y, y[-5:]])
    _store_fit(store, ids[0], c2, y2)
    after = data.compare_detail(store, ids, None, None)
    assert len(calls) == 4
    label = after["items"][0]["label"]
    assert after["comparison"]["runs"][label]["A"] == after["items"][0]["fit"]["A"]


def test_curves_follow_a_new_fit(two_runs) -> None:
    store, ids, curves = two_runs

    def fit_curve_y() -> list:
        detail = data.compare_detail(store, ids, None, None)
        fig = compare_figure_dict(detail["items"], unit="u", metric=METRIC,
                                  budget=detail["budget"])  # fmt: skip
        fit = next(t for t in fig["data"] if t.get("meta") == "fit"
                   and t["legendgroup"] == f"run{ids[0]}")  # fmt: skip
        return list(fit["y"])

    before = fit_curve_y()
    assert fit_curve_y() == before  # the cached curves are those of the same fit
    c, y = curves[ids[0]]
    _ingest(store, ids[0], c[-1:] * 1.01, y[-1:] + 0.05, start=len(c))  # queues a refit
    _store_fit(store, ids[0], c, np.asarray(y) + 0.05)  # the new fit: a higher curve
    after = fit_curve_y()
    assert after != before and np.mean(after) > np.mean(before)


def test_rollup_points_are_stored_points_keeping_the_extremes(store) -> None:
    run, _ = store.get_or_create_run("p", "long")
    rng = np.random.default_rng(5)
    n = 40_000
    c = np.linspace(1.0, 20_000.0, n)
    y = 0.3 + 0.3 * c / c[-1] + rng.normal(0, 0.01, n)
    y[12_345], y[30_001] = 0.95, 0.02  # a spike and a collapse
    for lo in range(0, n, 10_000):
        _ingest(store, run.id, c[lo:lo + 10_000], y[lo:lo + 10_000], start=lo)
    point_reads_sql._DOWNSAMPLED._items.clear()
    page = store.get_points(run.id, METRIC, max_points=1000, x_range=(0.0, 20_000.0),
                            rollup=True)  # fmt: skip
    assert page.downsampled and 0 < len(page.steps) <= 1000 and page.total == n
    stored = {i: (float(c[i]), float(y[i])) for i in range(n)}
    assert all(stored[s] == (ci, v) for s, ci, v in
               zip(page.steps, page.compute, page.values, strict=True))  # fmt: skip
    assert 12_345 in page.steps and 30_001 in page.steps
    assert page.steps[0] == 0 and page.steps[-1] == n - 1
    # Few points: the exact answer, as without `rollup`.
    small = store.get_points(run.id, METRIC, max_points=1000, x_range=(0.0, 100.0),
                             rollup=True)  # fmt: skip
    assert small == store.get_points(run.id, METRIC, max_points=1000, x_range=(0.0, 100.0))
