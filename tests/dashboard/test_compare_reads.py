"""The Compare page reads every run at once (`get_points_many`, `latest_fits`): the same pages
and fits as one run at a time, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalewatch.server.ingest import PointRow
from scalewatch.server.store import point_reads_sql
from scalewatch.server.store.base import NotFound

METRIC = "val_pass_rate"


def _ingest(store: Any, run_id: int, steps: np.ndarray, c: np.ndarray, y: np.ndarray) -> None:
    for lo in range(0, len(steps), 10_000):
        store.ingest_points(run_id, [
            PointRow(METRIC, int(s), float(ci), float(yi), None)
            for s, ci, yi in zip(steps[lo:lo + 10_000], c[lo:lo + 10_000], y[lo:lo + 10_000],
                                 strict=True)
        ])  # fmt: skip


def test_points_of_many_runs_are_each_runs_pages(store: Any) -> None:
    rng = np.random.default_rng(3)
    ids = []
    for k, (n, stride) in enumerate([(40_000, 1), (30_000, 3), (25_000, 1), (500, 1)]):
        run, _ = store.get_or_create_run("p", f"r{k}")
        steps = np.arange(n) * stride
        c = np.linspace(1.0, 20_000.0 * (1 + k / 4), n)
        y = 0.3 + 0.3 * c / c[-1] + rng.normal(0, 0.01, n)
        y[n // 3], y[n // 2] = 0.95, 0.02  # a spike and a collapse, ties below
        y[n // 5 : n // 5 + 40] = 0.5
        _ingest(store, run.id, steps, c, y)
        ids.append(run.id)
    other, _ = store.get_or_create_run("p", "no-points")
    ids.append(other.id)
    # Whole range, a part (the coarsest level has too few chunks in it: the next is read), an
    # inner window, and each series' own range; 1,000 and 2,000 points a page.
    for x_range in [(0.0, 40_000.0), (0.0, 9_000.0), (1_234.5, 17_000.0), None]:
        for max_points in (1000, 2000):
            point_reads_sql._DOWNSAMPLED._items.clear()
            many = store.get_points_many(ids, METRIC, max_points=max_points, x_range=x_range)
            point_reads_sql._DOWNSAMPLED._items.clear()
            for run_id in ids:
                one = store.get_points(run_id, METRIC, max_points=max_points, x_range=x_range,
                                       rollup=True)  # fmt: skip
                assert many[run_id] == one, (run_id, x_range, max_points)
    assert any(p.downsampled for p in many.values())
    assert many[other.id].steps == []
    with pytest.raises(NotFound):
        store.get_points_many([ids[0], 999_999], METRIC, max_points=1000)


def test_latest_fits_answers_and_queues_as_one_run_at_a_time(store: Any) -> None:
    fitted, _ = store.get_or_create_run("p", "fitted")
    newer, _ = store.get_or_create_run("p", "newer-points")
    unfitted, _ = store.get_or_create_run("p", "unfitted")
    empty, _ = store.get_or_create_run("p", "empty")
    rows = [PointRow(METRIC, i, float(i + 1), 0.5, None) for i in range(10)]
    for run in (fitted, newer):
        store.ingest_points(run.id, rows)
    while claimed := store.claim_dirty_series("test", limit=50):
        for d in claimed:
            store.finish_refit(d.series_id, "test", d.requested, {"status": "ok", "A": 0.6},
                               True)  # fmt: skip
    store.ingest_points(newer.id, [PointRow(METRIC, 10, 11.0, 0.5, None)])
    store.ingest_points(unfitted.id, rows)
    # Reading another metric's fit queues it (ingest queues only the fit metric).
    ids = [fitted.id, newer.id, unfitted.id, empty.id]
    got = store.latest_fits(ids, METRIC)
    assert got[fitted.id][0]["A"] == 0.6 and got[fitted.id][1]
    assert got[newer.id][0]["A"] == 0.6 and got[newer.id][1]
    assert got[unfitted.id] == (None, True)
    assert got[empty.id] == (None, False)
    for run_id in ids:  # what one run at a time answers
        name, stored = store.latest_fit(run_id, METRIC)
        assert (stored, store.request_fit(run_id, METRIC)) == got[run_id]
    # Queued once: the refitter claims each stale series once, the current one not at all.
    claimed = {d.run_id for d in store.claim_dirty_series("test", limit=50)}
    assert claimed == {newer.id, unfitted.id}
    with pytest.raises(NotFound):
        store.latest_fits([999_999], METRIC)
