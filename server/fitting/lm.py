"""A small bounded Levenberg-Marquardt solver for the sigmoid's 3-4 parameters.

``scipy.optimize.least_squares`` (trf) is robust but pays ~2 ms of Python set-up and
bookkeeping per call whatever the problem size, and a fit makes many calls: the break test
refits up to 17 prefixes of the window.  The problem here is tiny (at most four parameters,
an analytic Jacobian, a start from the grid's best cell or a previous fit), so a plain
Marquardt iteration with box constraints handled by an active set converges in a handful of
steps of a few tens of microseconds each.

The start must be in the right basin (the grid's best cell, or a previous fit that a coarse
grid confirmed, as ``fit.point_fit`` does): from a start with almost no gain the C_mid and B
columns of the Jacobian vanish and the iteration can slide onto a flat curve, where trf's
reflective steps sometimes still find their way out.

Bounds: a parameter sitting on a bound whose gradient points out of the box is held there
for the step (the active set); the step of the others is clipped into the box.  Every
accepted step lowers the SSR, so the result is never worse than the start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

from .model import FloatArray, frac

MAX_ITER = 200
FTOL = 1e-12  # relative SSR decrease below which the fit has converged
XTOL = 1e-10  # relative step below which the fit has converged
LAMBDA_MAX = 1e12


@dataclass(frozen=True)
class Solution:
    theta: FloatArray  # (A, m, B, R0), fixed entries as given
    ssr: float  # weighted sum of squared residuals at ``theta``
    iterations: int


def solve(
    x: FloatArray,
    y: FloatArray,
    start: FloatArray,
    free: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
    weights: FloatArray | None = None,
) -> Solution:
    """Least squares of ``R0 + (A - R0) * frac(x, m, B)`` against ``y`` over the ``free``
    (boolean mask over A, m, B, R0) parameters, within ``[lower, upper]`` (full length 4)."""
    w = None if weights is None else np.asarray(weights, dtype=float)
    th = np.clip(np.asarray(start, dtype=float), lower, upper)
    idx = np.flatnonzero(free)
    lo_f, hi_f = lower[idx], upper[idx]

    def residual(t: FloatArray) -> tuple[FloatArray, FloatArray, float]:
        s = frac(x, t[1], t[2])
        r = t[3] + (t[0] - t[3]) * s - y
        return s, r, float((r if w is None else w * r) @ r)

    def jacobian(t: FloatArray, s: FloatArray) -> FloatArray:
        ds = s * (1.0 - s)
        gain = t[0] - t[3]
        jac = np.empty((x.size, idx.size))
        for col, i in enumerate(idx):
            if i == 0:
                jac[:, col] = s
            elif i == 1:
                np.multiply(ds, -gain * t[2], out=jac[:, col])
            elif i == 2:
                np.multiply(ds, gain * (x - t[1]), out=jac[:, col])
            else:
                np.subtract(1.0, s, out=jac[:, col])
        return jac

    s, r, ssr = residual(th)
    lam = -1.0
    it = 0
    while it < MAX_ITER:
        it += 1
        jac = jacobian(th, s)
        jw = jac if w is None else jac * w[:, None]
        h = jw.T @ jac
        g = jw.T @ r
        t_free = th[idx]
        # Active set: on a bound with the descent direction (-g) pointing out of the box.
        held = ((t_free <= lo_f) & (g > 0)) | ((t_free >= hi_f) & (g < 0))
        move = ~held
        if not move.any():
            break
        hm, gm = (h, g) if move.all() else (h[np.ix_(move, move)], g[move])
        diag = np.maximum(hm.diagonal(), 1e-30)
        if lam < 0:
            lam = 1e-3  # relative to the diagonal (Marquardt scaling)
        improved = False
        while lam <= LAMBDA_MAX:
            # LAPACK's Cholesky solve directly: numpy's wrapper costs 10x more than the
            # solve itself at this size.  info != 0: not positive definite, damp more.
            _, step, info = lapack.dposv(hm + np.diag(lam * diag), -gm)
            if info != 0:
                lam *= 10.0
                continue
            trial = th.copy()
            trial[idx[move]] = np.clip(t_free[move] + step, lo_f[move], hi_f[move])
            s_new, r_new, ssr_new = residual(trial)
            if np.isfinite(ssr_new) and ssr_new < ssr:
                moved = np.abs(trial - th).max() / (np.abs(th).max() + XTOL)
                drop = (ssr - ssr_new) / max(ssr, 1e-300)
                th, s, r, ssr = trial, s_new, r_new, ssr_new
                lam = max(lam / 3.0, 1e-15)
                improved = True
                if drop < FTOL or moved < XTOL:
                    return Solution(th, ssr, it)
                break
            lam *= 4.0
        if not improved:
            break  # no step lowers the SSR: a (constrained) minimum to working precision
    return Solution(th, ssr, it)
