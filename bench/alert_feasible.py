"""A *feasible* oracle: what a detector that must estimate the curve could do at best.

``alert_oracle`` knows each run's true expected curve, so its residuals are pure noise until
the change.  A product detector cannot know the curve: it fits one, and on a run that is not
a sigmoid (four of the five sampled families) the fit's extrapolation over the run's second
half is itself a slow departure, of the size of the drifts we want to detect.  This oracle
is as generous as it can be short of knowing the curve:

* it knows the noise (AR(1) sd and rho; a prompt set's binomial sd at every evaluation);
* it knows that the change, if any, starts at half the run (after the index ``start``);
* it fits the ScaleRL sigmoid (plain least squares, two starts, bounded) to the points up to
  ``start`` only, and scans the later points' residuals against that fit's extrapolation with
  ``alert_oracle``'s whitening and matched filters (a step and a ramp from ``start``; the
  larger z counts);
* its threshold comes from stable runs with the same run parameters (the same expected curve,
  computes and noise), each fitted the same way: so the threshold absorbs the family's
  systematic extrapolation error on top of the noise, which a product detector cannot know
  either.  Alarm rate like for like with ours, as ``alert_oracle.like_for_like_rate``.

So its delay is a floor for any detector that fits a sigmoid to the run's past and tests the
present against it; the gap between it and ``alert_oracle``'s is what the estimated curve
costs by itself.
"""

from __future__ import annotations

import numpy as np
from alert_oracle import _whiten
from scipy.optimize import least_squares

from scalewatch.server.fitting.model import curve
from scalewatch.server.fitting.synth import ar1


def _sigmoid(c: np.ndarray, th: np.ndarray) -> np.ndarray:
    """The engine's curve at ``th`` = (A, ln C_mid, B, R0): C_mid is fitted on a log scale."""
    a, m, b, r0 = th
    return curve(c, a, b, float(np.exp(m)), r0)


def fit_prefix(c: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares sigmoid (A, ln C_mid, B, R0) of the points ``(c, y)`` (best of 2 starts)."""
    pos = c[c > 0]
    lo_m, hi_m = float(np.log(pos.min())) - 3.0, float(np.log(pos.max())) + 4.0
    best, cost = None, np.inf
    for b0 in (1.0, 3.0):
        x0 = np.array([min(float(y.max()) + 0.02, 1.19), float(np.log(np.median(pos))), b0,
                       float(np.clip(y[0], -0.19, 0.99))])
        x0[1] = np.clip(x0[1], lo_m + 1e-6, hi_m - 1e-6)
        res = least_squares(lambda th: _sigmoid(c, th) - y, x0,
                            bounds=([0.0, lo_m, 0.1, -0.2], [1.2, hi_m, 12.0, 1.0]))
        if res.cost < cost:
            best, cost = res.x, res.cost
    assert best is not None
    return best


def _stat(c: np.ndarray, y: np.ndarray, start: int, scale: np.ndarray, sigma: float,
          rho: float) -> np.ndarray:
    """Per evaluation count n (index n, n > start), the larger of the step and ramp z of the
    whitened residuals from ``start`` against the prefix fit's extrapolation; -inf before."""
    f = _sigmoid(c, fit_prefix(c[:start + 1], y[:start + 1]))  # the change's first point is
    # start + 1 (``alerts_sampled.change`` is 0 at ``start``)
    u = _whiten((y - f) / scale, sigma, rho)
    idx = np.arange(y.size)
    out = np.full(y.size + 1, -np.inf)
    best = np.full(y.size - start, -np.inf)
    for shp in (-(idx > start).astype(float), -np.clip(idx - start, 0, None).astype(float)):
        s = _whiten(shp / scale, sigma, rho)
        s[:start + 1] = 0.0  # the prefix is the fit's, not the test's
        num, den = np.cumsum(s * u)[start:], np.cumsum(s * s)[start:]
        best = np.maximum(best, num / np.sqrt(np.maximum(den, 1e-300)))
    out[start + 1:] = best
    return out


def delay(run: dict, y: np.ndarray, start: int, fa: float, n_null: int,
          rng: np.random.Generator) -> tuple[int | None, float]:
    """(delay in evaluations from ``start``, or None; the threshold) of the feasible oracle on
    the values ``y`` of ``run`` at false-alarm rate ``fa`` a run.  On a stable run (``y`` its
    own values) a delay is a false alarm: the check that the threshold holds its rate."""
    c, truth, sd = run["c"], run["truth"], run["noise_sd"]
    p = run["params"]
    prompts = p["noise"] == "prompts"
    scale = sd if prompts else np.ones(y.size)
    sigma, rho = (1.0, 0.0) if prompts else (float(sd[0]), float(p["rho"]))
    null = np.empty(n_null)
    for j in range(n_null):
        noise = rng.normal(0.0, 1.0, y.size) * sd if prompts else ar1(y.size, sigma, rho, rng)
        null[j] = _stat(c, np.clip(truth + noise, 0.0, 1.0), start, scale, sigma, rho).max()
    h = float(np.quantile(null, 1.0 - fa))
    hit = np.nonzero(_stat(c, y, start, scale, sigma, rho)[start + 1:] > h)[0]
    return (int(hit[0]) + 1 if hit.size else None), h
