"""Why a fit withholds A, and roughly how much more compute would identify it.

``fit.py`` decides the status; this module says *why* in a form a program and a person can
read, the ``withheld`` object of the result (README "A fit result"):

    {"reasons": [{"code": "interval_too_wide", "detail": "A's 95% interval ..."}, ...],
     "compute_to_identify": 2.3e4, "compute_to_identify_factor": 1.8, "max_factor": 8.0}

Reason codes (``REASON_CODES``), in the order they are listed:

* ``recent_break``: the run fell off its curve (``breaks.py``) and the regime since then is not
  (yet) fitted;
* ``misspecified``: the data disagree with every sigmoid (``misfit`` below), so no A is claimed;
* ``interval_at_bound``: A's 95% interval reaches an end of the value range;
* ``interval_too_wide``: A's 95% interval is wider than a claim allows, or would be with the
  model form's uncertainty (other saturating curves fit the window as well: ``structural.py``);
* ``noise_persistent``: beside a wide interval, the evaluation noise is strongly autocorrelated
  (the AR(1) posterior's rho), so the evaluations carry far less information than their count;
* ``short_of_knee``: the window may still be short of C_mid or not far enough past it;
* ``insufficient_data``: too few points, no signal or a collapse (the message says which);
  among them a window of fewer evaluations than a claim needs (``structural.MIN_POINTS``):
  too few to tell the sigmoid from other saturating curves that level off elsewhere;
* ``not_identified``: none of the above matched the rule that withheld A (the message says why;
  kept so that a change of the rule in ``fit.py`` never leaves the list empty).

"How much more compute" (``compute_to_identify``): the run is continued in imagination along
each of a sample of its posterior draws, at its own pace of evaluations, and A's interval is
scaled by how much the continued evaluations shrink each draw's linearised variance of A (and
of ln C_mid, for the knee conditions).  The answer is the smallest multiple of the window's
compute, up to ``MAX_FACTOR``, at which more than ``IDENTIFY_SHARE`` of the draws would pass
every condition ``fit.py`` applies.  It is a rough estimate (linearised, the noise model held
fixed), costs about a millisecond, and is null where it cannot apply: a break, a misspecified
run, or not within ``MAX_FACTOR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from .ar1 import RHO_GRID, blocks
from .intervals import A_MODEL_SD
from .model import FloatArray, frac, jacobian_x, value_span

REASON_CODES = ("recent_break", "misspecified", "interval_at_bound", "interval_too_wide",
                "noise_persistent", "short_of_knee", "insufficient_data", "not_identified")
PERSISTENT_RHO = 0.8  # posterior mean rho from which the noise is named as a cause
# The multiples of the window's end compute_to_identify tries (about 10% apart: "roughly"),
# and no further than the last.
FACTORS = np.array([1.1, 1.2, 1.3, 1.4, 1.5, 1.65, 1.8, 2.0, 2.2, 2.4, 2.7, 3.0, 3.3, 3.6, 4.0,
                    4.4, 4.8, 5.3, 5.8, 6.4, 7.0, 7.5, 8.0])
MAX_FACTOR = float(FACTORS[-1])
N_SIM_DRAWS = 32  # posterior draws the continuation is simulated along
WINDOW_EVALS = 48  # a longer window is thinned to about this many evaluations
MAX_CONTINUATION = 240  # the continuation to MAX_FACTOR has at most this many evaluations
# "Most draws": the share that must pass for a multiple to count.  bench/withheld.py, sampled
# sigmoid runs withheld at 1-3 x C_mid, each continued with its own noise: the median of
# predicted over actual compute is 1.00 at 0.7 (0.92 at 0.6) on 135 runs; at 0.7 on 213 others
# 0.83-1.00 by window, 44% identified by the predicted compute, 67% by 1.5 x it, <= 2% before
# it / 1.5.  Since A's claim carries the model form's uncertainty (structural.py, which this
# simulation does not foresee), at 0.7 on 219 runs: 0.56-0.83, 17-28% by it, none before it
# / 1.5; so 0.9 (seeds 7 and 11 of bench/withheld.py: 0.60-0.96 and 0.69-1.00 by window,
# 22-34% and 10-42% by it, at most 4% before it / 1.5; 0.95 promised too late more often).
IDENTIFY_SHARE = 0.9


@dataclass(frozen=True)
class Rules:
    """The identification rule's thresholds, as ``fit.py`` sets them (passed in, not imported,
    so the rule stays defined in one place)."""

    max_width: float  # ID_MAX_WIDTH
    edge_eps: float  # EDGE_EPS
    knee_factor: float  # KNEE_FACTOR: window end >= this x C_mid's upper bound
    past_knee: float  # PAST_KNEE: window end >= this x the fitted C_mid
    min_regime: int  # MIN_REGIME: evaluations since a break to fit the new regime
    min_points: int  # structural.MIN_POINTS: evaluations a window needs to claim A


# ---- misspecification -------------------------------------------------------------------------

MISFIT_MIN_POINTS = 24  # fewer (blocked) evaluations: no test
MISFIT_P = 1e-4  # false-alarm rate of the likelihood-ratio test on a sigmoid with AR(1) noise
# Departures smaller than this (half the paper's 0.02 margin) are no reason to withhold A.
MISFIT_MIN_SIZE = 0.01
MISFIT_DEGREE = 4  # Legendre polynomials 1..this in log-compute: the smooth departures tested


@dataclass(frozen=True)
class Misfit:
    """A systematic departure from the best sigmoid, beyond what AR(1) noise explains."""

    lr: float  # likelihood-ratio statistic (rho profiled in both models, small-sample corrected)
    df: int
    size: float  # largest fitted departure over the window
    at: float  # ln(C / window end) where it is largest (<= 0)


def _basis(cols: FloatArray) -> FloatArray:
    """An orthonormal basis of the span of ``cols`` (collinear columns dropped)."""
    u, sv, _ = np.linalg.svd(cols, full_matrices=False)
    return u[:, sv > sv[0] * 1e-9]


def _profile_loglik(z: FloatArray, basis: FloatArray) -> FloatArray:
    """Profiled log-likelihood (up to a constant) of ``z`` regressed on ``basis`` with AR(1)
    noise, at each rho of ``RHO_GRID`` at once (Prais-Winsten transform, sigma profiled out)."""
    n = z.size
    rho = RHO_GRID
    w = np.sqrt(1.0 - rho * rho)
    zt = np.concatenate([(w * z[0])[:, None], z[None, 1:] - rho[:, None] * z[None, :-1]],
                        axis=1)
    bt = np.concatenate([w[:, None, None] * basis[None, :1, :],
                         basis[None, 1:, :] - rho[:, None, None] * basis[None, :-1, :]], axis=1)
    q, _ = np.linalg.qr(bt)
    proj = np.einsum("rnk,rn->rk", q, zt)
    ssr = np.maximum(np.einsum("rn,rn->r", zt, zt) - np.einsum("rk,rk->r", proj, proj), 1e-300)
    return -0.5 * n * np.log(ssr) + np.log(w)


def misfit(x: FloatArray, y: FloatArray, theta: tuple[float, float, float, float],
           fit_r0: bool, unit: float = 1.0) -> Misfit | None:
    """Whether the window's data depart from the fitted sigmoid ``theta = (A, m, B, R0)`` in
    a smooth, systematic way no sigmoid and no AR(1) noise explain, or None.

    Test: the residuals are regressed, with AR(1) noise (rho profiled over the posterior's
    grid), on the sigmoid's own tangent directions (the null: a slightly different sigmoid)
    and on those plus Legendre polynomials in log-compute (the alternative: a smooth departure,
    e.g. a late linear drift, a saturation sharper than any sigmoid's, a plateau before the
    rise).  A departure is reported when the likelihood ratio exceeds the chi-square quantile
    of ``MISFIT_P`` and the fitted departure reaches ``MISFIT_MIN_SIZE`` somewhere in the
    window: persistent noise alone rarely passes the first, a harmless wiggle never the second.
    """
    xb, yb = blocks(x, y)
    if xb.size < MISFIT_MIN_POINTS:
        return None
    a, m, b, r0 = theta
    e = yb - (r0 + (a - r0) * frac(xb, m, b))
    jac = jacobian_x(xb, a, m, b, r0, fit_r0)
    span = float(xb[-1] - xb[0])
    if span <= 0:
        return None
    u = 2.0 * (xb - xb[0]) / span - 1.0
    poly = np.polynomial.legendre.legvander(u, MISFIT_DEGREE)[:, 1:]
    null = np.column_stack([jac, np.ones_like(xb)])
    alt = np.column_stack([null, poly])
    b_null, b_alt = _basis(null), _basis(alt)
    df = b_alt.shape[1] - b_null.shape[1]
    if df <= 0:
        return None
    # The (n - k) / n factor is the small-sample correction that makes the statistic an F
    # test's at rho = 0: without it short windows (40 evaluations) raised false alarms.
    lr = 2.0 * float(_profile_loglik(e, b_alt).max() - _profile_loglik(e, b_null).max()) \
        * (xb.size - b_alt.shape[1]) / xb.size
    if lr < float(stats.chi2.isf(MISFIT_P, df)):
        return None
    # The departure itself: the polynomial part of the alternative's fit (at rho = 0, so it
    # is the shape seen in the residuals), net of what the sigmoid's directions absorb.
    beta, *_ = np.linalg.lstsq(alt, e, rcond=None)
    departure = poly @ beta[null.shape[1]:]
    departure = departure - null @ np.linalg.lstsq(null, departure, rcond=None)[0]
    i = int(np.argmax(np.abs(departure)))
    size = float(abs(departure[i]))
    if size < MISFIT_MIN_SIZE * unit:  # set for [0, 1]; ``unit``: the value range's width
        return None
    return Misfit(lr=lr, df=df, size=size, at=float(xb[i] - xb[-1]))


# ---- compute to identify ----------------------------------------------------------------------


def _pace(x: FloatArray) -> float:
    """The window's mean compute between evaluations, in units of its end (``x``: ln C /
    C_end of each evaluation)."""
    return max((1.0 - float(np.exp(x[0]))) / max(x.size - 1, 1), 1e-12)


def _design(x: FloatArray, rho: float) -> tuple[FloatArray, FloatArray, NDArray[np.intp]]:
    """The evaluations of the window and of its continuation to ``MAX_FACTOR`` x its end, at
    the window's pace (its mean compute between evaluations): (ln C / C_end of each, the AR(1)
    coefficient linking each to the one before, the index of the last evaluation up to each
    of ``FACTORS``).  Long windows are thinned to every k-th evaluation (rho becomes rho^k);
    the window and the continuation alike, so the variance ratios stay about the same."""
    n = x.size
    k = -(-n // WINDOW_EVALS)
    xw = x[::-1][::k][::-1]  # every k-th evaluation, the window's last among them
    pace = k * _pace(x)
    step = max(pace, (MAX_FACTOR - 1.0) / MAX_CONTINUATION)  # a coarser continuation: fewer
    ext = np.arange(1.0 + step, MAX_FACTOR + 1e-9, step)  # evaluations, each as informative
    r = min(max(rho, 0.0), 0.98) ** k  # between two kept evaluations
    links = np.concatenate([np.full(xw.size, r), np.full(ext.size, r ** (step / pace))])
    at = xw.size - 1 + np.searchsorted(ext, np.concatenate([[1.0], FACTORS]) * (1 + 1e-9),
                                       side="right")
    return np.concatenate([xw, np.log(ext)]), links, at


def _info_ratios(x: FloatArray, params: FloatArray, fit_r0: bool, rho: float
                 ) -> tuple[FloatArray, FloatArray]:
    """For each draw (rows A, B, C_mid, R0 in units where the window ends at compute 1) and
    each of ``FACTORS``: var(A) and var(ln C_mid) with the window continued to that factor,
    over their values on the window alone (linearised, with the AR(1) noise's information:
    persistent noise makes the continuation's evaluations worth little, as it made the
    window's; shape (draws, factors))."""
    xs, links, at = _design(x, rho)
    # The curve's Jacobian in (A, m, B[, R0]) for every draw at once (``model.jacobian_x``).
    a, b, m, r0 = (params[:, i:i + 1] for i in range(4))
    m = np.log(m)
    sv = frac(xs[None, :], m, b)
    ds = sv * (1.0 - sv)
    cols = [sv, -(a - r0) * b * ds, (a - r0) * (xs[None, :] - m) * ds]
    if fit_r0:
        cols.append(1.0 - sv)
    jac = np.stack(cols, axis=-1)
    p = jac.shape[-1]
    # Prais-Winsten: each evaluation's innovation, in units of the noise's marginal sd.
    white = jac.copy()
    white[:, 1:] = (jac[:, 1:] - links[1:, None] * jac[:, :-1]) \
        / np.sqrt(1.0 - links[1:, None] ** 2)
    cum = np.cumsum(white[:, :, :, None] * white[:, :, None, :], axis=1)
    cum = cum[:, at]  # the window, then each factor
    ridge = 1e-10 * np.trace(cum, axis1=2, axis2=3)[..., None, None] * np.eye(p)
    unit = np.zeros((p, 2))
    unit[0, 0] = unit[1, 1] = 1.0
    sol = np.linalg.solve(cum + ridge, np.broadcast_to(unit, (*cum.shape[:2], p, 2)))
    var_a, var_m = sol[..., 0, 0], sol[..., 1, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ra = np.where(var_a[:, :1] > 0, var_a[:, 1:] / var_a[:, :1], 1.0)
        rm = np.where(var_m[:, :1] > 0, var_m[:, 1:] / var_m[:, :1], 1.0)
    return np.clip(ra, 0.0, 1.0), np.clip(rm, 0.0, 1.0)


def _evals_by(x: FloatArray, factors: FloatArray) -> FloatArray:
    """How many evaluations the window ``x`` (ln C / C_end) holds once continued at its own
    pace to each of ``factors`` x its end."""
    return x.size + np.floor((factors - 1.0) / _pace(x) + 1e-9)


def compute_to_identify(
    x: FloatArray, draws: FloatArray, fit_r0: bool, ci_a: tuple[float, float],
    ci_cmid: tuple[float, float] | None, c_end: float, value_range: tuple[float, float],
    rules: Rules, rho: float = 0.0, seed: int = 0,
) -> float | None:
    """The smallest multiple of the window's end ``c_end`` (1 < f <= ``MAX_FACTOR``) at which
    more than ``IDENTIFY_SHARE`` of the continued draws would identify A, or None.

    ``x``: the window's ln(C / c_end), ``draws``: posterior rows (A, B, C_mid, R0) in compute
    units, ``ci_a`` / ``ci_cmid``: the current 95% intervals (their widths are what gets
    scaled: the posterior's own width, not a linearised one, is the starting point); ``rho``:
    the noise's AR(1) coefficient (the posterior's mean)."""
    if len(draws) == 0 or x.size < 3 or c_end <= 0:
        return None
    rng = np.random.default_rng(seed)
    rows = np.asarray(draws, dtype=float).reshape(-1, 4)
    rows = rows[rng.choice(rows.shape[0], size=min(N_SIM_DRAWS, rows.shape[0]), replace=False)]
    rows = rows[np.isfinite(rows).all(axis=1) & (rows[:, 2] > 0)]
    if rows.shape[0] == 0:
        return None
    factors = FACTORS
    scaled = rows.copy()
    scaled[:, 2] /= c_end
    x_end = x - float(x[-1])  # ln C / C_end
    ra, rm = _info_ratios(x_end, scaled, fit_r0, rho)
    lo, hi = value_range
    # A's interval: its statistical part shrinks, the ceiling's model error (A_MODEL_SD) not.
    floor = 1.96 * A_MODEL_SD * value_span(value_range)
    a_med = float(np.median(rows[:, 0]))
    half_lo = np.sqrt(max((a_med - ci_a[0]) ** 2 - floor**2, 0.0) * ra + floor**2)
    half_hi = np.sqrt(max((ci_a[1] - a_med) ** 2 - floor**2, 0.0) * ra + floor**2)
    a_d = rows[:, :1]
    ok = (half_lo + half_hi <= rules.max_width) \
        & (a_d - half_lo > lo + rules.edge_eps) & (a_d + half_hi < hi - rules.edge_eps)
    ends = factors[None, :] * c_end
    cm = rows[:, 2:3]
    ok &= rules.past_knee * cm <= ends
    ok &= (_evals_by(x_end, factors) >= rules.min_points)[None, :]
    if ci_cmid is not None and ci_cmid[1] > 0:
        cm_med = float(np.median(rows[:, 2]))
        log_up = max(float(np.log(ci_cmid[1] / cm_med)), 0.0)
        ok &= rules.knee_factor * cm * np.exp(log_up * np.sqrt(rm)) <= ends
    share = ok.mean(axis=0)
    hit = np.flatnonzero(share > IDENTIFY_SHARE)
    return None if hit.size == 0 else float(factors[hit[0]])


# ---- the reasons ------------------------------------------------------------------------------


def reason(code: str, detail: str) -> dict[str, str]:
    return {"code": code, "detail": detail}


def break_reasons(info: dict[str, Any], rules: Rules) -> list[dict[str, str]]:
    """The reason of a broken run's result (``fit.broken``)."""
    n_after = int(info.get("n_after") or 0)
    drop = float(info.get("drop") or 0.0)
    where = (f"step {info['step']}" if info.get("step") is not None
             else f"compute {float(info['compute']):,.4g}")
    if info.get("regime") == "too_few_points":
        more = rules.min_regime - n_after
        tail = (f"{more} more evaluation{'s' * (more != 1)} are needed before the new regime "
                "can be fitted")
    else:
        tail = f"the {n_after} evaluations since then do not pin down a new curve yet"
    return [reason("recent_break", f"the run broke at {where}: its newest {n_after} "
                   f"evaluations lie {drop:.3f} below the curve it was on; {tail}")]


def interval_reasons(
    ci_a: tuple[float, float], ci_cmid: tuple[float, float] | None, c_mid: float | None,
    fit_end: float | None, value_range: tuple[float, float], rho: tuple[float, float] | None,
    n: int, rules: Rules,
) -> list[dict[str, str]]:
    """Every identification condition the fit fails, as reasons (empty: A can be claimed)."""
    out = []
    lo, hi = value_range
    a_lo, a_hi = ci_a
    width = a_hi - a_lo
    if a_lo <= lo + rules.edge_eps or a_hi >= hi - rules.edge_eps:
        end = f"upper end {hi:g}" if a_hi >= hi - rules.edge_eps else f"lower end {lo:g}"
        out.append(reason("interval_at_bound", f"A's 95% interval [{a_lo:.3f}, {a_hi:.3f}] "
                          f"reaches the value range's {end}: the data do not bound A there"))
    if width > rules.max_width:
        out.append(reason("interval_too_wide", f"A's 95% interval [{a_lo:.3f}, {a_hi:.3f}] is "
                          f"{width:.3f} wide; a claim needs at most {rules.max_width:g}"))
    if out and rho is not None and rho[0] >= PERSISTENT_RHO:
        r = rho[0]
        n_eff = n * (1.0 - r) / (1.0 + r)
        out.append(reason("noise_persistent", f"the evaluation noise persists from one "
                          f"evaluation to the next (AR(1) rho about {r:.2f}): the {n} "
                          f"evaluations carry about as much information as {n_eff:.0f} "
                          "independent ones"))
    if fit_end is not None:
        if ci_cmid is not None and rules.knee_factor * ci_cmid[1] > fit_end:
            out.append(reason("short_of_knee", f"C_mid (the knee) may still lie beyond the "
                              f"data: its 95% interval reaches {ci_cmid[1]:,.4g}, and A is "
                              f"claimed once the run reaches {rules.knee_factor:g} x that"))
        elif c_mid is not None and rules.past_knee * c_mid > fit_end:
            out.append(reason("short_of_knee", f"the run is only {fit_end / c_mid:.1f} x past "
                              f"its fitted C_mid ({c_mid:,.4g}); A is claimed from "
                              f"{rules.past_knee:g} x, at compute {rules.past_knee * c_mid:,.4g}"))
    if n < rules.min_points:
        out.append(reason("insufficient_data", few_points_detail(n, rules.min_points)))
    return out


def few_points_detail(n: int, min_points: int) -> str:
    """Why a window of ``n`` evaluations cannot claim A, however narrow its interval."""
    return (f"the window holds {n} evaluation{'s' * (n != 1)}: too few to tell the sigmoid "
            "from other saturating curves that level off elsewhere (a power law, an "
            f"asymmetric knee); A is claimed from {min_points}")


def misfit_reason(mf: Misfit) -> dict[str, str]:
    where = f"{np.exp(mf.at):.2g} x" if mf.at < -0.01 else "the end of"
    return reason("misspecified", f"the data disagree with every sigmoid: the residuals "
                  f"bend away from the best one by up to {mf.size:.3f} (largest at {where} the "
                  f"window), more than autocorrelated noise explains (likelihood ratio "
                  f"{mf.lr:.0f} on {mf.df} degrees of freedom); no A is claimed")


def withheld_record(reasons: list[dict[str, str]], factor: float | None,
                    c_end: float | None, searched: bool = False) -> dict[str, Any]:
    """The result's ``withheld`` object; ``searched``: whether the compute that would identify
    A was looked for (``max_factor`` is then how far; null when it was not: a break, a
    misspecified run, no posterior draws, too little data)."""
    return {
        "reasons": reasons,
        "compute_to_identify": (None if factor is None or c_end is None
                                else float(f"{factor * c_end:.4g}")),  # "roughly": 4 digits
        "compute_to_identify_factor": factor,
        "max_factor": MAX_FACTOR if searched else None,
    }


def explain(
    x: FloatArray, draws: Any, fit_r0: bool, ci_a: tuple[float, float],
    ci_cmid: tuple[float, float] | None, c_mid: float | None, fit_end: float | None,
    value_range: tuple[float, float], rho: tuple[float, float] | None, rules: Rules,
    mis: Misfit | None, message: str, other_shape: str | None = None,
    model_form: str | None = None,
) -> dict[str, Any]:
    """The ``withheld`` object of a fit ``fit.finish`` withholds A from: the reasons, and (unless
    the run is misspecified, where more of the same data would not help) the compute that
    would identify it.  ``x``: the window's ln(C / c0); ``message``: the fit's own, for the
    fallback reason; ``other_shape``: why ``misspec.disagrees`` found another curve with another
    ceiling (the interval itself is narrow then); ``model_form``: why A's interval widened to
    the other saturating curves that fit the window as well (``structural.py``) is too wide."""
    reasons = [misfit_reason(mf) for mf in (mis,) if mf is not None]
    if other_shape is not None:
        reasons.append(reason("misspecified", f"A's 95% interval {other_shape}; no A is claimed"))
    elif model_form is not None:
        reasons.append(reason("interval_too_wide", f"A's 95% interval {model_form}"))
    else:
        reasons += interval_reasons(ci_a, ci_cmid, c_mid, fit_end, value_range, rho,
                                    int(x.size), rules)
    if not reasons:
        reasons.append(reason("not_identified", message))
    factor = None
    # Not where the shape is in question: the continuation is simulated along sigmoids.
    searched = (mis is None and other_shape is None and model_form is None
                and fit_end is not None and len(draws) > 0)
    if searched:
        factor = compute_to_identify(x, np.asarray(draws, dtype=float), fit_r0, ci_a, ci_cmid,
                                     fit_end or 0.0, value_range, rules,
                                     0.0 if rho is None else float(rho[0]))
    return withheld_record(reasons, factor, fit_end, searched)
