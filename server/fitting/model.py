"""The ScaleRL sigmoid and its derivatives.

Internally compute is handled as ``x = ln(C / c0)`` with ``c0`` a per-fit scale (the largest
compute in the fit window), and C_mid as ``m = ln(C_mid / c0)``.  In those coordinates the
curve is a plain logistic, ``R = R0 + (A - R0) * expit(B * (x - m))``, which is numerically
stable for any compute (no overflow of ``(C_mid / C) ** B``) and keeps the parameters on
comparable scales for the optimiser.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

FloatArray = NDArray[np.float64]


# The value-range widths for which a fit gives the decisions of the same run in [0, 1]
# (tests/fitting/test_value_scale.py); the API's limit (trainer_client.limits.VALUE_RANGE_WIDTH)
# is this span.
SUPPORTED_SPAN = (1e-3, 1e9)


def value_range_problem(value_range: tuple[float, float]) -> str | None:
    """What is wrong with ``value_range`` as a fit's, or None."""
    lo, hi = (float(v) for v in value_range)
    if not lo < hi:
        return "value_range must be (low, high) with low < high"
    if not SUPPORTED_SPAN[0] <= hi - lo <= SUPPORTED_SPAN[1]:
        return (f"value_range's width must be between {SUPPORTED_SPAN[0]:g} and "
                f"{SUPPORTED_SPAN[1]:g}, got {hi - lo:g} (rescale the metric)")
    return None


def diff_noise_sd(y: FloatArray) -> float:
    """The sd of independent evaluation noise from successive differences, robustly (a
    difference of two draws is N(0, 2 sd^2), whose median absolute value is 0.954 sd): a
    trend or a step moves few differences, so it barely inflates this."""
    return float(np.median(np.abs(np.diff(y)))) / 0.954


def value_span(value_range: tuple[float, float]) -> float:
    """The width of the value range the metric lives in: the unit of every threshold on
    values in the engine (a claim's width, the paper's 0.02 margin, the noise floors), set
    for a [0, 1] pass rate.  A metric on another scale (a percentage, a reward up to 10) with
    its ``value_range`` set gets the same decisions as the same run rescaled to [0, 1]."""
    return float(value_range[1]) - float(value_range[0])


def frac(x: FloatArray, m: float | FloatArray, b: float | FloatArray) -> FloatArray:
    """Fraction of the total gain reached at log-compute ``x``: ``1 / (1 + (C_mid/C)^B)``."""
    return expit(np.multiply(b, np.subtract(x, m)))


def curve(
    compute: ArrayLike, a: float, b: float, c_mid: float, r0: float
) -> FloatArray:
    """``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)`` in raw compute units (C <= 0 gives R0)."""
    c = np.asarray(compute, dtype=float)
    out = np.full(c.shape, float(r0))
    pos = c > 0
    if c_mid > 0 and np.any(pos):
        x = np.log(c[pos] / c_mid)
        out[pos] = r0 + (a - r0) * expit(b * x)
    return out


def curve_x(x: FloatArray, a: float, m: float, b: float, r0: float) -> FloatArray:
    """The curve in internal coordinates (see module docstring)."""
    return r0 + (a - r0) * frac(x, m, b)


def jacobian_x(x: FloatArray, a: float, m: float, b: float, r0: float, fit_r0: bool) -> FloatArray:
    """Analytic Jacobian of :func:`curve_x` w.r.t. (A, m, B[, R0]); shape (n, 3 or 4)."""
    s = frac(x, m, b)
    ds = s * (1.0 - s)
    gain = a - r0
    cols = [s, -gain * b * ds, gain * (x - m) * ds]
    if fit_r0:
        cols.append(1.0 - s)
    return np.column_stack(cols)


def curves_many(compute: ArrayLike, params: FloatArray) -> FloatArray:
    """Evaluate many parameter sets at once.

    ``params`` has rows (A, B, C_mid, R0); returns shape (len(params), len(compute)).
    Used for prediction bands and comparison draws, where a Python loop would dominate.
    """
    c = np.asarray(compute, dtype=float).reshape(-1)
    p = np.asarray(params, dtype=float).reshape(-1, 4)
    pos = c > 0
    # ln(C / C_mid) as ln C - ln C_mid (two small logs, not one per cell), then everything in
    # place in one (params, compute) array: 2.6x faster for 200 draws x 900 computes, and the
    # Compare page evaluates every run's draws on a grid like that.
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(np.where(pos, c, 1.0))[None, :] - np.log(p[:, 2:3])
    x *= p[:, 1:2]
    s = expit(x, out=x)
    if not pos.all():
        s[:, ~pos] = 0.0  # C <= 0 (or NaN) gives R0
    s *= p[:, 0:1] - p[:, 3:4]
    s += p[:, 3:4]
    return s
