"""Grid posterior over (ln C_mid, ln B) with A and R0 integrated in closed form.

This white-noise form (the noise variance fixed from the point fit's residuals) serves the
break test and the pooled fit of a group; a single run's intervals come from ``ar1.py``,
which integrates the AR(1) noise model on top of the same building blocks.

Why a posterior and not a local (Laplace / profile) interval: before and around its knee a
run's likelihood is a long banana in (A, C_mid, B), and an interval built around the optimum
is narrow exactly when noise makes the curve look flatter than it is -- the runs a status
rule then calls "identified".  Integrating over the banana instead gives intervals whose
coverage holds whichever way the noise fell, and a point forecast that averages over the
plausible curves instead of betting on the single best one (smaller large errors).

The model: ``y = R0 + (A - R0) s(x; m, B) + noise``, the noise Gaussian with variance
``s2 = sigma^2 tau`` (the residual variance inflated by its autocorrelation time, the
effective-sample-size correction of ``intervals.py``) and widened from z to t.  Priors: flat
in m = ln C_mid (from below the window to 30 x its end), flat in ln B (0.25 to 12), flat in A
over the value range, flat in R0.  For fixed (m, B) the model is linear in A (and R0), so the
grid search already holds everything the marginal needs: the posterior weight of a cell is

    exp(-(SSR_u - SSR_min) / 2 s2) * det(G)^(-1/2) * P(lo <= A <= hi | cell)

and A given the cell is a normal truncated to the value range (R0 given A a normal).  A first
pass on the global grid finds where the mass is; a second, finer grid over that region gives
the draws.  Cost: two grid evaluations on binned data plus a few thousand draws, ~2-4 ms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr, ndtr, ndtri

from . import grid as G
from .model import FloatArray

N_POSTERIOR = 4000  # draws used for the intervals and the point forecast
REFINE = (44, 40)  # (m, B) cells of the second, finer grid
MASS_FLOOR = 1e-7  # cells below this share of the peak weight bound the refined region
# A refined grid must spread the mass over at least this many cells along each axis; a posterior
# narrower than that (an evaluation set with almost no noise) is refined again, at most
# MAX_EXTRA_REFINES times.  Draws are spread uniformly over their cell, so a posterior that fits
# in one cell would come out as that cell -- and its intervals could miss the point fit itself.
MIN_SPAN = 8
MAX_EXTRA_REFINES = 2


# The prior's support for B: 10%-to-90% of the gain within 1.7x to ~6,600x compute.  Flatter
# curves are physically implausible for a training run, and admitting them lets prior volume
# (many slow curves that all fit a short window) drag the forecast upwards.
B_PRIOR = (0.5, 8.0)


def posterior_axes(x_min: float, n_m: int = G.N_M, n_b: int = G.N_B) -> tuple[FloatArray,
                                                                               FloatArray]:
    """The coarse grid of the posterior: the point fit's C_mid axis, B over ``B_PRIOR``."""
    m, _ = G.default_axes(x_min, n_m, n_b)
    return m, np.geomspace(B_PRIOR[0], B_PRIOR[1], n_b)


@dataclass(frozen=True)
class Posterior:
    draws: FloatArray  # rows (A, m, B, R0) in internal coordinates (m = ln(C_mid / c0))


def log_jeffreys(gr: G.Grid, data: G.Binned, fit_r0: bool) -> FloatArray:
    """Log of Jeffreys' prior, sqrt(det(J' W J)), at every cell (A, R0 at the cell's values).

    Jeffreys' prior is what keeps the posterior honest before the knee: there the curves of
    many (C_mid, B) cells are nearly the same function of the data (A and C_mid trade off
    along a banana), so a flat prior counts that region many times over and drags A and the
    forecast up.  The Fisher information is small exactly there, so Jeffreys' prior weights it
    down to what the data can distinguish (and it is invariant to how C_mid and B are
    parametrised).
    """
    s = G.frac(data.x[None, :], gr.m[:, None], gr.b[:, None])  # (cells, bins)
    ds = s * (1.0 - s)
    gain = (gr.a - gr.r0)[:, None]
    cols = [s, -gain * gr.b[:, None] * ds, gain * (data.x[None, :] - gr.m[:, None]) * ds]
    if fit_r0:
        cols.append(1.0 - s)
    k = len(cols)
    w = data.w[None, :]
    info = np.empty((gr.m.size, k, k))
    for i in range(k):
        for j in range(i, k):
            info[:, i, j] = info[:, j, i] = (cols[i] * cols[j] * w).sum(axis=1)
    sign, logdet = np.linalg.slogdet(info)
    return np.where(sign > 0, 0.5 * logdet, -np.inf)


def log_interval_mass(mu: FloatArray, sd: FloatArray, lo: float, hi: float) -> FloatArray:
    """log P(lo <= X <= hi) for X ~ N(mu, sd^2), stable in both tails."""
    alpha, beta = (lo - mu) / sd, (hi - mu) / sd
    return np.where(
        mu <= (lo + hi) / 2,
        log_ndtr(beta) + np.log1p(-np.exp(np.minimum(log_ndtr(alpha) - log_ndtr(beta), -1e-12))),
        log_ndtr(-alpha) + np.log1p(-np.exp(np.minimum(log_ndtr(-beta) - log_ndtr(-alpha),
                                                       -1e-12))),
    )


def normalise(logw: FloatArray) -> FloatArray:
    """Weights from log weights (non-finite ones get zero), summing to one."""
    logw = np.where(np.isfinite(logw), logw, -np.inf)
    w = np.exp(logw - logw.max())
    return w / w.sum()


def _cell_weights(gr: G.Grid, s2: float, lo: float, hi: float,
                  log_prior: FloatArray) -> tuple[FloatArray, FloatArray]:
    sd = np.sqrt(s2 / gr.k_a)
    logw = (-(gr.ssr_u - gr.ssr_u.min()) / (2.0 * s2) - 0.5 * gr.logdet
            + log_interval_mass(gr.a_u, sd, lo, hi) + log_prior)
    return normalise(logw), sd


def _mass_indices(cell_m: FloatArray, cell_b: FloatArray, w: FloatArray, m_axis: FloatArray,
                  b_axis: FloatArray) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Axis indices of the cells that hold the posterior mass (``w`` per cell)."""
    keep = w >= MASS_FLOOR * w.max()
    return (np.searchsorted(m_axis, cell_m[keep]),
            np.searchsorted(b_axis, cell_b[keep] * (1 - 1e-12)))


def resolved(cell_m: FloatArray, cell_b: FloatArray, w: FloatArray, m_axis: FloatArray,
             b_axis: FloatArray) -> bool:
    """Whether the grid resolves the posterior: its mass spans ``MIN_SPAN`` cells or more
    along each axis."""
    mi, bi = _mass_indices(cell_m, cell_b, w, m_axis, b_axis)
    return bool(mi.max() - mi.min() + 1 >= MIN_SPAN and bi.max() - bi.min() + 1 >= MIN_SPAN)


def refined_axes(cell_m: FloatArray, cell_b: FloatArray, w: FloatArray, m_axis: FloatArray,
                 b_axis: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A finer grid over the (m, ln B) box that holds the posterior mass (``w`` per cell)."""
    mi, bi = _mass_indices(cell_m, cell_b, w, m_axis, b_axis)
    m_lo = m_axis[max(int(mi.min()) - 1, 0)]
    m_hi = m_axis[min(int(mi.max()) + 1, m_axis.size - 1)]
    b_lo = b_axis[max(int(bi.min()) - 1, 0)]
    b_hi = b_axis[min(int(bi.max()) + 1, b_axis.size - 1)]
    return np.linspace(m_lo, m_hi, REFINE[0]), np.geomspace(b_lo, b_hi, REFINE[1])


Grid_ = TypeVar("Grid_")


def zoom_in(
    cell_m: FloatArray, cell_b: FloatArray, w: FloatArray, m_axis: FloatArray, b_axis: FloatArray,
    evaluate: Callable[[FloatArray, FloatArray],
                       tuple[Grid_, FloatArray, FloatArray, FloatArray]],
) -> tuple[Grid_, FloatArray, FloatArray]:
    """The posterior on a grid refined over the mass of ``w`` (per cell, at ``cell_m``,
    ``cell_b`` on the axes ``m_axis``, ``b_axis``), refined again while the grid does not
    resolve it (`resolved`), at most ``MAX_EXTRA_REFINES`` times.  ``evaluate(fm, fb)`` builds
    the posterior on the axes (fm, fb) and returns (it, its cells' m and B, their weights).
    Returns (the posterior, its axes)."""
    fm, fb = refined_axes(cell_m, cell_b, w, m_axis, b_axis)
    post, cm, cb, cw = evaluate(fm, fb)
    for _ in range(MAX_EXTRA_REFINES):
        if resolved(cm, cb, cw, fm, fb):
            break
        fm, fb = refined_axes(cm, cb, cw, fm, fb)
        post, cm, cb, cw = evaluate(fm, fb)
    return post, fm, fb


def jitter_cells(cell_m: FloatArray, cell_b: FloatArray, fm: FloatArray, fb: FloatArray,
                 cells: NDArray[np.intp], rng: np.random.Generator
                 ) -> tuple[FloatArray, FloatArray]:
    """(m, B) of the drawn cells, spread uniformly over each cell so C_mid and B intervals
    are not quantised to the grid."""
    n = cells.size
    dm = (fm[1] - fm[0]) if fm.size > 1 else 0.0
    dlb = float(np.log(fb[1] / fb[0])) if fb.size > 1 else 0.0
    return (cell_m[cells] + dm * (rng.random(n) - 0.5),
            cell_b[cells] * np.exp(dlb * (rng.random(n) - 0.5)))


def truncated_normal(mu: FloatArray, sd: FloatArray, lo: float, hi: float,
                     rng: np.random.Generator) -> FloatArray:
    """One draw per (mu, sd) from N(mu, sd^2) truncated to [lo, hi] (inverse CDF)."""
    p_lo, p_hi = ndtr((lo - mu) / sd), ndtr((hi - mu) / sd)
    u = p_lo + rng.random(np.shape(mu)) * (p_hi - p_lo)
    return np.clip(mu + sd * ndtri(np.clip(u, 1e-300, 1 - 1e-16)), lo, hi)


def sample(
    binned: G.Binned,
    r0: float | None,
    value_range: tuple[float, float],
    s2: float,
    m_axis: FloatArray,
    b_axis: FloatArray,
    coarse: G.Grid | None = None,
    n: int = N_POSTERIOR,
    seed: int = 0,
) -> Posterior:
    """Draws from the grid posterior (see the module docstring)."""
    lo, hi = value_range
    gr = coarse if coarse is not None else G.search(binned, r0, value_range, m_axis, b_axis)
    fit_r0 = r0 is None
    w, _ = _cell_weights(gr, s2, lo, hi, log_jeffreys(gr, binned, fit_r0))
    fm, fb = refined_axes(gr.m, gr.b, w, m_axis, b_axis)
    fine = G.search(binned, r0, value_range, fm, fb)
    w, sd = _cell_weights(fine, s2, lo, hi, log_jeffreys(fine, binned, fit_r0))
    rng = np.random.default_rng(seed)
    cells = rng.choice(w.size, size=n, p=w)
    m, b = jitter_cells(fine.m, fine.b, fm, fb, cells, rng)
    mu = fine.a_u[cells]
    a = truncated_normal(mu, sd[cells], lo, hi, rng)
    if r0 is None:
        r0_mu = fine.r0_u[cells] - fine.r0_slope[cells] * (a - mu)
        r0_d = np.clip(r0_mu + np.sqrt(s2 / fine.guu[cells]) * rng.standard_normal(n), lo, hi)
    else:
        r0_d = np.full(n, float(r0))
    return Posterior(np.column_stack([a, m, b, r0_d]))
