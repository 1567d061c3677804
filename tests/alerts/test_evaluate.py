"""Rule semantics on hand-made fits (the pure evaluation functions)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from scalewatch.server.alerts import evaluate as ev


def fit(a, lo, hi, status="ok", fit_id=1):
    return {"status": status, "A": a, "ci": {"A": [lo, hi]}, "fit_id": fit_id}


def test_asymptote_drop_needs_both_margin_and_separated_intervals():
    best = fit(0.61, 0.60, 0.62)
    p = {"delta": 0.02}
    assert ev.asymptote_drop(p, fit(0.55, 0.54, 0.56), best).fire is True
    assert ev.asymptote_drop(p, fit(0.55, 0.50, 0.605), best).fire is False  # overlap: noise
    assert ev.asymptote_drop(p, fit(0.595, 0.59, 0.599), best).fire is False  # < delta
    assert ev.asymptote_drop(p, fit(0.5, 0.4, 0.6, status="unidentified"), best).fire is None
    assert ev.asymptote_drop(p, fit(0.55, 0.54, 0.56), None).fire is None
    # Hysteresis: an active alert stays until the best A is back inside the interval.
    assert ev.asymptote_drop(p, fit(0.59, 0.58, 0.605), best, active=True).fire is True
    assert ev.asymptote_drop(p, fit(0.60, 0.59, 0.615), best, active=True).fire is False


def test_below_and_baseline():
    assert ev.asymptote_below({"threshold": 0.6}, fit(0.5, 0.45, 0.55), None).fire is True
    assert ev.asymptote_below({"threshold": 0.6}, fit(0.58, 0.55, 0.61), None).fire is False
    assert ev.asymptote_below({"threshold": 0.6}, fit(0.58, 0.55, 0.61), None, True).fire is True
    base = fit(0.61, 0.60, 0.62, fit_id=9)
    v = ev.below_baseline({"baseline_run_id": 3}, fit(0.5, 0.45, 0.55), base, "base")
    assert v.fire is True and "base" in v.message and v.details["baseline_fit_id"] == 9
    assert ev.below_baseline({"baseline_run_id": 3}, fit(0.6, 0.55, 0.65), base).fire is False
    assert ev.below_baseline({"baseline_run_id": 3}, fit(0.6, 0.55, 0.65), None).fire is None


def test_stalled_only_for_running_runs():
    now = datetime.now(timezone.utc)
    old = now - timedelta(minutes=30)
    assert ev.stalled({"minutes": 10}, "running", old, now).fire is True
    assert ev.stalled({"minutes": 10}, "finished", old, now).fire is False
    assert ev.stalled({"minutes": 60}, "running", old.replace(tzinfo=None), now).fire is False


def test_a_break_fires_at_once_with_where_and_the_new_ceiling():
    best = fit(0.61, 0.60, 0.62, fit_id=4)
    brk = {"compute": 8000.0, "step": 8000, "drop": 0.06, "drop_ci": [0.04, 0.08],
           "level": 0.55, "level_ci": [0.54, 0.56], "n_after": 9, "ceiling_upper": 0.57,
           "regime": "too_few_points"}
    current = {"status": "unidentified", "A": None, "ci": {"A": [0.3, 0.9]}, "break": brk}
    v = ev.asymptote_drop({"delta": 0.02}, current, best)
    assert v.fire is True
    assert "step 8000" in v.message and "0.570" in v.message and "0.060" in v.message
    assert v.details["break"]["step"] == 8000 and v.details["best_fit_id"] == 4
    # Fires even with no earlier ok fit to compare with: the break is its own evidence.
    assert ev.asymptote_drop({"delta": 0.02}, current, None).fire is True
    # Smaller than delta, or not clearly more than half of it: no verdict from the break.
    small = {**current, "break": {**brk, "drop": 0.015, "drop_ci": [0.005, 0.025]}}
    assert ev.asymptote_drop({"delta": 0.02}, small, best).fire is None
    unsure = {**current, "break": {**brk, "drop": 0.025, "drop_ci": [0.002, 0.048]}}
    assert ev.asymptote_drop({"delta": 0.02}, unsure, best).fire is None
    # A fitted new regime reports its own A in the message.
    fitted = {"status": "ok", "A": 0.52, "ci": {"A": [0.50, 0.54]},
              "break": {**brk, "regime": "fitted"}}
    v = ev.asymptote_drop({"delta": 0.02}, fitted, best)
    assert v.fire is True and "new regime's A is 0.520" in v.message
