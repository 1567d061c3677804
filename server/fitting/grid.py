"""Vectorised global search over (log C_mid, B) with the linear parameters in closed form.

For fixed (C_mid, B) the curve ``R0 + (A - R0) * s(C)`` is linear in A (and in R0 when R0 is
fitted), so the best A for every grid cell is a weighted least-squares solution that numpy
computes for the whole grid in a few matrix products.  Because the SSR is an exact quadratic
in A within a cell, clipping A to the value range gives the constrained optimum, and the same
quadratic gives the *profile* SSR over A that the interval code uses to decide whether A is
identified at all.

The search runs on data binned in log-compute (bin means weighted by counts, plus the
within-bin sum of squares so SSRs stay comparable with the full data), which keeps it at
~1 ms whatever the number of points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import FloatArray, frac

MAX_BINS = 48
N_M = 56  # log C_mid grid size
N_B = 36  # B grid size
B_MIN, B_MAX = 0.25, 12.0
M_MAX = float(np.log(30.0))  # C_mid up to 30x the largest fitted compute
B_BOUNDS = (0.03, 40.0)  # bounds used by the refinement (wider than the grid)


@dataclass(frozen=True)
class Binned:
    x: FloatArray
    y: FloatArray
    w: FloatArray
    ssw: float  # within-bin sum of squares, so binned SSR + ssw == full SSR for a flat model


def bin_data(x: FloatArray, y: FloatArray, max_bins: int = MAX_BINS) -> Binned:
    """Average the points into at most ``max_bins`` equal-width bins of log-compute."""
    n = x.size
    if n <= max_bins:
        return Binned(x, y, np.ones(n), 0.0)
    lo, hi = float(x[0]), float(x[-1])  # x is sorted
    span = hi - lo
    if span <= 0:
        return Binned(np.array([lo]), np.array([y.mean()]), np.array([float(n)]),
                      float(((y - y.mean()) ** 2).sum()))
    idx = np.minimum(((x - lo) / span * max_bins).astype(np.int64), max_bins - 1)
    w = np.bincount(idx, minlength=max_bins).astype(float)
    sx = np.bincount(idx, x, max_bins)
    sy = np.bincount(idx, y, max_bins)
    syy = np.bincount(idx, y * y, max_bins)
    keep = w > 0
    w, sx, sy, syy = w[keep], sx[keep], sy[keep], syy[keep]
    ybar = sy / w
    ssw = float(np.maximum(syy - w * ybar * ybar, 0.0).sum())
    return Binned(sx / w, ybar, w, ssw)


@dataclass(frozen=True)
class Grid:
    """Per-cell results, all flat arrays over the cells."""

    m: FloatArray
    b: FloatArray
    a_u: FloatArray  # unconstrained best A
    k_a: FloatArray  # curvature of the profile SSR in A: ssr(A) = ssr_u + k_a (A - a_u)^2
    ssr_u: FloatArray
    a: FloatArray  # A clipped to the value range (or the fixed A)
    r0: FloatArray  # R0 of the cell (constant when R0 is fixed)
    ssr: FloatArray  # SSR at (a, r0)
    # Posterior pieces (see ``posterior.py``): log det of the normal matrix of the linear
    # parameters, and how the best R0 moves with A (R0 fitted only; zeros when R0 is fixed):
    # R0(A) = r0_u - r0_slope * (A - a_u), with conditional variance s2 / guu.
    logdet: FloatArray
    r0_u: FloatArray
    r0_slope: FloatArray
    guu: FloatArray

    @property
    def best(self) -> int:
        return int(np.argmin(self.ssr))


def default_axes(x_min: float, n_m: int = N_M, n_b: int = N_B) -> tuple[FloatArray, FloatArray]:
    """Grid axes: C_mid from a bit below the first fitted compute to 30x the last one."""
    m = np.linspace(min(x_min, -0.5) - 1.0, M_MAX, n_m)
    b = np.geomspace(B_MIN, B_MAX, n_b)
    return m, b


def search(
    data: Binned,
    r0: float | None,
    value_range: tuple[float, float],
    m_axis: FloatArray,
    b_axis: FloatArray,
    fixed_a: float | None = None,
) -> Grid:
    """Evaluate every (m, B) cell; ``r0=None`` fits R0 jointly with A (both linear)."""
    lo, hi = value_range
    m_grid, b_grid = np.meshgrid(m_axis, b_axis, indexing="ij")
    mm, bb = m_grid.ravel(), b_grid.ravel()
    s = frac(data.x[None, :], mm[:, None], bb[:, None])  # (cells, bins)
    w, y = data.w, data.y
    tiny = 1e-300
    if r0 is not None:
        z = y - r0
        szz = float(w @ (z * z)) + data.ssw
        sz = s @ (w * z)
        ss = np.maximum((s * s) @ w, tiny)
        a_u = r0 + sz / ss
        k_a = ss
        ssr_u = szz - sz * sz / ss
        a = np.full_like(a_u, fixed_a) if fixed_a is not None else np.clip(a_u, lo, hi)
        g = a - r0
        ssr = szz - 2.0 * g * sz + g * g * ss
        r0_cells = np.full_like(a, r0)
        logdet = np.log(ss)
        zeros = np.zeros_like(a)
        r0_u, r0_slope, guu_c = np.full_like(a, r0), zeros, np.ones_like(a)
    else:
        u = 1.0 - s
        guu = np.maximum((u * u) @ w, tiny)
        guv = (u * s) @ w
        gvv = (s * s) @ w
        gu = u @ (w * y)
        gv = s @ (w * y)
        syy = float(w @ (y * y)) + data.ssw
        det = np.maximum(guu * gvv - guv * guv, tiny)
        a_u = (guu * gv - guv * gu) / det
        r0_u = (gvv * gu - guv * gv) / det
        k_a = np.maximum(gvv - guv * guv / guu, tiny)
        ssr_u = syy - (r0_u * gu + a_u * gv)
        a = np.full_like(a_u, fixed_a) if fixed_a is not None else np.clip(a_u, lo, hi)
        r0_cells = np.clip((gu - guv * a) / guu, lo, hi)
        ssr = (syy - 2.0 * (r0_cells * gu + a * gv) + r0_cells**2 * guu
               + 2.0 * r0_cells * a * guv + a * a * gvv)
        logdet = np.log(det)
        r0_slope = guv / guu
        guu_c = guu
    return Grid(mm, bb, a_u, k_a, np.maximum(ssr_u, 0.0), a, r0_cells, np.maximum(ssr, 0.0),
                logdet, r0_u, r0_slope, guu_c)
