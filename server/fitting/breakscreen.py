"""A fast first pass of the break test: every candidate at once, linearised.

The exact test (``breaks.py``) refits the curve to the points before each candidate break
and weighs the newest segment's departure from it.  Refitting up to 17 prefixes costs tens
of milliseconds on every refit of every run, although on a stable run no candidate comes
near the threshold.  Here each prefix fit is approximated by one Gauss-Newton step from the
full fit (its normal equations are prefix sums of the full fit's Jacobian products, so all
candidates cost one pass over the points), and the departure's z is computed with the same
noise model as the exact test: the linearised prefix residuals' sd and (cautious) AR(1)
coefficient, the prefix fit's extrapolation uncertainty.  Only candidates whose linearised z
comes within ``MARGIN`` of the threshold go on to the exact test.

One step from the full fit is close to the prefix fit because the full fit only bends
part of the way towards a fall; a full fit that does not rise at all (a collapse of 0.4 can
bend it into a falling step) is no point to linearise around, and ``breaks.detect_break``
then refits every candidate.  On long, deep falls one step undershoots (the screen's z of
a segment the exact test puts at -4.4 was seen at -1.6), so the margin is wide; what must
hold, and ``tests/fitting/test_breaks.py`` checks, is that the candidates kept give the
exact test's verdict over all candidates.  On the alert bench's runs (2,600 refit windows)
they did every time, with the strongest candidate always kept, while 6% of a stable run's
candidates (24% of its refits) went on to the exact test.
"""

from __future__ import annotations

import numpy as np

from .intervals import RHO_MAX
from .model import FloatArray, frac, jacobian_x

MARGIN = 2.0  # z units between the screen and the exact threshold (linearisation error)


def _ar1_weight_sums(m: FloatArray, rho: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``w @ R @ w`` for R_ij = rho^|i-j| and the step (uniform) and ramp weights of length m.

    Closed forms per lag L: the step's sum_i w_i w_(i+L) = (m - L) / m^2; the ramp's
    (w_j = j / S, S = m (m + 1) / 2) is [N(N+1)(2N+1)/6 + L N(N+1)/2] / S^2 with N = m - L."""
    mx = int(m.max())
    lag = np.arange(mx)[None, :].astype(float)
    mm = m[:, None]
    valid = lag < mm
    pw = np.where(valid, rho[:, None] ** lag, 0.0)
    mult = np.where(lag > 0, 2.0, 1.0)
    n = np.maximum(mm - lag, 0.0)
    step = (n / mm**2) * mult
    s = mm * (mm + 1.0) / 2.0
    ramp = (n * (n + 1.0) * (2.0 * n + 1.0) / 6.0 + lag * n * (n + 1.0) / 2.0) / s**2 * mult
    return (step * pw).sum(1), (ramp * pw).sum(1)


def linear_z(
    x: FloatArray,
    y: FloatArray,
    theta: tuple[float, float, float, float],
    fit_r0: bool,
    lengths: list[int],
) -> FloatArray:
    """The most negative (step or ramp) departure z of each newest segment of ``lengths``."""
    n = x.size
    a, mm, b, r0 = theta
    jac = jacobian_x(x, a, mm, b, r0, fit_r0)  # (n, p)
    p = jac.shape[1]
    r = y - (r0 + (a - r0) * frac(x, mm, b))
    m = np.asarray(lengths, dtype=float)
    ks = n - np.asarray(lengths)
    # Normal equations of every prefix: prefix sums of J^T J and J^T r.  (More Gauss-Newton
    # steps, each at its own prefix's parameters, were tried: undamped, they overshoot on
    # long broken segments and the screen then lost breaks the exact test flags.)
    h = np.cumsum(jac[:, :, None] * jac[:, None, :], axis=0)[ks - 1]  # (c, p, p)
    g = np.cumsum(jac * r[:, None], axis=0)[ks - 1]  # (c, p)
    ridge = 1e-12 * np.trace(h, axis1=1, axis2=2)[:, None, None] * np.eye(p)
    h_inv = np.linalg.inv(h + ridge)
    delta = np.einsum("cij,cj->ci", h_inv, g)
    e = r[:, None] - jac @ delta.T  # (n, c): residuals under each linearised prefix fit
    idx = np.arange(n)[:, None]
    pre = idx < ks[None, :]
    k = ks.astype(float)
    # Noise of each prefix: sd, and the AR(1) coefficient one standard error above its
    # bias-corrected estimate (as ``breaks._cautious_tau`` and ``intervals.lag1_rho``).
    ep = np.where(pre, e, 0.0)
    sigma2 = (ep * ep).sum(0) / np.maximum(k - p, 1.0)
    ec = np.where(pre, e - ep.sum(0) / k, 0.0)
    r1 = (ec[1:] * ec[:-1]).sum(0) / np.maximum((ec * ec).sum(0), 1e-300)
    rho = np.clip((r1 + 2.5 / k) / np.maximum(1.0 - 8.5 / k, 0.5), 0.0, RHO_MAX)
    se = np.sqrt(np.maximum(1.0 - rho * rho, 0.0) / k)
    # tau at the estimate (the exact test averages it over rho's uncertainty, which only
    # widens: the screen errs towards passing candidates on).
    tau = (1.0 + rho) / (1.0 - rho)
    rho_c = np.minimum(rho + se, RHO_MAX)
    sd2 = sigma2 * np.maximum(k - p, 1.0) / np.maximum(np.maximum(k - p * tau, k / 2.0), 1.0)
    cov = (sigma2 * tau)[:, None, None] * h_inv
    v_step, v_ramp = _ar1_weight_sums(m, rho_c)
    # The departure and the prefix curve's uncertainty at the segment, for each shape.
    post = ~pre
    pos = np.where(post, idx - ks[None, :] + 1.0, 0.0)
    zs = []
    for weights, v_noise in ((post / m, v_step), (pos / (m * (m + 1.0) / 2.0), v_ramp)):
        dep = (weights * e).sum(0)
        gw = weights.T @ jac  # (c, p)
        v_curve = np.einsum("ci,cij,cj->c", gw, cov, gw)
        zs.append(dep / np.sqrt(np.maximum(sd2 * v_noise + v_curve, 1e-18)))
    return np.minimum(zs[0], zs[1])
