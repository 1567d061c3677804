"""``fit_curve``: data preparation, robust global point fit, status and intervals."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import grid as G
from . import lm
from .breaks import Break, detect_break
from .collapse import detect_collapse
from .intervals import (
    a_with_drift,
    allowance_at_reach,
    analyse,
    band,
    drift_rate_at,
    extra_half_width,
    posterior_summary,
)
from .misspec import disagrees
from .model import FloatArray, diff_noise_sd, frac, value_range_problem, value_span
from .noise_prior import prior_record
from .posterior import posterior_axes
from .result import FitOptions, FitResult
from .structural import MIN_POINTS as FORM_MIN_POINTS
from .structural import ModelForm, weigh
from .withheld import (
    Rules,
    break_reasons,
    explain,
    few_points_detail,
    misfit,
    reason,
    withheld_record,
)

MIN_POINTS = 5
MIN_DISTINCT = 4
COARSE = (12, 8)  # coarse (m, B) check grid used to validate warm starts
ID_MAX_WIDTH = 0.1  # A interval wider than this -> unidentified
EDGE_EPS = 1e-3
OUTSIDE_SHARE = 0.05  # more of the window outside the value range: the range is wrong
FLAT_GAIN = 0.005  # a fitted gain A - R0 below this is no signal, however quiet the noise
KNEE_FACTOR = 1.5  # the window must reach KNEE_FACTOR x the upper bound of C_mid to claim A
PAST_KNEE = 2.0  # ... and PAST_KNEE x the fitted C_mid (see ``too_early``)
MIN_REGIME = 12  # evaluations since a break needed to fit the new regime
BREAK_BINS = 96  # log-compute bins of the break test's prefix refits
# The rule above, for ``withheld.py`` to say which part of it held A back.
RULES = Rules(ID_MAX_WIDTH, EDGE_EPS, KNEE_FACTOR, PAST_KNEE, MIN_REGIME, FORM_MIN_POINTS)


def rules_for(value_range: tuple[float, float]) -> Rules:
    """``RULES`` in the units of a metric whose values live in ``value_range`` (its widths
    are set for [0, 1])."""
    unit = value_span(value_range)
    return replace(RULES, max_width=ID_MAX_WIDTH * unit, edge_eps=EDGE_EPS * unit)


@dataclass(frozen=True)
class Prepared:
    """Cleaned data: all finite points (sorted) and the fit window in internal coordinates."""

    c_all: FloatArray
    y_all: FloatArray
    x: FloatArray  # ln(c / c0) of the window
    y: FloatArray
    c0: float
    r0: float | None  # None -> fitted
    r0_source: str
    target: float | None
    fit_range: tuple[float, float] | None
    steps: FloatArray | None = None  # the window's steps, when the caller passed them


def prepare(
    compute: ArrayLike, values: ArrayLike, options: FitOptions, steps: ArrayLike | None = None
) -> Prepared:
    c = np.asarray(compute, dtype=float).ravel()
    y = np.asarray(values, dtype=float).ravel()
    if c.size != y.size:
        raise ValueError(f"compute has {c.size} entries but values has {y.size}")
    st = None if steps is None else np.asarray(steps, dtype=float).ravel()
    if st is not None and st.size != c.size:
        raise ValueError(f"steps has {st.size} entries but compute has {c.size}")
    keep = np.isfinite(c) & np.isfinite(y) & (c >= 0)
    c, y = c[keep], y[keep]
    order = np.argsort(c, kind="stable")
    c, y = c[order], y[order]
    if st is not None:
        st = st[keep][order]
    if options.r0 is not None:
        r0, src = float(options.r0), "given"
    elif np.any(c == 0):
        r0, src = float(y[c == 0].mean()), "first_point"
    else:
        r0, src = None, "fitted"
    win = (c > 0) & (c >= options.warmup)
    if options.fit_until is not None:
        win &= c <= options.fit_until
    cw, yw = c[win], y[win]
    c0 = float(cw[-1]) if cw.size else 1.0
    target = options.target_compute
    if target is None and c.size:
        target = float(c[-1])
    fit_range = (float(cw[0]), float(cw[-1])) if cw.size else None
    return Prepared(c, y, np.log(cw / c0), yw, c0, r0, src, target, fit_range,
                    None if st is None else st[win])


@dataclass(frozen=True)
class PointFit:
    theta: tuple[float, float, float, float]  # (A, m, B, R0), m = ln(C_mid / c0)
    ssr: float
    grid: G.Grid | None  # full grid when one was searched (reused by the intervals)
    used_grid: str  # "full" | "warm" (diagnostics for tests/bench)


def _ssr(x: FloatArray, y: FloatArray, th: tuple[float, float, float, float]) -> float:
    a, m, b, r0 = th
    e = y - (r0 + (a - r0) * frac(x, m, b))
    return float(e @ e)


def binned_ssr(bd: G.Binned, th: tuple[float, float, float, float]) -> float:
    """SSR of the curve ``th`` over binned points as ``G.search`` counts it: count-weighted
    residuals of the bin means plus the spread inside the bins."""
    a, m, b, r0 = th
    e = bd.y - (r0 + (a - r0) * frac(bd.x, m, b))
    return float(bd.w @ (e * e)) + bd.ssw


def refine_bounds(m_axis: FloatArray) -> tuple[float, float]:
    """Bounds of m = ln(C_mid / c0) for a refinement from a cell of a grid on ``m_axis``."""
    return float(m_axis[0]) - 2.0, float(np.log(1000.0))


def coarse_check(bd: G.Binned, r0: float | None, value_range: tuple[float, float],
                 x_min: float, fixed_a: float | None = None) -> G.Grid:
    """The coarse grid that checks a warm start's basin (``warm_holds``)."""
    return G.search(bd, r0, value_range, *G.default_axes(x_min, *COARSE), fixed_a)


def warm_holds(ssr: float, check: G.Grid) -> bool:
    """Whether a refinement from a warm start is as good as the check grid's best cell;
    else the start fell into a worse basin and the grid's search is redone."""
    return ssr <= float(check.ssr.min()) * (1.0 + 1e-6) + 1e-15


def _refine(
    x: FloatArray,
    y: FloatArray,
    start: tuple[float, float, float, float],
    fit_r0: bool,
    value_range: tuple[float, float],
    m_bounds: tuple[float, float],
    fixed_a: float | None,
    weights: FloatArray | None = None,
) -> tuple[float, float, float, float]:
    """Bounded least squares from ``start`` over the free parameters (``lm.solve``).

    ``weights`` (e.g. bin counts) weight each squared residual, so a fit on binned data
    minimises the same SSR as on the points (up to the within-bin spread of the curve)."""
    lo, hi = value_range
    free = np.array([fixed_a is None, True, True, fit_r0])
    lower = np.array([lo, m_bounds[0], G.B_BOUNDS[0], lo])
    upper = np.array([hi, m_bounds[1], G.B_BOUNDS[1], hi])
    full = np.array(start, dtype=float)
    try:
        th = lm.solve(x, y, full, free, lower, upper, weights).theta
    except (ValueError, FloatingPointError, np.linalg.LinAlgError):
        th = full
    if not np.all(np.isfinite(th)):
        th = full
    return (float(th[0]), float(th[1]), float(th[2]), float(th[3]))


def point_fit(
    x: FloatArray,
    y: FloatArray,
    r0: float | None,
    value_range: tuple[float, float],
    start: tuple[float, float, float, float] | None = None,
    fixed_a: float | None = None,
    need_grid: bool = False,
) -> PointFit:
    """Global fit: grid with closed-form A (and R0), then bounded refinement.

    With ``start`` (a warm start) the full grid is skipped unless a coarse grid finds a
    better SSR than the warm refinement, which means the warm start fell into a worse basin.
    """
    fit_r0 = r0 is None
    binned = G.bin_data(x, y)
    m_axis, b_axis = G.default_axes(float(x[0]))
    m_bounds = refine_bounds(m_axis)
    r0_default = float(y[0]) if r0 is None else float(r0)

    def from_cell(gr: G.Grid, i: int) -> tuple[float, float, float, float]:
        return (float(gr.a[i]), float(gr.m[i]), float(gr.b[i]), float(gr.r0[i]))

    gr = None
    if start is not None:
        a0, m0, b0, r00 = start
        st = (fixed_a if fixed_a is not None else a0, m0, b0, r00 if fit_r0 else r0_default)
        th = _refine(x, y, st, fit_r0, value_range, m_bounds, fixed_a)
        ssr = _ssr(x, y, th)
        # The check grid: coarse for a bare point fit; the full one when the caller needs it
        # anyway (interval profile), which then costs nothing extra.
        if need_grid:
            gr = G.search(binned, r0, value_range, m_axis, b_axis, fixed_a)
            check = gr
        else:
            check = coarse_check(binned, r0, value_range, float(x[0]), fixed_a)
        if warm_holds(ssr, check):
            return PointFit(th, ssr, gr, "warm")

    if gr is None:
        gr = G.search(binned, r0, value_range, m_axis, b_axis, fixed_a)
    best = from_cell(gr, gr.best)
    th = _refine(x, y, best, fit_r0, value_range, m_bounds, fixed_a)
    ssr = _ssr(x, y, th)
    ssr_grid = _ssr(x, y, best)
    if not np.isfinite(ssr) or ssr > ssr_grid:  # never worse than the grid's best cell
        th, ssr = best, ssr_grid
    return PointFit(th, ssr, gr, "full")


def prefix_fit(
    bd: G.Binned, r0: float | None, value_range: tuple[float, float],
    start: tuple[float, float, float, float], m_bounds: tuple[float, float],
) -> tuple[float, float, float, float]:
    """The break test's fit of a prefix of the window, on binned data (the test weighs the
    departure of many noisy points, far coarser than the binning's error), warm-started from
    the full fit.  As in ``point_fit``'s warm path a coarse grid checks the basin: a full fit
    bent far out of shape by a collapse (a falling step) is no start for the rise before it."""
    fit_r0 = r0 is None
    st = start if r0 is None else (start[0], start[1], start[2], float(r0))
    th = _refine(bd.x, bd.y, st, fit_r0, value_range, m_bounds, None, bd.w)
    check = coarse_check(bd, r0, value_range, float(bd.x[0]))
    if warm_holds(binned_ssr(bd, th), check):
        return th
    i = check.best
    best = (float(check.a[i]), float(check.m[i]), float(check.b[i]), float(check.r0[i]))
    return _refine(bd.x, bd.y, best, fit_r0, value_range, m_bounds, None, bd.w)


def _insufficient(prep: Prepared, options: FitOptions, msg: str, n: int) -> FitResult:
    return FitResult(
        status="insufficient_data", R0=prep.r0, r0_source=prep.r0_source, n_points=n,
        fit_range=prep.fit_range, target_compute=prep.target, method=options.method,
        message=msg, value_range=tuple(options.value_range),  # type: ignore[arg-type]
        withheld=withheld_record([reason("insufficient_data", msg)], None, None),
    )


def outside_range_message(y: FloatArray, value_range: tuple[float, float]) -> str | None:
    """Why a window whose values mostly lie outside ``value_range`` cannot be fitted, or None.

    The ceiling is searched inside the value range, so a metric on another scale (a
    percentage, a reward in [-1, 1]) under the default [0, 1] used to read as "flat": the
    fit could only pin A at the bound.  More than ``OUTSIDE_SHARE`` of the window's points
    beyond the range by more than 1% of its width and 3 sds of the evaluation noise (from
    successive differences: noisy evaluations of a pass rate near 0 in a simulation dip
    below it) is taken to mean a range set for another scale, not a few wild evaluations."""
    lo, hi = value_range
    noise = diff_noise_sd(y) if y.size > 1 else 0.0
    tol = max(0.01 * value_span(value_range), 3.0 * noise)
    out = int(np.count_nonzero((y < lo - tol) | (y > hi + tol)))
    if out <= OUTSIDE_SHARE * y.size:
        return None
    y_lo, y_hi = float(y.min()), float(y.max())
    hint = ("e.g. [0, 100] for a percentage" if y_lo >= 0.0 and y_hi <= 100.0 else
            "the lowest and highest values the metric can take")
    return (f"{out} of {y.size} values lie outside the value range [{lo:g}, {hi:g}] the "
            f"ceiling is searched in (they run from {y_lo:.4g} to {y_hi:.4g}): set the run's "
            f"fit setting value_range to the metric's scale ({hint}; value_range in "
            f"scalewatch.init, or PATCH /api/v1/runs/{{id}} with fit_settings); claims, margins "
            f"and noise floors then scale with it")


def no_signal_message(gain: float, floor: float, q: float, sigma: float, tau: float,
                      n: int, unit: float = 1.0) -> str:
    """Why a fitted gain ``A - R0`` within ``floor`` (the noise of the mean level, which grows
    with the residuals' autocorrelation time ``tau``) is no signal.

    "Flat" only when the gain would be within the noise of independent evaluations too: a run
    that rose by 0.5 and then slid off its curve leaves residuals so persistent (``tau`` near
    the number of evaluations) that the floor passes the gain, and calling that run flat (the
    message before) told its user the opposite of what the chart shows."""
    if gain < -floor:
        return f"no signal: the metric decreases (fitted gain A - R0 = {gain:+.4f})"
    if gain <= max(2.0 * q * sigma / np.sqrt(max(n, 1)), FLAT_GAIN * unit):
        return f"no signal: the metric is flat (fitted gain A - R0 = {gain:+.4f})"
    return (f"no signal the fit can trust: the fitted gain A - R0 = {gain:+.4f} is within the "
            f"noise only because the residuals around the sigmoid are persistent "
            f"(autocorrelation time {tau:.0f} evaluations; the window has {n}): the evaluation "
            "noise drifts slowly, or the run does not follow a sigmoid (it rose and then slid, "
            "or changed course)")


def fit_curve(
    compute: ArrayLike,
    values: ArrayLike,
    options: FitOptions = FitOptions(),
    previous: FitResult | None = None,
    steps: ArrayLike | None = None,
) -> FitResult:
    """Fit the ScaleRL sigmoid; never raises on bad data (see ``status`` and ``message``).

    ``steps`` (optional, one per point) only label a detected break with the step it starts at.
    """
    lo, hi = (float(v) for v in options.value_range)
    problem = value_range_problem((lo, hi))
    if problem:
        raise ValueError(problem)
    unit = value_span((lo, hi))
    if options.method not in ("default", "paper", "curve_fit"):
        raise ValueError(f"unknown method {options.method!r}")
    prep = prepare(compute, values, options, steps)
    n = int(prep.y.size)
    if n < MIN_POINTS:
        return _insufficient(prep, options, f"only {n} usable points (need {MIN_POINTS})", n)
    if np.unique(prep.x).size < MIN_DISTINCT:
        return _insufficient(prep, options, f"fewer than {MIN_DISTINCT} distinct compute values", n)
    outside = outside_range_message(prep.y, (lo, hi))
    if outside is not None:
        return _insufficient(prep, options, outside, n)
    if options.method != "default":
        from .paper import fit_baseline

        return fit_baseline(prep, options)

    start = None
    if previous is not None and previous.params is not None and previous.C_mid:
        a, b, cm, r0p = previous.params
        start = (a, float(np.log(cm / prep.c0)), b, r0p)
    pf = point_fit(prep.x, prep.y, prep.r0, (lo, hi), start, need_grid=options.intervals)
    # Every prefix starts where the window does: one set of bounds for all of them.
    m_bounds = refine_bounds(G.default_axes(float(prep.x[0]))[0])

    def refit(x: FloatArray, y: FloatArray, st: tuple[float, float, float, float]
              ) -> tuple[float, float, float, float]:
        return prefix_fit(G.bin_data(x, y, BREAK_BINS), prep.r0, (lo, hi), st, m_bounds)

    brk = detect_break(prep.x, prep.y, pf.theta, prep.r0, (lo, hi), refit)
    if brk is not None:
        return broken(prep, options, brk)
    collapse = detect_collapse(prep.x, prep.y, pf.theta, prep.r0 is None, refit, unit)
    if collapse is not None:
        return _insufficient(prep, options, collapse.message, n)
    return finish(prep, options, pf)


def broken(prep: Prepared, options: FitOptions, brk: Break) -> FitResult:
    """The result for a run that broke: the regime since the break when it can be fitted,
    else what the evidence says (the recent level, and an upper bound on the new ceiling)."""
    lo, hi = (float(v) for v in options.value_range)
    c_win = prep.c0 * np.exp(prep.x)
    c_break = float(c_win[brk.index])
    a, m, b, r0 = brk.theta_before
    target = prep.target if prep.target is not None else float(c_win[-1])

    def before(c: float) -> float:
        return r0 + (a - r0) * float(frac(np.array([np.log(c / prep.c0)]), m, b)[0])

    # A broken recipe is not expected to gain more from here than its old curve still had to
    # gain: the recent level's upper bound plus that remaining gain bounds the new ceiling.
    remaining = max(before(target) - before(float(c_win[-1])), 0.0)
    ceiling_upper = min(brk.level_ci[1] + remaining, hi)
    info: dict[str, object] = {
        "compute": c_break,
        "step": None if prep.steps is None else int(prep.steps[brk.index]),
        "drop": brk.drop, "drop_ci": brk.drop_ci, "level": brk.level,
        "level_ci": brk.level_ci, "n_after": brk.n_after, "ceiling_upper": ceiling_upper,
        "regime": "too_few_points",
    }
    where = f"step {info['step']}" if info["step"] is not None else f"compute {c_break:.4g}"
    what = (f"the run broke at {where}: its newest {brk.n_after} evaluations lie "
            f"{brk.drop:.3f} below the curve it was on")
    why_not = f"too few evaluations since then to fit the new regime (need {MIN_REGIME})"
    if brk.n_after >= MIN_REGIME:
        why_not = f"the {brk.n_after} evaluations since then do not pin down a new curve yet"
        info["regime"] = "unidentified"  # enough points, but no identified curve through them
        after = fit_curve(c_win[brk.index:], prep.y[brk.index:],
                          replace(options, r0=None, warmup=0.0, fit_until=None,
                                  target_compute=target))
        if after.status == "ok" and after.break_ is None:
            info["regime"] = "fitted"
            return replace(after, break_=info, message=f"{what}; A and the forecast describe "
                           f"the {brk.n_after} evaluations since the break")
    # The noise model of the points before the break (after it they are off that curve).
    k = brk.index
    unc = analyse(prep.x[:k], prep.y[:k], brk.theta_before, prep.r0 is None, (lo, hi))
    half = extra_half_width(unc.q, unc.eval_sd, 0.0, 0.0)
    return FitResult(
        status="unidentified", A=None, A_lower_bound=None, B=b,
        C_mid=prep.c0 * float(np.exp(m)), R0=r0, a_fit=a, r0_source=prep.r0_source,
        n_points=int(prep.y.size), fit_range=prep.fit_range, target_compute=target,
        predicted_at_target=brk.level,
        predicted_interval=(max(brk.level_ci[0] - float(half), lo),
                            min(ceiling_upper + float(half), hi)),
        method="default", sigma=unc.sigma, tau=unc.tau, eval_sd=unc.eval_sd, q=unc.q,
        value_range=(lo, hi), break_=info,
        message=f"{what}; {why_not}; its ceiling is at most {ceiling_upper:.3f}",
        withheld=withheld_record(break_reasons(info, rules_for((lo, hi))), None, None),
    )


def withheld_because(
    ci_a: tuple[float, float], ci_cmid: tuple[float, float] | None, fit_end: float | None,
    value_range: tuple[float, float],
) -> str | None:
    """Why A must be withheld (``unidentified``), or None when it can be claimed."""
    lo, hi = value_range
    rules = rules_for(value_range)
    a_lo, a_hi = ci_a
    if a_lo <= lo + rules.edge_eps or a_hi >= hi - rules.edge_eps:
        return "reaches the value-range bound"
    if a_hi - a_lo > rules.max_width:
        return f"is wider than {rules.max_width:g}"
    # The midpoint must be behind the run with confidence: a window that may still be short
    # of C_mid can look like a plateau when persistent noise flattens its end, and claiming
    # A there is how forecasts end up confidently wrong.
    if ci_cmid is not None and fit_end is not None and KNEE_FACTOR * ci_cmid[1] > fit_end:
        return "is narrow, but C_mid may still lie beyond the data"
    return None


def too_early(c_mid: float | None, fit_end: float | None) -> str | None:
    """Why an A that ``withheld_because`` lets through must still wait, or None.

    The run must be well behind its knee: until the window reaches PAST_KNEE x the fitted
    C_mid, the top of the curve is extrapolated, and noise that flattens the newest points makes
    A look both low and certain.  Measured (``bench/calibration.py``, 2,700 claims): claims
    made before 2.5 x the fitted C_mid held the true A 80% of the time, those after it 94-97%.
    Since A's interval carries the model form's uncertainty (``structural.py``) the rule starts
    at 2 x: ``bench/calibration_sampled.py``'s tuning rows, claims from 2 x instead of 2.5 x:
    13 more at 2 x C_mid, all holding A on the sigmoid family, none missing a misspecified
    run's limit by more than 0.02; without the rule, one late-drift claim would.
    """
    if c_mid is None or fit_end is None or PAST_KNEE * c_mid <= fit_end:
        return None
    return (f"is narrow, but the run is only {fit_end / c_mid:.1f} x past its fitted C_mid, "
            f"its knee, and A is claimed from {PAST_KNEE:g} x, at compute "
            f"{PAST_KNEE * c_mid:,.4g}")


def too_few_to_weigh(n: int) -> str | None:
    """Why a window of ``n`` evaluations, narrow as A's interval may be, cannot claim A, or
    None: fewer than ``structural.MIN_POINTS`` cannot weigh the sigmoid against the other
    saturating curves (``structural.weigh``), so nothing says the ceiling is the sigmoid's.

    Measured (``bench/RESULTS-calibration-sampled.md``, round 14): on the held-out family, 5
    of the 12 claims such windows made over four seeds missed the run's own limit by more
    than 0.02 (2 of 60 longer ones did); on the tuning rows 6 of 75, all on the misspecified
    families, beside 41 that held A on the sigmoid families: a claim from a handful of
    evaluations is right when the run happens to be a sigmoid, and nothing in so few says
    whether it is."""
    if n >= FORM_MIN_POINTS:
        return None
    return f"is narrow, but {few_points_detail(n, FORM_MIN_POINTS)}"


def form_too_wide(form: ModelForm, value_range: tuple[float, float]) -> str | None:
    """Why A's interval widened to the other saturating curves the window allows
    (``structural.weigh``) is too wide to claim, or None."""
    a_lo, a_hi = form.ci_a
    lo, hi = value_range
    rules = rules_for(value_range)
    if (a_hi - a_lo <= rules.max_width and a_lo > lo + rules.edge_eps
            and a_hi < hi - rules.edge_eps) or not form.counted:
        return None
    others = ", ".join(f"a {alt.name} at {alt.a:.3f}" for alt in form.counted)
    return (f"is narrow, but other saturating curves fit the window as well as the sigmoid and "
            f"level off elsewhere ({others}): with the model form's uncertainty A lies in "
            f"[{a_lo:.3f}, {a_hi:.3f}], wider than a claim allows ({rules.max_width:g})")


def drift_too_wide(wide: tuple[float, float], drift_sd: float,
                   value_range: tuple[float, float] = (0.0, 1.0)) -> str | None:
    """Why A, narrow on its own, cannot be claimed once its interval carries the project's
    learned drift allowance (``intervals.a_with_drift``, interval ``wide``), or None.  Only
    the width counts: an end the widening pushed to the value range's bound was clipped there,
    it is not the pile-up at a bound that ``withheld_because`` refuses."""
    max_width = rules_for(value_range).max_width
    if not drift_sd > 0 or wide[1] - wide[0] <= max_width:
        return None
    return (f"is narrow, but this project's finished runs strayed past their own forecasts: "
            f"with the drift they showed (sd {drift_sd:.3f} at this run's reach) A lies in "
            f"[{wide[0]:.3f}, {wide[1]:.3f}], wider than a claim allows ({max_width:g})")


def claim_with_drift(ci_a: tuple[float, float], a_point: float,
                     allowance: tuple[tuple[float, float], ...] | None, target: float | None,
                     window_end: float | None, value_range: tuple[float, float]
                     ) -> tuple[tuple[float, float], str | None]:
    """A's interval as a claim carries it in a project with a learned drift allowance
    (``intervals.allowance_at_reach``, ``intervals.a_with_drift``; unchanged without one), and
    why that interval cannot be claimed (``drift_too_wide``), or None.  For a run
    (``finish``) and a recipe's pooled fit (``group.py``) alike."""
    drift_sd = allowance_at_reach(allowance, target, window_end, value_span(value_range))
    wide = a_with_drift(ci_a, a_point, drift_sd, value_range)
    return wide, drift_too_wide(wide, drift_sd, value_range)


def holding(interval: tuple[float, float], point: float) -> tuple[float, float]:
    """``interval`` stretched to hold ``point``.

    B's and C_mid's intervals are posterior quantiles, their points the least-squares fit's.
    The two part ways where the posterior's assumptions pull its mass off the least-squares
    optimum: B's prior (support [0.5, 8], a soft ceiling past 2.5) on a curve steeper than
    that, AR(1) noise with rho near 1 on a curve that is not a sigmoid, the shape prior on a
    window short of its knee (6% of the sampled bench's fits, most of them withheld).  A
    reported value outside its own 95% interval reads as a bug, and which of the two is
    right is exactly what the data cannot say there, so the interval spans both."""
    return min(interval[0], point), max(interval[1], point)


def a_lower_bound(ci_a: tuple[float, float], draws: Any, fit_end: float | None) -> float:
    """A lower bound on a withheld A.

    The curve rises monotonically towards A, so A is at least the curve's level at the end
    of the window; that level is well determined even when A is not, which makes it a far
    more useful (and still defensible) lower bound than A's own interval."""
    lower = ci_a[0]
    if len(draws) and fit_end is not None:
        end_lo = band(np.array([fit_end]), np.asarray(draws, dtype=float).reshape(-1, 4),
                      np.empty((0, 4)))[0][0]
        if np.isfinite(end_lo):
            lower = max(lower, float(end_lo))
    return lower


def finish(prep: Prepared, options: FitOptions, pf: PointFit) -> FitResult:
    """Status, intervals and the result object for a point fit."""
    lo, hi = (float(v) for v in options.value_range)
    unit = value_span((lo, hi))
    n = int(prep.y.size)
    fit_r0 = prep.r0 is None
    a, m, b, r0 = pf.theta
    # Noise model (sigma, tau, t quantile) and local (Laplace) intervals; the posterior below
    # replaces the intervals when they are asked for.
    unc = analyse(prep.x, prep.y, pf.theta, fit_r0, (lo, hi))
    drift = drift_rate_at(options.drift_rate, options.drift_allowance, prep.target,
                          None if prep.fit_range is None else prep.fit_range[1], unit)
    c_mid = prep.c0 * float(np.exp(m))
    pred = None
    if prep.target is not None:
        pred = r0 + (a - r0) * float(frac(np.log(max(prep.target, 1e-300) / prep.c0), m, b))
    rmse = float(np.sqrt(pf.ssr / n))
    common: dict[str, Any] = dict(
        B=b, C_mid=c_mid, R0=r0, r0_source=prep.r0_source, n_points=n,
        fit_range=prep.fit_range, target_compute=prep.target, rmse=rmse, method="default",
        a_fit=a, sigma=unc.sigma, tau=unc.tau, ssr=pf.ssr, value_range=(lo, hi),
        eval_sd=unc.eval_sd, drift_sd=drift, q=unc.q,
    )
    # No signal: the fitted gain is not clearly above the noise of the mean level.
    gain_floor = max(2.0 * unc.q * unc.sigma * np.sqrt(unc.tau / n), FLAT_GAIN * unit)
    if a - r0 <= gain_floor:
        # No curve is reported (B and C_mid of a flat fit are meaningless).
        common.update(B=None, C_mid=None, a_fit=None)
        msg = no_signal_message(a - r0, gain_floor, unc.q, unc.sigma, unc.tau, n, unit)
        return FitResult(status="insufficient_data", message=msg, withheld=withheld_record(
            [reason("insufficient_data", msg)], None, None), **common)

    a_point, ci_a = a, unc.ci_a
    ci = None
    curve_iv = pred_iv = None
    draws: tuple[tuple[float, float, float, float], ...] = ()
    if options.intervals:
        m_axis, b_axis = posterior_axes(float(prep.x[0]))
        post = posterior_summary(prep.x, prep.y, prep.r0, prep.c0, (lo, hi), unc, m_axis,
                                 b_axis, prep.target, drift_rate=drift,
                                 rho_prior=options.noise_prior, b_prior=options.b_prior)
        common.update(rho=post.rho, prior=prior_record(options.noise_prior, options.b_prior))
        a_point, ci_a = post.a_median, post.ci_a
        ci = {"A": post.ci_a, "B": holding(post.ci_b, b), "C_mid": holding(post.ci_cmid, c_mid)}
        if post.forecast is not None:
            pred = post.forecast
        curve_iv, pred_iv = post.curve_interval, post.predicted_interval
        draws = tuple(tuple(map(float, r)) for r in post.draws)  # type: ignore[misc]
    fit_end = None if prep.fit_range is None else prep.fit_range[1]
    why = withheld_because(ci_a, None if ci is None else ci["C_mid"], fit_end, (lo, hi))
    tail = "; the run has probably not passed its knee"
    if why is None:
        why, tail = too_early(c_mid, fit_end) or too_few_to_weigh(n), ""
    # A run whose data disagree with every sigmoid has no A to claim, however narrow. Two
    # checks, each for a departure the other misses: a smooth bend of the residuals beyond what
    # AR(1) noise explains (withheld.misfit, every fit), and a curve with an asymmetric knee
    # that fits significantly better and levels off elsewhere (misspec.disagrees, only on a
    # fit about to claim A: it costs three small least-squares fits).
    mis = misfit(prep.x, prep.y, pf.theta, fit_r0, unit)
    other_shape = model_form = drifted = None
    if why is None and mis is None:
        # The model form's uncertainty (structural.py): the saturating curves that fit the
        # window about as well level off elsewhere; A's interval is widened to them.  Not
        # under an (opt-in) B prior: the project's finished runs then vouch for the curve's
        # exponent, which is what the alternatives change.
        form = weigh(prep.x, prep.y, pf.theta, fit_r0, (lo, hi), ci_a, a_point)
        other_shape = disagrees(prep.x, prep.y, pf.theta, fit_r0, (lo, hi), ci_a,
                                form.richards)
        if other_shape is None and options.b_prior is None:
            model_form = form_too_wide(form, (lo, hi))
            if model_form is None:  # claimed, with the model form's uncertainty
                ci_a = form.ci_a
                if ci is not None:
                    ci = dict(ci, A=ci_a)
        if other_shape is None and model_form is None:
            # A project whose finished runs strayed past their own forecasts vouches for no
            # ceiling closer than that drift (intervals.a_with_drift).
            wide, drifted = claim_with_drift(ci_a, a_point, options.drift_allowance,
                                             prep.target, fit_end, (lo, hi))
            if drifted is None:
                ci_a = wide
                if ci is not None:
                    ci = dict(ci, A=ci_a)
        why = other_shape or model_form or drifted
    if why is not None or mis is not None:
        lower = a_lower_bound(ci_a, draws, fit_end)
        a_lo, a_hi = ci_a
        message = "" if why is None else (f"A is not pinned down yet (its 95% interval "
                                          f"[{a_lo:.3f}, {a_hi:.3f}] {why}){tail}")
        if mis is not None:
            message = "; ".join(filter(None, ["A is withheld: the data disagree with every "
                                              "sigmoid", message]))
        return FitResult(
            status="unidentified", A=None, A_lower_bound=lower, ci=ci,
            predicted_at_target=pred, predicted_interval=pred_iv, curve_interval=curve_iv,
            message=message, draws=draws,
            withheld=explain(prep.x, draws, fit_r0, ci_a, None if ci is None else ci["C_mid"],
                             c_mid, fit_end, (lo, hi), common.get("rho"), rules_for((lo, hi)),
                             mis, message, other_shape, model_form or drifted),
            **common)
    return FitResult(
        status="ok", A=a_point, A_lower_bound=ci_a[0], ci=ci, predicted_at_target=pred,
        predicted_interval=pred_iv, curve_interval=curve_iv, message="", draws=draws, **common)
