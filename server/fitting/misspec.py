"""Is the run a sigmoid at all?  A check made before A is claimed.

The ScaleRL sigmoid is symmetric in log-compute: it rises like C^B and approaches A like
C^-B, with one exponent.  Processes that saturate otherwise do not: an error decaying as a
power law in compute (arXiv 2509.25300) rises like C^1 and approaches its limit like C^-alpha
with alpha < 1; an exponential saturation (arXiv 2507.18014) rises like C^1 and approaches
its limit faster than any power.  Fitted with one exponent, such a run's A lands where the
sigmoid's tail would flatten, not where the process does: ``bench/calibration_sampled.py``
had power-law runs claiming intervals 0.03-0.08 below their limit.

The check fits the generalised logistic (Richards) curve, the sigmoid's fraction of the gain
raised to a power nu, ``R0 + (A - R0) * expit(B (x - m))^nu``: nu = 1 is the sigmoid, and its
two ends have exponents nu B and B, so it follows the asymmetric shapes above.  When it fits
the window significantly better than the sigmoid (an F test on residuals whitened with the
noise's AR(1) coefficient: persistent evaluation noise is no evidence of a wrong shape) and
its ceiling lies outside A's interval, the two readings of the data disagree about the very
thing the claim is about, and A is withheld.  A shape difference that leaves A where the
sigmoid puts it (a prompt set's mixture of sigmoids, say) withholds nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from .intervals import lag1_rho
from .model import FloatArray, frac, value_span

P_VALUE = 0.01  # how surprising the sigmoid's excess misfit must be to count as evidence
MIN_POINTS = 12  # fewer points cannot tell one extra parameter from noise
NU_STARTS = (0.4, 2.5)  # besides the sigmoid itself: both asymmetries


def _richards(x: FloatArray, th: FloatArray, r0: float | None) -> FloatArray:
    a, m, b, log_nu = th[:4]
    base = th[4] if r0 is None else r0
    return base + (a - base) * frac(x, m, b) ** np.exp(log_nu)


def _whitened_ssr(e: FloatArray, rho: float) -> float:
    """SSR of residuals ``e`` after the Prais-Winsten transform of AR(1) noise ``rho``."""
    z = np.empty_like(e)
    z[0] = np.sqrt(1.0 - rho * rho) * e[0]
    z[1:] = e[1:] - rho * e[:-1]
    return float(z @ z)


def best_of_starts(residuals: Callable[[FloatArray], FloatArray], starts: list[FloatArray],
                   lower: list[float], upper: list[float], fallback: FloatArray,
                   value_range: tuple[float, float] = (0.0, 1.0), fit_r0: bool = False
                   ) -> tuple[FloatArray, float]:
    """The bounded least-squares fit of ``residuals`` with the smallest SSR over ``starts``
    (each nudged inside the bounds): an alternative curve's likelihood surface has more than
    one basin, so one start can stop in the wrong one.  (``fallback``, inf) when none runs.

    The parameters' first entry (the ceiling) and, with ``fit_r0``, the last (R0) are values:
    the optimiser works on them as shares of ``value_range`` (its tolerances and the bounds'
    nudge are absolute), so a metric on another scale converges as the same run in [0, 1]
    (on [0, 1] itself both transforms are exact identities)."""
    lo_v, unit = float(value_range[0]), value_span(value_range)
    values = [0] + ([len(lower) - 1] if fit_r0 else [])

    def to_unit(th: FloatArray) -> FloatArray:
        out = np.array(th, dtype=float)
        out[values] = (out[values] - lo_v) / unit
        return out

    def from_unit(th: FloatArray) -> FloatArray:
        out = np.array(th, dtype=float)
        out[values] = lo_v + unit * out[values]
        return out

    best, best_ssr = fallback, np.inf
    low_u, high_u = to_unit(np.array(lower, dtype=float)), to_unit(np.array(upper, dtype=float))
    lo, hi = low_u + 1e-9, high_u - 1e-9
    for start in starts:
        try:
            sol = optimize.least_squares(lambda th: residuals(from_unit(th)) / unit,
                                         np.clip(to_unit(start), lo, hi),
                                         bounds=(low_u, high_u), method="trf", x_scale="jac",
                                         max_nfev=200)
        except (ValueError, FloatingPointError):
            continue
        ssr = float(sol.fun @ sol.fun) * unit * unit
        if np.isfinite(ssr) and ssr < best_ssr:
            best, best_ssr = from_unit(sol.x), ssr
    return best, best_ssr


def richards_fit(x: FloatArray, y: FloatArray, theta: tuple[float, float, float, float],
                 fit_r0: bool, value_range: tuple[float, float]) -> tuple[FloatArray, float]:
    """Least-squares Richards curve started from the sigmoid ``theta = (A, m, B, R0)``
    and from both asymmetries; (parameters (A, m, B, ln nu[, R0]), SSR)."""
    a, m, b, r0 = theta
    lo, hi = value_range
    r0_fixed = None if fit_r0 else r0
    lower = [lo, m - 10.0, 0.05, np.log(0.05)] + ([lo] if fit_r0 else [])
    upper = [hi, m + 10.0, 30.0, np.log(20.0)] + ([hi] if fit_r0 else [])
    starts = []
    for nu in (1.0, *NU_STARTS):
        # Keep the half-gain point where the sigmoid put it: frac(m')^nu = 1/2 there.
        m_start = m - float(special.logit(2.0 ** (-1.0 / nu))) / max(b, 1e-3)
        starts.append(np.array([a, m_start, b, np.log(nu)] + ([r0] if fit_r0 else [])))
    return best_of_starts(lambda th: _richards(x, th, r0_fixed) - y, starts, lower, upper,
                          np.array([a, m, b, 0.0] + ([r0] if fit_r0 else [])), value_range,
                          fit_r0)


def disagrees(x: FloatArray, y: FloatArray, theta: tuple[float, float, float, float],
              fit_r0: bool, value_range: tuple[float, float], ci_a: tuple[float, float],
              richards: FloatArray | None = None) -> str | None:
    """Why the sigmoid's A must not be claimed because the data follow another shape with
    another ceiling, or None (module docstring).  ``richards``: the Richards fit's parameters
    when the caller has them already (``structural.weigh`` fits it too)."""
    n = int(y.size)
    p = 5 if fit_r0 else 4  # the Richards curve's free parameters
    if n < max(MIN_POINTS, p + 4):
        return None
    a, m, b, r0 = theta
    e_sig = y - (r0 + (a - r0) * frac(x, m, b))
    rho, _ = lag1_rho(e_sig)
    th = richards_fit(x, y, theta, fit_r0, value_range)[0] if richards is None else richards
    e_rich = y - _richards(x, th, None if fit_r0 else r0)
    ssr_sig, ssr_rich = _whitened_ssr(e_sig, rho), _whitened_ssr(e_rich, rho)
    if not ssr_rich > 0 or ssr_sig <= ssr_rich:
        return None
    dof = n - p
    f_stat = (ssr_sig - ssr_rich) / (ssr_rich / dof)
    p_value = float(special.fdtrc(1, dof, f_stat))
    a_other = float(th[0])
    if p_value >= P_VALUE or ci_a[0] <= a_other <= ci_a[1]:
        return None
    return (f"is narrow, but the data disagree with every sigmoid: a curve with an asymmetric "
            f"knee fits them better (p = {p_value:.1g}) and levels off at {a_other:.3f}, "
            "outside A's interval")
