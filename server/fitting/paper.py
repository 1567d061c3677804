"""Reference methods for side-by-side comparison with the default fitter.

* ``paper``: the procedure published in the ScaleRL paper (App. A.5): grid over
  A in {0.450, 0.455, ..., 0.800} and 100 linearly spaced C_mid in [100, 40000], B fitted with
  ``scipy.optimize.curve_fit`` from its default start (B = 1) for every (A, C_mid) pair, least
  SSR wins.  R0 is fixed (given or first point); the paper does not fit it, so when neither is
  available we use the first point of the fit window and say so.  No intervals, no status
  beyond a warning when A lands on the grid edge: the paper has neither.
* ``curve_fit``: a plain ``curve_fit`` of A, B, C_mid (and R0 when it has to be fitted) from
  a naive start, the baseline most people would write first.

``exact=False`` replaces the 7,100 ``curve_fit`` calls of the paper method by the same
Levenberg-Marquardt iteration from B = 1 run on all pairs at once in numpy; it lands on the
same B (tested), and makes the accuracy bench affordable.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

from .model import FloatArray, curve
from .result import FitOptions, FitResult

if TYPE_CHECKING:
    from .fit import Prepared

A_GRID = np.round(np.arange(0.450, 0.8000001, 0.005), 3)
CMID_GRID = np.linspace(100.0, 40000.0, 100)
# The grid has 7,100 (A, C_mid) pairs: one (pairs x points) float matrix is 5.7 GB at 100k
# points. Pairs are independent, so they are processed in chunks of about this many matrix
# elements (8 MB per temporary); every pair's arithmetic, and so the answer, is unchanged.
CHUNK_ELEMENTS = 2**20


def _chunks(pairs: int, points: int) -> list[slice]:
    rows = max(1, CHUNK_ELEMENTS // max(points, 1))
    return [slice(i, min(i + rows, pairs)) for i in range(0, pairs, rows)]


def _sig(c: FloatArray, a: float, b: float, cm: float, r0: float) -> FloatArray:
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return r0 + (a - r0) / (1.0 + (cm / c) ** b)


def _b_exact(c: FloatArray, y: FloatArray, r0: float, a: float, cm: float) -> float:
    def f(cc: FloatArray, b: float) -> FloatArray:
        return _sig(cc, a, b, cm, r0)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            popt, _ = curve_fit(f, c, y)
        return float(popt[0])
    except (RuntimeError, ValueError):
        return float("nan")


def _b_vectorised(
    c: FloatArray, y: FloatArray, r0: float, a: FloatArray, cm: FloatArray, iters: int = 60
) -> FloatArray:
    """Damped Gauss-Newton (LM) for B on every (A, C_mid) pair at once, from B = 1 (in chunks
    of pairs: each pair's iteration is its own, so chunking changes no result)."""
    parts = [_b_vectorised_chunk(c, y, r0, a[k], cm[k], iters) for k in _chunks(a.size, c.size)]
    return np.concatenate(parts) if parts else np.ones(0)


def _b_vectorised_chunk(
    c: FloatArray, y: FloatArray, r0: float, a: FloatArray, cm: FloatArray, iters: int
) -> FloatArray:
    lc = np.log(cm[:, None] / c[None, :])  # ln(C_mid / C)
    g = (a - r0)[:, None]
    b = np.ones(a.size)
    lam = np.full(a.size, 1e-3)

    def resid(bb: FloatArray) -> FloatArray:
        with np.errstate(over="ignore", invalid="ignore"):
            return r0 + g / (1.0 + np.exp(np.clip(bb[:, None] * lc, -700, 700))) - y[None, :]

    r = resid(b)
    ssr = np.einsum("ij,ij->i", r, r)
    for _ in range(iters):
        e = np.exp(np.clip(b[:, None] * lc, -700, 700))
        jac = -g * lc * e / (1.0 + e) ** 2
        jj = np.einsum("ij,ij->i", jac, jac)
        jr = np.einsum("ij,ij->i", jac, r)
        step = -jr / (jj * (1.0 + lam) + 1e-300)
        nb = b + step
        nr = resid(nb)
        nssr = np.einsum("ij,ij->i", nr, nr)
        better = np.isfinite(nssr) & (nssr < ssr)
        b = np.where(better, nb, b)
        r = np.where(better[:, None], nr, r)
        ssr = np.where(better, nssr, ssr)
        lam = np.where(better, lam / 10.0, lam * 10.0)
    return b


def fit_paper(
    c: FloatArray,
    y: FloatArray,
    r0: float,
    cmid_grid: FloatArray | None = None,
    exact: bool = True,
    a_grid: FloatArray = A_GRID,
) -> tuple[float, float, float, float]:
    """The paper's grid procedure; returns (A, B, C_mid, SSR).  ``a_grid``: the paper's
    (a pass rate's 0.45-0.80), or that share of another value range."""
    cmg = CMID_GRID if cmid_grid is None else np.asarray(cmid_grid, dtype=float)
    aa, cc = np.meshgrid(a_grid, cmg, indexing="ij")
    aa, cc = aa.ravel(), cc.ravel()
    if exact:
        bb = np.array([_b_exact(c, y, r0, float(a), float(m)) for a, m in zip(aa, cc, strict=True)])
    else:
        bb = _b_vectorised(c, y, r0, aa, cc)
    ssr = np.empty(aa.size)
    for k in _chunks(aa.size, c.size):  # bounded memory; same per-pair sums as one matrix
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pred = r0 + (aa[k] - r0)[:, None] / (1.0 + (cc[k, None] / c[None, :]) ** bb[k, None])
        ssr[k] = ((pred - y[None, :]) ** 2).sum(1)
    ssr[~np.isfinite(ssr)] = np.inf
    i = int(np.argmin(ssr))
    return float(aa[i]), float(bb[i]), float(cc[i]), float(ssr[i])


def fit_plain(
    c: FloatArray, y: FloatArray, r0: float | None
) -> tuple[float, float, float, float] | None:
    """Plain ``curve_fit`` of A, B, C_mid (and R0) from a naive start; None on failure."""
    p0 = [float(y.max()), 1.0, float(np.median(c))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if r0 is None:
                popt, _ = curve_fit(lambda cc, a, b, m, r: _sig(cc, a, b, m, r), c, y,
                                    p0=[*p0, float(y[0])], maxfev=5000)
                return tuple(float(v) for v in popt)  # type: ignore[return-value]
            popt, _ = curve_fit(lambda cc, a, b, m: _sig(cc, a, b, m, r0), c, y, p0=p0,
                                maxfev=5000)
        return float(popt[0]), float(popt[1]), float(popt[2]), float(r0)
    except (RuntimeError, ValueError, TypeError):
        return None


def fit_baseline(
    prep: Prepared,
    options: FitOptions,
    cmid_grid: FloatArray | None = None,
    exact: bool = True,
) -> FitResult:
    """Run the ``paper`` or ``curve_fit`` method and wrap it in a :class:`FitResult`."""
    c = prep.c0 * np.exp(prep.x)
    y = prep.y
    n = int(y.size)
    msg = ""
    r0 = prep.r0
    src = prep.r0_source
    if options.method == "paper":
        if r0 is None:
            r0, src = float(y[0]), "fitted"
            msg = "the paper fixes R0; none given, so R0 = first value of the fit window. "
        lo, hi = (float(v) for v in options.value_range)
        # The paper's A grid is a pass rate's 0.45-0.80: the same share of another range.
        a_grid = A_GRID if (lo, hi) == (0.0, 1.0) else lo + (hi - lo) * A_GRID
        a, b, cm, ssr = fit_paper(c, y, r0, cmid_grid, exact, a_grid)
        if a in (a_grid[0], a_grid[-1]):
            msg += (f"A is on the edge of the paper's grid ({a_grid[0]:g}-{a_grid[-1]:g}: "
                    "0.45-0.80 of the value range).")
    else:
        out = fit_plain(c, y, r0)
        if out is None or not all(np.isfinite(out)):
            return FitResult(status="insufficient_data", R0=r0, r0_source=src, n_points=n,
                             fit_range=prep.fit_range, target_compute=prep.target,
                             method=options.method, message="curve_fit did not converge",
                             value_range=tuple(options.value_range))  # type: ignore[arg-type]
        a, b, cm, r0 = out
        ssr = float(((curve(c, a, b, cm, r0) - y) ** 2).sum())
    pred = None if prep.target is None else float(curve([prep.target], a, b, cm, r0)[0])
    return FitResult(
        status="ok", A=a, B=b, C_mid=cm, R0=r0, r0_source=src, ci=None, A_lower_bound=None,
        n_points=n, fit_range=prep.fit_range, target_compute=prep.target,
        predicted_at_target=pred, predicted_interval=None, rmse=float(np.sqrt(ssr / n)),
        method=options.method, message=msg.strip(), a_fit=a, ssr=ssr,
        value_range=tuple(options.value_range),  # type: ignore[arg-type]
    )
