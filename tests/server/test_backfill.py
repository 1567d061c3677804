"""Points that arrive at once get the A history a live run would have had (refit/backfill.py)."""

from __future__ import annotations

import numpy as np

from scalewatch.server.refit.backfill import (
    MAX_PREFIXES,
    MIN_NEW_POINTS,
    MIN_PREFIX_POINTS,
    STEP_RATIO,
    prefix_lengths,
)
from tests.server.test_refit_api import post_series, synthetic
from tests.support.polling import wait_for


def test_a_bulk_arrival_is_cut_into_prefixes_spaced_in_compute() -> None:
    c = np.geomspace(10.0, 10_000.0, 200)
    cuts = prefix_lengths(c, None)
    assert 5 <= len(cuts) <= MAX_PREFIXES
    assert cuts == sorted(set(cuts)) and cuts[0] >= MIN_PREFIX_POINTS and cuts[-1] < c.size
    reached = c[np.array(cuts) - 1]
    assert np.all(reached[1:] / reached[:-1] >= STEP_RATIO * 0.99)
    assert reached[-1] <= c[-1] / STEP_RATIO * 1.01  # the last is the new fit itself


def test_streaming_runs_and_small_catch_ups_get_none() -> None:
    c = np.linspace(1.0, 1000.0, 400)
    assert prefix_lengths(c[: MIN_NEW_POINTS - 1], None) == []  # too few to matter
    assert prefix_lengths(c, float(c[300])) == []  # 99 new points on 301: not doubled
    assert prefix_lengths(c[:310], float(c[299])) == []  # a refit's usual catch-up
    late = prefix_lengths(c, float(c[99]))  # 300 new on 100: a spool synced late
    assert late and min(late) > 100
    # A restart that logged a lower compute again does not reorder the prefixes.
    restarted = np.concatenate([c[:200], c[150:350]])
    cuts = prefix_lengths(restarted, None)
    assert cuts == sorted(cuts)


def test_an_imported_run_has_a_history_and_a_streamed_one_only_its_own(live_app) -> None:
    _, client = live_app
    c, y = synthetic(n=160, c_max=16000.0)
    ids = {}
    for name in ("imported", "streamed"):
        ids[name] = client.post("/api/v1/runs", json={
            "project": "p", "name": name, "target_compute": 16000}).json()["id"]
    post_series(client, ids["imported"], c, y)
    for i in range(0, 160, 20):  # the trainer's pace: the refitter keeps up between batches
        post_series(client, ids["streamed"], c[i:i + 20], y[i:i + 20], start=i)
        wait_for(lambda i=i: client.get(f"/api/v1/runs/{ids['streamed']}/fit").json().get(
            "n_points", 0) >= i + 20)
    fits = wait_for(lambda: (h := client.get(f"/api/v1/runs/{ids['imported']}/fits").json()[
        "fits"]) and h[-1]["n_points"] == 160 and h)
    assert len(fits) >= 5
    assert [f["backfilled"] for f in fits] == [True] * (len(fits) - 1) + [False]
    computes = [f["max_compute"] for f in fits]
    assert computes == sorted(computes) and len(set(computes)) == len(computes)
    assert fits[-1]["id"] == client.get(f"/api/v1/runs/{ids['imported']}/fit").json()["fit_id"]
    assert any(f["A"] is not None or f["A_lower_bound"] is not None for f in fits[:-1])
    streamed = client.get(f"/api/v1/runs/{ids['streamed']}/fits").json()["fits"]
    assert streamed and not any(f["backfilled"] for f in streamed)
