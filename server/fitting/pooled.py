"""The grid posterior of a recipe fitted on several seeds at once (a random effect on A).

Model: seed ``i`` of a recipe shows ``y_ij = R0_i + (A_i - R0_i) s(x_ij; m, B) + noise_i``.
The seeds share the shape of the curve (C_mid and B: the recipe's efficiency) and their
ceilings scatter around the recipe's: ``A_i ~ N(A, t^2)``.  Each seed keeps its own R0 (given,
its first point, or fitted) and its own noise: AR(1) with its own rho and sigma, integrated out
as for one run (``ar1.py``).  ``A``, the recipe's ceiling, is what
the group reports; ``t`` is the seed spread.

Why a random effect and not one shared A: seeds of one recipe do not reach exactly the same
ceiling (the paper's seeds differ by about +-0.02), so pooling them as if they did would give
an interval that shrinks like 1/sqrt(seeds) towards a value no single seed reaches, and that
stops covering the recipe's ceiling as soon as the spread matters.  With the random effect the
interval shrinks like 1/sqrt(seeds) while the seeds agree and stays honest when they do not.

For fixed (m, B) everything else integrates in closed form, as for one run: per seed, the
(rho, cell) grid of ``ar1.py`` gives the evidence ``Z_i`` (A_i flat, R0_i, sigma_i and rho_i
integrated out) and the seed's estimate of its ceiling, ``a_u_i`` with variance ``v_i`` (the
moments of its mixture over rho).  Integrating ``A_i`` against ``N(A, t^2)`` instead of flat
leaves ``a_u_i ~ N(A, v_i + t^2)``, and a flat prior on A over the value range gives the
cell's weight

    prod_i [Z_i w_i^(1/2)] exp(-Q / 2) W^(-1/2) P(lo <= A <= hi)

with ``w_i = 1 / (v_i + t^2)``, ``W = sum w_i``, ``Q`` the weighted scatter of the ``a_u_i``
about their weighted mean.  ``t`` lives on a small grid with a half-normal prior of scale
``SPREAD_SCALE``; (m, B) carry Jeffreys' prior of the shared-A model (the same role as for one
run: down-weighting the pre-knee banana; computed on white noise of each seed's residual
variance, which only shapes it).  Draws: a (cell, t) pair, A from its truncated normal, each
A_i given A, each seed's rho given the cell, each fitted R0_i given A_i and rho.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import ndtr

from . import ar1
from . import grid as G
from . import posterior as P
from .b_prior import log_density as log_b_density
from .model import FloatArray, value_span

# Prior of the seed spread t (sd of the seeds' ceilings around the recipe's): half-normal
# with this scale.  The paper reports seeds of one recipe within about +-0.02 of each other in
# fitted A, which includes each fit's own error: a true spread of ~0.01 or less.  A scale of
# 0.01 keeps 0.02-0.03 plausible when the seeds say so, without inflating every group of two
# or three agreeing seeds by a spread they give no evidence of.
SPREAD_SCALE = 0.01
T_GRID = np.concatenate([[0.0], np.geomspace(0.001, 0.1, 17)])


@dataclass(frozen=True)
class Seed:
    """One seed's fit window in the group's coordinates (x = ln(C / c0), c0 shared), in
    evaluation order."""

    x: FloatArray
    y: FloatArray
    r0: float | None  # None -> fitted
    s2: float  # residual variance of its own fit (shapes Jeffreys' prior only)

    @cached_property  # the pooled Jeffreys' prior reads it on the coarse and the fine grid
    def binned(self) -> G.Binned:
        return G.bin_data(self.x, self.y)


class _SeedCells:
    """One seed on a (m, B) grid: its evidence per cell and its ceiling's estimate, the rho
    dimension of its ``ar1.RhoGrid`` integrated out (moments of the mixture over rho)."""

    def __init__(self, seed: Seed, value_range: tuple[float, float], m_axis: FloatArray,
                 b_axis: FloatArray) -> None:
        xb, yb = ar1.blocks(seed.x, seed.y)
        g = ar1.RhoGrid(xb, yb, seed.r0, m_axis, b_axis, jeffreys=False)
        ev = g.log_evidence()
        top = ev.max(axis=0)
        self.log_z = top + np.log(np.exp(ev - top).sum(axis=0))
        self.p_rho = np.exp(ev - self.log_z)  # (rhos, cells)
        dof = g.dof
        # Variance of a_u given (rho, cell): a t law's, dof degrees of freedom.
        v = g.ssr_u / dof / g.k_a * dof / max(dof - 2, 1)
        self.a_u = (self.p_rho * g.a_u).sum(axis=0)
        self.v = np.maximum((self.p_rho * (v + g.a_u**2)).sum(axis=0) - self.a_u**2, 1e-12)
        lo, hi = value_range
        r0 = (self.p_rho * g.r0_u).sum(axis=0)
        self.gain = np.clip(self.a_u, lo, hi) - np.clip(r0, lo, hi)
        self.grid = g


@dataclass(frozen=True)
class PooledDraws:
    a: FloatArray  # (n,) the recipe's ceiling
    m: FloatArray  # (n,) ln(C_mid / c0)
    b: FloatArray  # (n,)
    spread: FloatArray  # (n,) t, the seed spread of A
    a_seeds: FloatArray  # (n, k) each seed's ceiling
    r0_seeds: FloatArray  # (n, k) each seed's R0


def _log_spread_prior() -> FloatArray:
    """Half-normal(SPREAD_SCALE) mass of each T_GRID point (its share of the axis)."""
    edges = np.concatenate([[0.0], (T_GRID[1:] + T_GRID[:-1]) / 2, [np.inf]])
    cdf = 2.0 * ndtr(edges / SPREAD_SCALE) - 1.0
    return np.log(np.maximum(np.diff(cdf), 1e-300))


def log_jeffreys_pooled(m: FloatArray, b: FloatArray, gains: list[FloatArray],
                        seeds: list[Seed]) -> FloatArray:
    """Log Jeffreys' prior of the shared-(A, m, B) model with one R0 per seed, per cell.

    The Fisher information is block-structured (each seed's R0 touches only its own data), so
    its determinant is the product of the R0 blocks times that of the summed Schur
    complements of (A, m, B): k small 3x3 problems instead of one (3 + k) square one.
    Unlike one run's prior (``ar1.RhoGrid._jeffreys``) it keeps each seed's gain: the gains
    also weigh the seeds against each other, and with unit gains ``bench/groups.py`` (prompts
    500) claimed A at 2 x C_mid for 5-10% of the groups, half of them missing.
    """
    total = None
    log_rr = np.zeros(m.size)
    for gain_i, sd in zip(gains, seeds, strict=True):
        binned = sd.binned
        x, w = binned.x, binned.w / sd.s2
        s = G.frac(x[None, :], m[:, None], b[:, None])
        ds = s * (1.0 - s)
        gain = gain_i[:, None]
        cols = [s, -gain * b[:, None] * ds, gain * (x[None, :] - m[:, None]) * ds]
        info = np.empty((m.size, 3, 3))
        for i in range(3):
            for j in range(i, 3):
                info[:, i, j] = info[:, j, i] = (cols[i] * cols[j] * w).sum(axis=1)
        if sd.r0 is None:
            u = 1.0 - s
            i_rr = np.maximum((u * u * w).sum(axis=1), 1e-300)
            i_tr = np.stack([(c * u * w).sum(axis=1) for c in cols], axis=1)
            info -= i_tr[:, :, None] * i_tr[:, None, :] / i_rr[:, None, None]
            log_rr += np.log(i_rr)
        total = info if total is None else total + info
    assert total is not None
    sign, logdet = np.linalg.slogdet(total)
    return np.where(sign > 0, 0.5 * (logdet + log_rr), -np.inf)


@dataclass(frozen=True)
class _Cells:
    logw: FloatArray  # (cells, T)
    a_bar: FloatArray  # (cells, T) the weighted mean of the seeds' a_u
    big_w: FloatArray  # (cells, T) its precision
    v: FloatArray  # (k, cells) Var(a_u_i)


def _weights(cells: list[_SeedCells], seeds: list[Seed], lo: float, hi: float) -> _Cells:
    t2 = ((T_GRID * value_span((lo, hi))) ** 2)[None, :]  # the spread in the metric's units
    g0 = cells[0].grid
    # Jeffreys' prior and the default soft ceiling on B (``b_prior.py``), as one run has.
    base = (log_jeffreys_pooled(g0.m, g0.b, [c.gain for c in cells], seeds)
            + log_b_density(g0.b, None))
    v = np.stack([c.v for c in cells])
    a_u = np.stack([c.a_u for c in cells])
    for c in cells:
        base = base + (c.log_z - c.log_z.max())
    w = 1.0 / (v[:, :, None] + t2[None, :, :])  # (k, cells, T)
    big_w = w.sum(axis=0)
    a_bar = (w * a_u[:, :, None]).sum(axis=0) / big_w
    q = (w * (a_u[:, :, None] - a_bar[None]) ** 2).sum(axis=0)
    logw = (base[:, None] + 0.5 * np.log(w).sum(axis=0) - 0.5 * q - 0.5 * np.log(big_w)
            + P.log_interval_mass(a_bar, 1.0 / np.sqrt(big_w), lo, hi)
            + _log_spread_prior()[None, :])
    return _Cells(logw, a_bar, big_w, v)


def sample_pooled(
    seeds: list[Seed],
    value_range: tuple[float, float],
    m_axis: FloatArray,
    b_axis: FloatArray,
    n: int = P.N_POSTERIOR,
    seed: int = 0,
) -> PooledDraws:
    """Draws from the pooled posterior (see the module docstring)."""
    lo, hi = value_range
    # The first pass only finds where the mass is: every other grid line is enough.
    cm_axis, cb_axis = m_axis[::2], b_axis[::2]

    def evaluate(fm: FloatArray, fb: FloatArray) -> tuple[tuple[list[_SeedCells], _Cells],
                                                          FloatArray, FloatArray, FloatArray]:
        per_seed = [_SeedCells(sd, value_range, fm, fb) for sd in seeds]
        cells = _weights(per_seed, seeds, lo, hi)
        g = per_seed[0].grid
        return (per_seed, cells), g.m, g.b, P.normalise(cells.logw).sum(axis=1)

    _, coarse_m, coarse_b, coarse_w = evaluate(cm_axis, cb_axis)
    (fine, cells), fm, fb = P.zoom_in(coarse_m, coarse_b, coarse_w, cm_axis, cb_axis, evaluate)
    w = P.normalise(cells.logw).ravel()
    rng = np.random.default_rng(seed)
    pick = rng.choice(w.size, size=n, p=w)
    cell, ti = np.divmod(pick, T_GRID.size)
    m, b = P.jitter_cells(fine[0].grid.m, fine[0].grid.b, fm, fb, cell, rng)
    a = P.truncated_normal(cells.a_bar[cell, ti], 1.0 / np.sqrt(cells.big_w[cell, ti]), lo, hi,
                           rng)
    # Spread t over its grid cell (t = 0 stays 0) so the spread's interval is not quantised.
    t_grid = T_GRID * value_span(value_range)  # the grid is set for [0, 1]
    edges = np.concatenate([[0.0], (t_grid[1:] + t_grid[:-1]) / 2, [t_grid[-1] * 1.2]])
    t = np.where(ti > 0, edges[ti] + rng.random(n) * (edges[ti + 1] - edges[ti]), 0.0)
    a_seeds = np.empty((n, len(seeds)))
    r0_seeds = np.empty((n, len(seeds)))
    for i, (sc, sd) in enumerate(zip(fine, seeds, strict=True)):
        # A_i given A: the seed's own estimate (variance v_i) and the recipe's N(A, t^2);
        # t = 0 (no spread) makes every A_i equal to A.
        v_i = sc.v[cell]
        t2 = np.maximum(t * t, 1e-300)
        prec = 1.0 / v_i + 1.0 / t2
        mean = (sc.a_u[cell] / v_i + a / t2) / prec
        a_i = np.clip(np.where(t > 0, mean + rng.standard_normal(n) / np.sqrt(prec), a), lo, hi)
        a_seeds[:, i] = a_i
        if sd.r0 is None:
            # The seed's rho given the cell, then R0 given A_i under it.
            cum = np.cumsum(sc.p_rho[:, cell], axis=0)
            ri = np.minimum((cum < rng.random(n) * cum[-1]).sum(axis=0), cum.shape[0] - 1)
            g = sc.grid
            s2 = g.ssr_u[ri, cell] / rng.chisquare(g.dof, n)
            r0_mu = g.r0_u[ri, cell] - g.r0_slope[ri, cell] * (a_i - g.a_u[ri, cell])
            r0_seeds[:, i] = np.clip(
                r0_mu + np.sqrt(s2 / g.guu[ri, cell]) * rng.standard_normal(n), lo, hi)
        else:
            r0_seeds[:, i] = sd.r0
    return PooledDraws(a, m, b, t, a_seeds, r0_seeds)
