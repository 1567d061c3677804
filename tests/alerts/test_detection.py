"""Detection through the real pipeline: API ingest -> refitter -> listener -> alerts.

Reported numbers (printed with -s): N, the evaluations between the asymptote change and the
alert, and the false-alarm rate over 20 seeded stable runs.
"""

from __future__ import annotations

import numpy as np

from tests.alerts.helpers import (
    collapsing_run,
    dropping_run,
    post_and_fit,
    stable_run,
)
from tests.support.polling import wait_for

FIRST, BATCH = 40, 2  # the first 40 evaluations at once, then 2 evaluations per post


def _rule(client, kind, params=None, run_id=None, project="p"):
    body = {"project": project, "run_id": run_id, "kind": kind, "params": params or {}}
    r = client.post("/api/v1/alert-rules", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _alerts(client, **params):
    return client.get("/api/v1/alerts", params=params).json()["alerts"]


def test_asymptote_drop_fires_once_within_n_evaluations(live_app):
    _, client = live_app
    switch = 8000.0
    c, y = dropping_run(seed=2, switch=switch)
    changed_at = int(np.searchsorted(c, switch))  # evaluations before the change
    rid = client.post("/api/v1/runs", json={"project": "p", "name": "drop"}).json()["id"]
    rule = _rule(client, "asymptote_drop", run_id=rid)
    post_and_fit(client, rid, c[:FIRST], y[:FIRST], 0)
    opened_after = None
    for start in range(FIRST, c.size, BATCH):
        post_and_fit(client, rid, c[start : start + BATCH], y[start : start + BATCH], start)
        if opened_after is None and _alerts(client, run=rid):
            opened_after = start + BATCH
    alerts = _alerts(client, run=rid)
    assert len(alerts) == 1, alerts  # exactly one: no storm, no flapping
    alert = alerts[0]
    assert alert["kind"] == "asymptote_drop" and alert["rule_id"] == rule["id"]
    assert alert["state"] == "open" and alert["fit_id"]
    d = alert["details"]
    assert d["A_before"] > 0.58
    if d.get("break"):  # fired on the engine's break: the run fell off its curve
        assert d["break"]["drop"] >= 0.02 and d["break"]["compute"] >= switch * 0.9
        assert "broke at step" in alert["message"]
    else:  # fired on the A estimates: intervals no longer overlap
        assert d["A_after"] < d["A_before"] - 0.02
        assert d["A_after_ci"][1] < d["A_before_ci"][0]
    n = opened_after - changed_at
    print(f"\nasymptote_drop detected {n} evaluations after the change (A 0.61 -> 0.50)")
    assert 0 < n <= 40
    fits = client.get(f"/api/v1/runs/{rid}/fits").json()["fits"]
    fired = next(f for f in fits if f["id"] == alert["fit_id"])
    assert fired["n_points"] > changed_at
    assert client.get("/api/v1/alerts", params={"run": rid, "state": "open"}).json()["total"] == 1


def test_stable_runs_raise_no_alerts(live_app):
    """20 seeded runs with AR(1) noise, posted in 5 batches each, refitted for real."""
    _, client = live_app
    _rule(client, "asymptote_drop")
    _rule(client, "off_curve")
    runs = [
        client.post("/api/v1/runs", json={"project": "p", "name": f"s{i}"}).json()["id"]
        for i in range(20)
    ]
    data = [stable_run(seed=100 + i) for i in range(20)]
    ok_fits = 0
    for start in range(0, 200, 40):
        for rid, (c, y) in zip(runs, data, strict=True):
            r = client.post(
                f"/api/v1/runs/{rid}/points",
                json={"points": _points(c[start : start + 40], y[start : start + 40], start)},
            )
            assert r.status_code == 200
        want = start + 40
        for rid in runs:

            def fitted(rid=rid, want=want):
                f = client.get(f"/api/v1/runs/{rid}/fit").json()
                return f if f["fit_id"] and f["n_points"] >= want else None

            fit = wait_for(fitted)
            ok_fits += fit["status"] == "ok"
    alerts = client.get("/api/v1/alerts", params={"project": "p"}).json()
    print(f"\nfalse alarms: {alerts['total']} alerts on 20 stable runs ({ok_fits} ok fits)")
    assert alerts["total"] == 0, alerts
    assert ok_fits >= 40  # the rules really were evaluated against identified fits


def _points(c, y, start):
    from tests.alerts.helpers import points

    return points(c, y, start)


def test_collapse_fires_off_curve(live_app):
    _, client = live_app
    c, y = collapsing_run(seed=1)
    rid = client.post("/api/v1/runs", json={"project": "p", "name": "grpo"}).json()["id"]
    _rule(client, "off_curve", run_id=rid)
    _rule(client, "asymptote_drop", run_id=rid)
    statuses = []
    for start in range(0, 150, 10):
        fit = post_and_fit(client, rid, c[start : start + 10], y[start : start + 10], start)
        statuses.append(fit["status"])
    assert "ok" in statuses and statuses[-1] == "unidentified"
    last = client.get(f"/api/v1/runs/{rid}/fit").json()
    assert last["break"] and last["break"]["drop"] > 0.2  # the engine says it broke, and how
    assert 7000 <= last["break"]["compute"] <= 10000  # the fall starts at 9000
    # The fit history says so too: the broken fit withholds A but bounds the new ceiling.
    history = client.get(f"/api/v1/runs/{rid}/fits").json()["fits"]
    assert history[-1]["id"] == last["fit_id"] and history[-1]["A"] is None
    assert history[-1]["break"]["ceiling_upper"] == last["break"]["ceiling_upper"]
    assert history[-1]["break"]["compute"] == last["break"]["compute"]
    assert all(h["break"] is None for h in history if h["status"] == "ok")
    alerts = _alerts(client, run=rid)
    off = [a for a in alerts if a["kind"] == "off_curve"]
    assert len(off) == 1 and off[0]["state"] == "open", alerts
    d = off[0]["details"]
    assert all(r < 0 for r in d["residuals"]) and d["reference_fit_id"]
    assert min(abs(r) for r in d["residuals"]) > 4 * d["residual_scale"]
    assert min(d["compute"]) > 9000  # it fired on points after the peak
