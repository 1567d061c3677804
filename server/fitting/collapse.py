"""Runs that rose and then fell back a lot: no sigmoid describes them (a collapse).

The break test (``breaks.py``) asks whether the newest points fell off the curve the run was
on; what it leaves, a run whose metric peaked and then slid back by a good part of its rise,
is caught here, and the fit refuses to describe it with a sigmoid (status
``insufficient_data``, "collapse: ...").

Statistic: means of ``k`` consecutive evaluations (``k`` = a tenth of them, at least 3); the
rise is the highest mean minus the first, the drop the highest minus the newest.  A collapse
is a rise and a drop each beyond ``COLLAPSE_Z`` noise sds of such a mean (and at least
``MIN_CHANGE``), the drop at least ``MIN_SHARE`` of the rise.

The noise sd of a ``k``-mean comes from the residuals of a sigmoid fitted to the points up to
the peak (the rise, which a sigmoid describes; after the peak it would be bent by the fall),
with the residuals' persistence (AR(1), ``intervals.autocorr_time``): persistent noise wanders
far more than independent noise of the same sd.  ``COLLAPSE_Z`` = 6: for AR(1) noise with rho
0-0.95 and 20-300 evaluations, the 99.9% quantile of (highest k-mean - newest) / its sd is
3.3-5.8 (``bench/collapse_null.py``).  Before, the drop was compared with 4 x the sd of a
k-mean of *independent* noise estimated from successive differences, which persistence
shrinks too: passed by independent noise on 1-2% of fits and by persistent noise far more
often.  On the sampled alert bench's stable runs (``bench/alerts.py --sampled``, four seeds),
32 of 800 were called collapses at some refit, sigmoid runs among them ("a sigmoid does not
describe this run", said of a sigmoid).  The old test stays as a cheap screen (the looser of
the two unless the fit of the rise leaves residuals a third smaller than successive
differences suggest), so the prefix fit is spent only on the few fits it lets through.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .breaks import Refit, Theta
from .intervals import autocorr_time, mean_noise_sd
from .model import FloatArray, curve_x, diff_noise_sd

COLLAPSE_Z = 6.0
MIN_CHANGE = 0.02  # the paper's margin on A: a smaller rise or fall is no verdict
MIN_SHARE = 0.3  # the drop is at least this share of the rise
SCREEN_Z = 4.0  # the screen: the old test, in sds of a k-mean of independent noise
MIN_PREFIX = 8  # points the fit of the rise needs; fewer: the full fit's residuals there


@dataclass(frozen=True)
class Collapse:
    peak: float  # the highest k-mean
    tail: float  # the newest k-mean
    block_sd: float  # noise sd of a k-mean

    @property
    def message(self) -> str:
        return (f"collapse: the metric peaked at {self.peak:.3f} and fell to {self.tail:.3f}; "
                "a sigmoid does not describe this run")


def detect_collapse(x: FloatArray, y: FloatArray, theta: Theta, fit_r0: bool,
                    refit: Refit, unit: float = 1.0) -> Collapse | None:
    """A collapse of ``y`` (log-compute ``x``), or None.  ``theta``: the full point fit (the
    warm start of the fit of the rise); ``refit(x, y, start)``: the caller's prefix fitter;
    ``unit``: the width of the metric's value range (``MIN_CHANGE`` is set for [0, 1])."""
    n = int(y.size)
    k = max(3, n // 10)
    if n < 2 * k + 2:
        return None
    smooth = np.convolve(y, np.ones(k) / k, mode="valid")
    peak_i = int(np.argmax(smooth))
    peak, start, tail = float(smooth[peak_i]), float(smooth[0]), float(smooth[-1])
    drop, rise = peak - tail, peak - start

    def passes(block_sd: float) -> bool:
        floor = max(MIN_CHANGE * unit, COLLAPSE_Z * block_sd)
        return rise > floor and drop > MIN_SHARE * rise and drop > floor

    white = diff_noise_sd(y) / np.sqrt(k)  # of a k-mean of independent noise
    if not passes(white * SCREEN_Z / COLLAPSE_Z):
        return None
    end = peak_i + k  # the rise: up to the end of the peak's k evaluations
    th = refit(x[:end], y[:end], theta) if end >= MIN_PREFIX else theta
    e = y[:end] - curve_x(x[:end], *th)
    p = 4 if fit_r0 else 3
    sigma = float(np.sqrt(float(e @ e) / max(e.size - p, 1)))
    block_sd = mean_noise_sd(sigma, autocorr_time(e), k)
    return Collapse(peak, tail, block_sd) if passes(block_sd) else None
