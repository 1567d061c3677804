"""Pure rule evaluation: fits and points in, a verdict out (no database, no web).

A verdict is three-valued: `fire=True` (the condition holds: open an alert unless one is
active), `fire=False` (it does not: resolve the active alert, if any), `fire=None` (no verdict:
e.g. the latest fit has no usable A — the alert state is left as it is, so a run whose fits
flicker between `ok` and `unidentified` does not open and resolve alerts in a loop).

Hysteresis (`active`: an alert of this rule and run is open): the A rules fire when an interval
lies wholly beyond the limit but clear only once the point estimate is back on the good side,
so an interval end hovering at the limit does not open and resolve alerts every refit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from scalewatch.server.fitting import FitResult, predict

SIGMA_FLOOR = 0.005  # residual scale floor for off_curve (a near-noiseless fit is not 0-noise)


@dataclass(frozen=True)
class Verdict:
    fire: bool | None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)


NO_VERDICT = Verdict(None)


def a_interval(fit: Mapping[str, Any] | None) -> tuple[float, float, float] | None:
    """(A, lower, upper) of an `ok` fit with a finite A interval, else None."""
    if not fit or fit.get("status") != "ok" or fit.get("A") is None:
        return None
    ci = (fit.get("ci") or {}).get("A")
    if not ci or ci[0] is None or ci[1] is None:
        return None
    a, lo, hi = float(fit["A"]), float(ci[0]), float(ci[1])
    if not all(math.isfinite(v) for v in (a, lo, hi)):
        return None
    return a, lo, hi


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 6)


def _ab(
    before: tuple[float, float, float] | None, after: tuple[float, float, float] | None
) -> dict[str, Any]:
    return {
        "A_before": _r(before[0]) if before else None,
        "A_before_ci": [_r(before[1]), _r(before[2])] if before else None,
        "A_after": _r(after[0]) if after else None,
        "A_after_ci": [_r(after[1]), _r(after[2])] if after else None,
    }


def _broke(
    params: dict[str, Any], current: Mapping[str, Any], best: Mapping[str, Any] | None
) -> Verdict | None:
    """A fit that reports a break of at least `delta` fires at once: the run fell off the curve
    it was on, so the ceiling that curve promised is gone (the new one is at most
    `ceiling_upper`), however the fits of the broken run itself look."""
    brk = current.get("break")
    if not brk or brk.get("drop") is None:
        return None
    delta = float(params["delta"])
    drop = float(brk["drop"])
    drop_lo = float((brk.get("drop_ci") or [drop])[0] or 0.0)
    # At least `delta`, and at least half of it beyond doubt: a small fall measured against a
    # curve that was itself overshooting on a noise bump stays below that.
    if drop < delta or drop_lo < delta / 2:
        return None
    where = (
        f"step {brk['step']}"
        if brk.get("step") is not None
        else f"compute {float(brk['compute']):.4g}"
    )
    ceiling = brk.get("ceiling_upper")
    new_a = a_interval(current) if brk.get("regime") == "fitted" else None
    tail = (
        f"; the new regime's A is {new_a[0]:.3f} [{new_a[1]:.3f}, {new_a[2]:.3f}]"
        if new_a
        else f"; its ceiling is now at most {float(ceiling):.3f}"
        if ceiling is not None
        else ""
    )
    details = {
        **_ab(a_interval(best), new_a),
        "break": dict(brk),
        "drop": _r(drop),
        "delta": delta,
        "best_fit_id": (best or {}).get("fit_id"),
    }
    return Verdict(
        True,
        f"the run broke at {where}: its recent level {float(brk['level']):.3f} is "
        f"{drop:.3f} below the curve it was on{tail}",
        details,
    )


def asymptote_drop(
    params: dict[str, Any],
    current: Mapping[str, Any],
    best: Mapping[str, Any] | None,
    active: bool = False,
) -> Verdict:
    """`best`: the run's `ok` fit with the highest A interval lower end (its best claim).

    Best by lower end, not by A: an early `ok` fit often has a high A with a wide interval;
    measured against its lower end a later, narrower fit could never prove a drop.  A fit that
    reports a break (``server/fitting/breaks.py``) fires without waiting for the fits to settle.
    """
    broke = _broke(params, current, best)
    if broke is not None:
        return broke
    cur, top = a_interval(current), a_interval(best)
    if cur is None or top is None:
        return NO_VERDICT
    delta = float(params["delta"])
    drop = top[0] - cur[0]
    details = {
        **_ab(top, cur),
        "drop": _r(drop),
        "delta": delta,
        "best_fit_id": (best or {}).get("fit_id"),
    }
    holds = drop >= delta and cur[2] < top[1]
    if active:  # clear only when the best A is back inside the interval, or the drop is small
        holds = drop >= delta / 2 and cur[2] < top[0]
    if holds:
        return Verdict(
            True,
            f"asymptote dropped from {top[0]:.3f} [{top[1]:.3f}, {top[2]:.3f}] to "
            f"{cur[0]:.3f} [{cur[1]:.3f}, {cur[2]:.3f}] (-{drop:.3f})",
            details,
        )
    return Verdict(False, "", details)


def asymptote_below(
    params: dict[str, Any],
    current: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    active: bool = False,
) -> Verdict:
    cur = a_interval(current)
    if cur is None:
        return NO_VERDICT
    threshold = float(params["threshold"])
    details = {**_ab(a_interval(previous), cur), "threshold": threshold}
    if cur[2] < threshold or (active and cur[0] < threshold):
        return Verdict(
            True,
            f"asymptote {cur[0]:.3f} [{cur[1]:.3f}, {cur[2]:.3f}] is below {threshold:g}",
            details,
        )
    return Verdict(False, "", details)


def below_baseline(
    params: dict[str, Any],
    current: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    baseline_name: str | None = None,
    active: bool = False,
) -> Verdict:
    cur, base = a_interval(current), a_interval(baseline)
    if cur is None or base is None:
        return NO_VERDICT
    label = baseline_name or f"run {params['baseline_run_id']}"
    details = {
        **_ab(base, cur),
        "baseline_run_id": params["baseline_run_id"],
        "baseline_fit_id": (baseline or {}).get("fit_id"),
    }
    if cur[2] < base[0] or (active and cur[0] < base[0]):
        return Verdict(
            True,
            f"asymptote {cur[0]:.3f} [{cur[1]:.3f}, {cur[2]:.3f}] is below the baseline "
            f"{label} (A = {base[0]:.3f})",
            details,
        )
    return Verdict(False, "", details)


def off_curve(
    params: dict[str, Any],
    reference: Mapping[str, Any] | None,
    compute: list[float],
    values: list[float],
    current: Mapping[str, Any] | None = None,
) -> Verdict:
    """`reference`: the last `ok` fit that had not seen the newest `n` points (`compute`,
    `values`, oldest first). Out of sample on purpose: a fit that already absorbed the newest
    points bends towards them and hides exactly what this rule looks for."""
    n, k = int(params["n"]), float(params["k"])
    if reference is None or len(values) < n:
        return NO_VERDICT
    try:
        ref = FitResult.from_dict(reference)
    except (KeyError, TypeError, ValueError):
        return NO_VERDICT
    if ref.params is None:
        return NO_VERDICT
    c = np.asarray(compute[-n:], dtype=float)
    y = np.asarray(values[-n:], dtype=float)
    resid = y - predict(ref, c)
    if not np.all(np.isfinite(resid)):
        return NO_VERDICT
    scale = max(float(ref.sigma or 0.0), SIGMA_FLOOR)
    beyond = np.abs(resid) > k * scale
    same_sign = bool(np.all(resid > 0) or np.all(resid < 0))
    details = {
        **_ab(a_interval(reference), a_interval(current)),
        "residuals": [_r(v) for v in resid],
        "residual_scale": _r(scale),
        "k": k,
        "n": n,
        "reference_fit_id": reference.get("fit_id"),
        "compute": [float(v) for v in c],
    }
    if bool(np.all(beyond)) and same_sign:
        side = "below" if resid[0] < 0 else "above"
        return Verdict(
            True,
            f"the last {n} points are {side} the fitted curve by "
            f"{float(np.min(np.abs(resid))) / scale:.1f}-{float(np.max(np.abs(resid))) / scale:.1f}"
            f" residual scales (collapse or divergence?)",
            details,
        )
    return Verdict(False, "", details)


def stalled(
    params: dict[str, Any], run_status: str, last_seen_at: datetime | None, now: datetime
) -> Verdict:
    minutes = float(params["minutes"])
    if last_seen_at is None:
        return NO_VERDICT
    if last_seen_at.tzinfo is None:
        last_seen_at = last_seen_at.replace(tzinfo=timezone.utc)
    idle = (now - last_seen_at).total_seconds() / 60.0
    details = {
        "minutes": minutes,
        "idle_minutes": round(idle, 3),
        "last_seen_at": last_seen_at.isoformat(),
        "run_status": run_status,
    }
    if run_status == "running" and idle >= minutes:
        return Verdict(
            True, f"no points for {idle:.1f} minutes (rule: {minutes:g} minutes)", details
        )
    return Verdict(False, "", details)
