"""Runs that break: a lasting fall below the curve the run was on (a change point).

A recipe can break mid-run (a data-mix change, entropy collapse, a bug).  A sigmoid fitted to
all the points then bends towards the broken part, its A interval widens, and the forecast
quietly answers for a run that no longer exists.  So before trusting one curve for the whole
window we ask whether its newest points fell off the curve fitted to the points before them.

Test: for a few candidate lengths ``m`` of the newest segment, fit the curve to the points
before it (warm-started from the full fit, on binned data), and compare the segment's mean
residual with its standard error: evaluation noise of a mean of ``m`` autocorrelated
evaluations plus the pre-fit's own extrapolation uncertainty (linearised).  A break is a
segment whose mean lies more than ``Z_BREAK`` standard errors below the curve, whose newest
points are still low (lasting, not a dip that recovered), and whose recent level is at least
``MIN_DROP`` below the curve.  ``Z_BREAK`` is set for a per-fit false-alarm rate that, over the
hundreds of refits of a stable run, still raises no alarm (``bench/alerts.py`` measures it).
Only the candidates a linearised screen of all of them at once (``breakscreen.py``) finds
near the threshold are refitted; the screen never changes the verdict (tested).
The start of the break is then located as the onset of the hinge (flat, then a fall over some
evaluations, then down) that fits the residuals best, not by the coarse candidate length.

Only falls are breaks: a jump up is good news and the refit follows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from . import grid as G
from . import posterior as P
from .breakscreen import MARGIN, linear_z
from .intervals import RHO_MAX, analyse, autocorr_time, eval_sd, lag1_rho, mean_noise_sd
from .model import FloatArray, curve_x, frac, jacobian_x, value_span

MIN_POINTS = 16  # fewer points: no break test
MIN_BEFORE = 10  # points the pre-break fit needs at least
CANDIDATES = (3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128)
Z_SCREEN = 2.0  # cheap screen on the full fit's residuals before any refit
Z_BREAK = 3.5
MIN_DROP = 0.02  # the paper's margin on A: smaller departures are not worth a verdict
RECENT = 5  # the newest evaluations that make the "recent level"
FALL_Z = 1.96  # the recent level lies this many of its sds below the level reached (2.58 was
# tried: each false alarm of bench/alerts.py fired one evaluation later, no fewer)


Theta = tuple[float, float, float, float]  # (A, m, B, R0), m = ln(C_mid / c0)
Refit = Callable[[FloatArray, FloatArray, Theta], Theta]  # a warm-started fit of a prefix


@dataclass(frozen=True)
class Break:
    index: int  # first point of the new regime, in the window's (sorted) points
    drop: float  # how far the recent level lies below the pre-break curve (positive)
    drop_ci: tuple[float, float]
    z: float  # the test statistic (segment mean / its standard error)
    level: float  # the recent level (mean of the newest evaluations)
    level_ci: tuple[float, float]
    n_after: int
    theta_before: tuple[float, float, float, float]  # pre-break fit (A, m, B, R0)


def _curve(x: FloatArray, th: Theta) -> FloatArray:
    return curve_x(x, *th)


def _ar1_cov(m: int, sd: float, tau: float) -> FloatArray:
    """Covariance of ``m`` consecutive evaluations: AR(1) with sd ``sd`` and time ``tau``."""
    rho = (max(tau, 1.0) - 1.0) / (max(tau, 1.0) + 1.0)
    idx = np.arange(m)
    return sd * sd * rho ** np.abs(idx[:, None] - idx[None, :])


def _shapes(m: int) -> list[FloatArray]:
    """Weights of the two departures we test: a step (uniform) and a ramp (a slide that
    grows with time, e.g. a slowly collapsing entropy), each normalised to sum to one."""
    step = np.full(m, 1.0 / m)
    ramp = np.arange(1, m + 1, dtype=float)
    return [step, ramp / ramp.sum()]


# Ramp lengths (evaluations) the onset search tries: 1 is a step, longer ones a fall that
# takes that long to settle; one longer than the points after the onset is a slide still going.
ONSET_RAMPS = (1, 3, 6, 10, 15, 20, 30, 40)


def fall_onset(r: FloatArray) -> int:
    """Index in ``r`` (residuals under the curve before the break) where the fall begins.

    The least-squares onset of a hinge: zero before it, then a ramp down over ``w``
    evaluations that stays down (``w`` in ``ONSET_RAMPS``, the depth fitted in closed form),
    the onset and ``w`` that explain the most of the residuals' sum of squares.  The most
    negative suffix sum, used before, counted every slightly negative residual ahead of the
    fall as part of it (a curve fitted to the points before a break sits a little above them
    at its end).  Measured on 90 broken runs, 25 and 50 evaluations after the change: a
    sudden fall was placed a median 3-3.5 evaluations early (up to 14) by the suffix sum,
    within 2 by the hinge (mean error 0.4); a fall over 20 evaluations a median 2.5-9 early
    (up to 19) against a median 0 (mean error 1.5-2, up to 8); a slide over 40 alike (mean
    error 4.5-5.8 against 3.9-6.0).
    """
    n = r.size
    suffix = np.concatenate([np.cumsum(r[::-1])[::-1], [0.0]])  # suffix[s] = r[s:].sum()
    left = n - np.arange(n)  # points from each onset to the end
    best, onset = 0.0, 0
    for w in ONSET_RAMPS:
        ramp = np.arange(1, w + 1) / w
        # h . r[s:] for h = ramp then ones: the ramp's part by correlation, the rest a suffix.
        on_ramp = np.correlate(np.concatenate([r, np.zeros(w)]), ramp, mode="valid")[:n]
        hr = on_ramp + suffix[np.minimum(np.arange(n) + w, n)]
        within = np.minimum(left, w)
        hh = (within * (within + 1) * (2 * within + 1) / 6) / (w * w) + np.maximum(left - w, 0)
        gain = np.where(hr < 0, hr * hr / hh, 0.0)
        i = int(np.argmax(gain))
        if gain[i] > best:
            best, onset = float(gain[i]), i
    return onset


def _posterior_curves(
    x_pre: FloatArray, y_pre: FloatArray, x_post: FloatArray, r0: float | None,
    value_range: tuple[float, float], th: tuple[float, float, float, float], fit_r0: bool,
) -> FloatArray:
    """Posterior draws of the pre-break curve at the post-break points, (draws, points)."""
    unc = analyse(x_pre, y_pre, th, fit_r0, value_range)
    s2 = unc.sigma ** 2 * unc.tau * (unc.q / 1.96) ** 2
    m_axis, b_axis = P.posterior_axes(float(x_pre[0]))
    post = P.sample(G.bin_data(x_pre, y_pre), r0, value_range, s2, m_axis, b_axis, n=1000)
    a, m, b, rr = (post.draws[:, i:i + 1] for i in range(4))
    return rr + (a - rr) * frac(x_post[None, :], m, b)


def _confirm(w: FloatArray, y_post: FloatArray, curves: FloatArray, noise: FloatArray) -> float:
    """z of the weighted departure, the curve's posterior spread and the noise together."""
    dep = (y_post[None, :] - curves) @ w
    var = float(dep.var()) + float(w @ noise @ w)
    return float(dep.mean()) / float(np.sqrt(max(var, 1e-18)))


def _cautious_tau(e: FloatArray) -> float:
    """The noise's autocorrelation time at the upper end of what the residuals allow (the AR(1)
    coefficient one standard error above its estimate).  A break test asks whether a run of
    low evaluations can be noise; persistent noise produces exactly such runs, and a few dozen
    residuals tend to understate persistence, so the test must not."""
    rho, se = lag1_rho(e)
    rho = min(rho + se, RHO_MAX)
    return (1.0 + rho) / (1.0 - rho)


def _screen_scale(y: FloatArray) -> float:
    """A noise scale that a break does not inflate: from successive differences (robust)."""
    d = np.diff(y)
    return float(np.median(np.abs(d - np.median(d)))) / 0.6745 / np.sqrt(2.0)


def exact_z(x: FloatArray, y: FloatArray, k: int, th: Theta, fit_r0: bool
            ) -> tuple[float, float, float, float]:
    """(z, evaluation sd, cautious tau, degrees of freedom of the sd) of the newest ``n - k``
    points' most negative (step or ramp) departure from ``th``, the curve fitted to the first
    ``k`` points: evaluation noise of the weighted mean plus the prefix fit's extrapolation
    uncertainty (linearised).  The noise model is ``intervals.analyse``'s, computed here
    without its interval of A."""
    m = x.size - k
    p = 4 if fit_r0 else 3
    e = y[:k] - _curve(x[:k], th)
    sigma = float(np.sqrt(max(float(e @ e) / max(k - p, 1), 1e-12)))
    tau = autocorr_time(e)
    sd = eval_sd(sigma, tau, k, p)
    r = y[k:] - _curve(x[k:], th)
    a, mm, b, rr = th
    jac = jacobian_x(x[:k], a, mm, b, rr, fit_r0)
    cov = sigma**2 * tau * np.linalg.pinv(jac.T @ jac)
    g = jacobian_x(x[k:], a, mm, b, rr, fit_r0)
    tau_c = _cautious_tau(e)
    noise = _ar1_cov(m, sd, tau_c)
    z = np.inf
    for w in _shapes(m):
        gw = w @ g
        var = float(w @ noise @ w) + float(gw @ cov @ gw)
        z = min(z, float(w @ r) / float(np.sqrt(max(var, 1e-18))))
    return z, sd, tau_c, effective_dof(k, p, lag1_rho(e)[0])


def effective_dof(k: int, p: int, rho: float) -> float:
    """Degrees of freedom of the noise variance estimated from ``k`` prefix residuals of a
    ``p``-parameter fit under AR(1) noise with lag-1 coefficient ``rho`` (Bartlett: the
    sample variance of AR(1) noise varies as that of ``(k - p) (1 - rho^2) / (1 + rho^2)``
    independent draws), at least 2.  The point estimate of ``rho``: the test's uncertainty
    about rho itself is already in its cautious tau."""
    r2 = min(max(rho, 0.0), RHO_MAX) ** 2
    return max((k - p) * (1.0 - r2) / (1.0 + r2), 2.0)


def as_normal_z(z: float, dof: float) -> float:
    """A departure's z whose noise scale was estimated on ``dof`` degrees of freedom, read
    through Student's t and mapped back to the normal scale (same tail probability), so one
    threshold ``Z_BREAK`` serves every candidate.

    Why: the scale of a few dozen persistent residuals is itself uncertain (with rho 0.8 and
    40 residuals it is known as well as from 8 independent ones), and a scale drawn low makes
    a normal z read noise as a break.  On the sampled alert bench (issue 34, tuning seed) all
    4 false alarms of 200 stable runs were breaks whose z just passed -3.5; read this way, 2 of
    them no longer do.  (Degrees of freedom of (k - p) / tau with the cautious tau removed all
    4, but a fall of 0.10-0.15 on a prefix of 20-40 evaluations then went unflagged, and a
    test's fall of 0.10 with 50 evaluations before it was called a collapse instead.)  A large
    break passes either way: its z grows with every evaluation."""
    return float(stats.norm.ppf(stats.t.cdf(z, dof))) if z < 0 else z


def detect_break(
    x: FloatArray,
    y: FloatArray,
    theta: Theta,
    r0: float | None,
    value_range: tuple[float, float],
    refit: Refit,
) -> Break | None:
    """The most significant lasting fall of the newest points below the earlier curve.

    ``refit(x, y, start)`` returns a point fit ``(A, m, B, R0)`` of a prefix (the caller's
    warm-startable fitter, so this module does not depend on ``fit.py``).  The noise model
    of each test comes from the points before its candidate break.
    """
    n = int(x.size)
    if n < MIN_POINTS:
        return None
    fit_r0 = r0 is None
    min_drop = MIN_DROP * value_span(value_range)  # MIN_DROP is set for [0, 1]
    resid = y - _curve(x, theta)
    cands = [m for m in CANDIDATES if m <= n - MIN_BEFORE and m <= 0.6 * n]
    if not cands:
        return None
    # Screen: the full fit bends towards a break but cannot follow a fall, so a real break
    # leaves the newest residuals clearly negative even there.  The scale comes from
    # successive differences, which a break does not inflate (the full fit's residual noise
    # it does), and which understate persistent noise: the screen errs towards testing.
    scale = max(_screen_scale(y), 1e-4 * value_span(value_range))
    screen = min(float(w @ resid[-m:]) / (scale * float(np.sqrt(w @ w)))
                 for m in cands for w in _shapes(m))
    if screen > -Z_SCREEN:
        return None
    # The linearised screen of every candidate at once; only those near the threshold are
    # refitted exactly.
    # A full fit that does not rise (a collapse can bend it into a falling step) is no point
    # to linearise the rise before the fall around: then every candidate is refitted.
    rising = theta[0] - theta[3] >= min_drop
    near = (linear_z(x, y, theta, fit_r0, cands) < -(Z_BREAK - MARGIN) if rising
            else np.ones(len(cands), dtype=bool))
    best: tuple[float, int, Theta, float, float, float] | None = None
    for m in (m for m, keep in zip(cands, near, strict=True) if keep):
        k = n - m
        th = refit(x[:k], y[:k], theta)
        if th[0] - th[3] < min_drop:
            continue  # no rise before it: a run that never climbed cannot break off its climb
        z, sd, tau, dof = exact_z(x, y, k, th, fit_r0)
        z = as_normal_z(z, dof)
        if best is None or z < best[0]:
            best = (z, k, th, sd, tau, dof)
    if best is None or best[0] > -Z_BREAK:
        return None
    z, k, th, sd, t, dof = best
    # Confirm with the honest uncertainty of the curve before the break: the local (Laplace)
    # one above is too narrow when that curve is itself still unsettled (a banana), and a
    # noise bump that made it overshoot would then pass for a fall.  The grid posterior of
    # the pre-break points is ~5 ms, spent only on candidates that passed.
    curves_post = _posterior_curves(x[:k], y[:k], x[k:], r0, value_range, th, fit_r0)
    z = min(_confirm(w, y[k:], curves_post, _ar1_cov(n - k, sd, t)) for w in _shapes(n - k))
    z = as_normal_z(z, dof)
    if z > -Z_BREAK:
        return None
    # Where the fall starts (searched from a little before the candidate): ``start`` is where
    # it most likely begins, what the result reports and the new regime is fitted from.  The
    # verdict below is judged from ``first``, the earliest start the residuals allow (the most
    # negative suffix sum, which leans early): a later start leaves fewer "recent" points and
    # a higher level "reached" before it, and the tests then pass on noise (bench/alerts.py,
    # judged from the onset: both false alarms on stable runs fired earlier, and one broken
    # run fired before its change and twice).
    r_all = y - _curve(x, th)
    lo = max(MIN_BEFORE, k - 10)
    start = lo + fall_onset(r_all[lo:])
    first = min(start, lo + int(np.argmin(np.cumsum(r_all[lo:][::-1])[::-1])))
    recent = min(RECENT, n - first)
    level = float(y[-recent:].mean())
    # The drop: where the curve was heading at the newest points (posterior mean) minus the
    # recent level; its interval carries both the curve's uncertainty and the level's noise.
    was = curves_post[:, -recent:].mean(axis=1)
    drop = float(was.mean()) - level
    level_sd = mean_noise_sd(sd, t, recent)
    half = 1.96 * float(np.sqrt(float(was.var()) + level_sd**2))
    if drop < min_drop or drop - half < min_drop / 2:
        # Too small to matter, or not clearly more than half of that: a short dip of a few
        # evaluations under a curve the noise had lifted is not worth withholding A for.
        return None
    if float(r_all[-recent:].mean()) > -min_drop / 2:
        return None  # the newest points are back on the curve
    # A break is a fall: the recent level must lie clearly below the level the run had reached
    # where the departure starts.  A run still rising, only more slowly than an extrapolated
    # curve promised, has a lower ceiling than that curve (which the refits of the whole run
    # report), not a break: that is how a pre-break curve that overshot on persistent noise
    # raised false alarms.
    # "Reached": the curve there, or the evaluations just before it when they are lower (a
    # curve that overshot is not a level the run ever showed).
    reached = float(_curve(x[first:first + 1], th)[0])
    reached = min(reached, float(y[max(first - RECENT, 0):first].mean()))
    if level + FALL_Z * level_sd > reached:
        return None
    return Break(
        index=start, drop=drop, drop_ci=(drop - half, drop + half), z=z,
        level=level, level_ci=(level - 1.96 * level_sd, level + 1.96 * level_sd),
        n_after=n - start, theta_before=th,
    )
