"""95% intervals that stay honest under serially correlated evaluation noise.

Every evaluation of a run reuses the same prompt set, so the noise is autocorrelated: plain
least-squares intervals (which assume independent points) are far too narrow.  We use

* **Effective sample size.**  The autocorrelation time ``tau`` of the residuals (an AR(1)
  model from the bias-corrected lag-1 coefficient, averaged over that coefficient's
  uncertainty) inflates the noise variance; the t quantile takes the degrees of freedom of the
  variance estimate.
* **A grid posterior** (``ar1.py``): AR(1) noise with rho and sigma integrated out, Jeffreys'
  prior over (ln C_mid, B), A and R0 in closed form per cell, a few thousand draws.  A's
  interval, B's and C_mid's are posterior quantiles; the forecast is the posterior median of
  the curve at the target (averaging over the plausible curves, not betting on the best one);
  the band is the draws' quantiles.  ``bench/calibration.py`` shows why: the local (Laplace +
  profile) intervals it replaced covered the true A in ~76% of the runs they called
  identified, and a white-noise posterior with the effective-sample-size correction above
  (estimated once, from the point fit) missed on persistent noise (rho 0.95: 55% coverage).
  The effective-sample-size model still gives the noise a prediction adds, and the break test.
* **Prediction interval for an evaluation.**  Users compare a forecast with the evaluation the
  run will *show* at the target, not with the (unobservable) mean curve.  That evaluation is the
  curve plus evaluation noise, so ``predicted_interval`` widens the curve's interval on each side
  by the noise (root sum of squares of the two 95% half-widths).  The noise of one evaluation is
  the residuals' marginal standard deviation, corrected for the degrees of freedom the fit soaks
  up from correlated noise (``eval_sd``); the noise of the mean of ``k`` consecutive evaluations
  follows from the AR(1) coefficient implied by ``tau`` (:func:`mean_noise_sd`).
* **Misspecification allowance beyond the window.**  Real curves are not exact sigmoids (many
  drift slowly up or down late in a run) and nothing inside the window foretells it.  Beyond
  the window's end ``C_end`` prediction intervals are widened (in quadrature) by
  ``1.96 * DRIFT_RATE * ln(C / C_end)``, a rate learned on the public real curves with
  leave-one-out (see ``DRIFT_RATE``); ``FitOptions.drift_rate=0`` trusts the sigmoid.  Inside
  the window, where the data pin the curve down, nothing is added.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from . import ar1
from .model import FloatArray, curves_many, frac, jacobian_x, value_span

N_STORED = 400  # posterior draws kept in the result (bands after a reload)
# Misspecification allowance: real runs drift off the sigmoid after the fit window (late
# slow gains or declines that nothing inside the window foretells).  We model that drift as
# a normal departure with sd DRIFT_RATE per unit ln(C / window end).  The rate is learned
# from the 47 public real curves (bench/calibration.py --learn-drift, leave-one-out: each
# run's allowance learned on the other 46): the smallest rate that their forecast misses
# beyond the curve and noise intervals need, at the 95th percentile.  It applies to
# prediction intervals only (what the run will show), never to A's interval; a project's own
# learned allowance (hindcasts of its finished runs) widens a claim of A too (a_with_drift).
DRIFT_RATE = 0.03
M_CLIP = 30.0  # |ln(C_mid / c0)| beyond this is meaningless (and overflows)
# Model error of the ceiling.  An evaluation set mixes prompts of different difficulty, so its
# expected pass rate is a mixture of sigmoids, and the one sigmoid fitted to it has a ceiling a
# little off the set's: noise-free, with the per-prompt spread of ``synth.make_prompt_run``,
# by 0.007 (at most 0.010) on windows ending at 2 x C_mid, 0.001-0.002 at 3 x and 0.003-0.004
# at 5 x.  No amount of data removes it, so A's 95% interval is widened on each side (in
# quadrature) by 1.96 times this sd; ``bench/calibration.py``: A coverage among identified runs
# 92.4% -> ~95% at 5 x C_mid, 93.8% -> ~95% at 3 x, for 5-10% wider intervals.
A_MODEL_SD = 0.004


RHO_MAX = 0.985  # beyond this the noise is a random walk and no interval is meaningful
_Z = np.linspace(-2.5, 2.5, 21)
_ZW = np.exp(-0.5 * _Z**2) / np.exp(-0.5 * _Z**2).sum()


def lag1_rho(e: FloatArray) -> tuple[float, float]:
    """Bias-corrected lag-1 autocorrelation of fit residuals ``e`` and its standard error.

    Short series bias the lag-1 autocorrelation of fit residuals strongly towards zero (the
    fit soaks up low frequencies).  Simulating the sigmoid fit on AR(1) noise gives
    E[rho_hat] ~= rho - (2.5 + 8.5 rho) / n for n = 25..75; we invert that.
    """
    n = e.size
    if n < 6:
        return 0.0, 0.0
    e = e - e.mean()
    var = float(e @ e)
    if var <= 0:
        return 0.0, 0.0
    r1 = float(e[1:] @ e[:-1]) / var
    rho = float(np.clip((r1 + 2.5 / n) / max(1.0 - 8.5 / n, 0.5), 0.0, RHO_MAX))
    return rho, float(np.sqrt(max(1.0 - rho * rho, 0.0) / n))


def _tau_of(rho: FloatArray) -> FloatArray:
    r = np.clip(rho, 0.0, RHO_MAX)
    return (1.0 + r) / (1.0 - r)


def autocorr_time(e: FloatArray) -> float:
    """Integrated autocorrelation time of residuals ``e`` (1 for white noise), AR(1) model.

    ``tau = (1 + rho) / (1 - rho)`` is steep near rho = 1, where a few dozen residuals pin rho
    down poorly: a run estimated at 0.85 may well be at 0.95, with four times the variance.
    Intervals scale with tau, so we average tau over the estimate's uncertainty (normal,
    bias-corrected centre) rather than plug in the estimate; near zero this changes little,
    near one it is what keeps intervals honest.  (A sum of sample autocorrelations, Geyer's
    estimator, was tried first: on 40-100 residuals it scatters by a factor of two to three
    and its high draws made intervals absurdly wide.)
    """
    rho, se = lag1_rho(e)
    return float(_ZW @ _tau_of(rho + se * _Z))


@dataclass(frozen=True)
class Uncertainty:
    """The noise model of a point fit, and local (Laplace) intervals for the status check of
    a fit run without the posterior (``intervals=False``)."""

    sigma: float
    tau: float
    q: float  # t quantile used for 95%
    ci_a: tuple[float, float]
    eval_sd: float  # standard deviation of one evaluation around the curve


def _noise(e: FloatArray, p: int) -> tuple[float, float, float]:
    """(sigma, tau, 95% t quantile).  The t law's degrees of freedom are those of the
    variance estimate: for AR(1) noise a sample variance is worth n / tau2 independent
    squares, tau2 = (1 + rho^2) / (1 - rho^2) (less than tau: squares decorrelate faster)."""
    n = e.size
    sigma = float(np.sqrt(max(float(e @ e) / max(n - p, 1), 1e-12)))
    tau = autocorr_time(e)
    rho = (tau - 1.0) / (tau + 1.0)  # the AR(1) coefficient with that autocorrelation time
    tau2 = (1.0 + rho * rho) / (1.0 - rho * rho)
    dof = max(n / tau2 - p, 2.0)
    # stdtrit is t.ppf without the distribution machinery (~2 us instead of ~90 us).
    return sigma, tau, float(special.stdtrit(dof, 0.975))


def eval_sd(sigma: float, tau: float, n: int, p: int) -> float:
    """Marginal standard deviation of one evaluation around the curve.

    ``sigma`` divides the SSR by ``n - p``, which is unbiased for independent noise only.  With
    correlated noise each parameter absorbs about ``tau`` points' worth of (low-frequency) noise,
    so the residuals under-represent it: ``E[SSR] ~= sigma_marg^2 (n - p tau)``.  The divisor is
    floored at ``n / 2`` (at most a 41% correction) so a short, strongly correlated series does
    not blow it up; those fits are unidentified and wide anyway.
    """
    ssr = sigma * sigma * max(n - p, 1)
    return float(np.sqrt(ssr / max(n - p * tau, n / 2.0, 1.0)))


def mean_noise_sd(sd: float, tau: float, k: int) -> float:
    """Standard deviation of the mean of ``k`` consecutive evaluations (AR(1) with ``tau``).

    ``rho = (tau - 1) / (tau + 1)`` is the AR(1) coefficient whose autocorrelation time is ``tau``;
    ``Var(mean) = sd^2 / k^2 * sum_ij rho^|i-j|``.  ``k = 1`` gives ``sd``.
    """
    k = max(int(k), 1)
    rho = (max(tau, 1.0) - 1.0) / (max(tau, 1.0) + 1.0)
    lags = np.arange(1, k)
    s = k + 2.0 * float(np.sum((k - lags) * rho**lags))
    return float(sd * np.sqrt(s) / k)


def allowance_rate(knots: tuple[tuple[float, float], ...], beyond: float) -> float | None:
    """The drift rate (sd per unit ``beyond``) a per-horizon allowance gives a forecast
    ``beyond`` = ln(target / window end) past its window: the sd of ``knots`` ((horizon, sd),
    sorted by horizon; ``hindcast.allowance_knots``) interpolated linearly from zero at the
    window's end, grown in proportion past the farthest horizon.  None when ``beyond`` is not
    positive (no forecast past the window) or there are no knots."""
    if not knots or not beyond > 0:
        return None
    xs = [0.0] + [k[0] for k in knots]
    ys = [0.0] + [k[1] for k in knots]
    sd = float(np.interp(beyond, xs, ys)) if beyond <= xs[-1] else ys[-1] * beyond / xs[-1]
    return sd / beyond


def drift_rate_at(drift_rate: float | None, allowance: tuple[tuple[float, float], ...] | None,
                  target: float | None, window_end: float | None, unit: float = 1.0) -> float:
    """The drift rate a fit takes (``FitOptions.drift_rate``, ``drift_allowance``): an
    explicit rate; else the per-horizon allowance at the fit's own distance from its window's
    end to its target; else the default ``DRIFT_RATE`` (learned on [0, 1] pass rates).  The
    allowance and the default are in units of the value range: times its width ``unit``; an
    explicit rate is in the metric's own units."""
    if drift_rate is not None:
        return max(float(drift_rate), 0.0)
    if allowance and target is not None and window_end is not None and window_end > 0:
        rate = allowance_rate(allowance, float(np.log(max(target, 1e-300) / window_end)))
        if rate is not None:
            return rate * unit  # the allowance is in units of the value range (hindcast.py)
    return DRIFT_RATE * unit


def allowance_at_reach(allowance: tuple[tuple[float, float], ...] | None, target: float | None,
                       window_end: float | None, unit: float = 1.0) -> float:
    """The sd a project's learned drift allowance (``hindcast.allowance_knots``) gives at the
    reach a claim of A answers for: the run's target when it lies beyond the window, else the
    farthest horizon the project's hindcasts were checked over (no target: how far its finished
    runs vouch), in the metric's units (the allowance's, times the value range's width
    ``unit``).  0 without an allowance, or with the target inside the window."""
    if not allowance or window_end is None or not window_end > 0:
        return 0.0
    if target is not None:
        reach = float(np.log(max(target, 1e-300) / window_end))
    else:
        reach = float(allowance[-1][0])
    rate = allowance_rate(allowance, reach)
    return 0.0 if rate is None else rate * reach * unit


def a_with_drift(ci_a: tuple[float, float], a_point: float, sd: float,
                 value_range: tuple[float, float]) -> tuple[float, float]:
    """A's interval widened on each side, in quadrature, by ``1.96 sd`` of drift beyond the
    window (``allowance_at_reach``), kept inside the value range.

    Why A's interval and not only the forecast's: a project whose finished runs strayed past
    their own forecasts (a slow drift after the curve levelled off) cannot vouch for a ceiling
    any closer than that.  On sampled late-drift runs (``bench/calibration_sampled.py``, 160 a
    family, columns ``cl-prj`` and ``>.02-p``) claims whose interval missed the run's end
    level by more than 0.02 went from 13 of 187 to 1 of 142; on the families that follow
    their curve the learned allowance is about zero and no claim changed."""
    if not sd > 0:
        return ci_a
    lo, hi = value_range
    a_lo, a_hi = ci_a
    d = 1.96 * sd
    return (max(a_point - float(np.hypot(a_point - a_lo, d)), lo),
            min(a_point + float(np.hypot(a_hi - a_point, d)), hi))


def extra_half_width(
    q: float, sd_noise: float, sd_drift: float, log_beyond: float | FloatArray
) -> float | FloatArray:
    """95% half-width of what a prediction adds to the curve band: noise and drift allowance.

    ``log_beyond`` = ln(C / C_end) of the prediction point (negative inside the window); the
    noise takes the fit's t quantile ``q``, the drift (a property of the run family, not
    estimated from this run) the normal one.
    """
    return np.hypot(q * sd_noise, 1.96 * sd_drift * np.maximum(log_beyond, 0.0))


def widen(
    lo: FloatArray, hi: FloatArray, center: FloatArray, half_noise: float | FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Add a symmetric 95% noise half-width to each side of an interval (root sum of squares)."""
    lo, hi, center = (np.asarray(v, dtype=float) for v in (lo, hi, center))
    d_lo = np.maximum(center - lo, 0.0)
    d_hi = np.maximum(hi - center, 0.0)
    return (center - np.hypot(d_lo, half_noise), center + np.hypot(d_hi, half_noise))


def analyse(
    x: FloatArray,
    y: FloatArray,
    theta: tuple[float, float, float, float],
    fit_r0: bool,
    value_range: tuple[float, float],
) -> Uncertainty:
    """Noise model and local 95% interval of A for the point fit ``theta = (A, m, B, R0)``."""
    lo, hi = value_range
    a, m, b, r0 = theta
    p = 4 if fit_r0 else 3
    e = y - (r0 + (a - r0) * frac(x, m, b))
    sigma, tau, q = _noise(e, p)
    jac = jacobian_x(x, a, m, b, r0, fit_r0)
    cov = sigma * sigma * tau * np.linalg.pinv(jac.T @ jac)
    half = q * float(np.sqrt(max(cov[0, 0], 0.0)))
    return Uncertainty(sigma=sigma, tau=tau, q=q, ci_a=(max(a - half, lo), min(a + half, hi)),
                       eval_sd=eval_sd(sigma, tau, int(e.size), p))


def band(
    compute: FloatArray, draws: FloatArray, envelope: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """95% band: draw quantiles, widened to the profile envelope where that is wider."""
    _, lo, hi = median_and_band(compute, draws, envelope)
    return lo, hi


def median_and_band(
    compute: FloatArray, draws: FloatArray, envelope: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(the draws' pointwise median curve, :func:`band`) from one evaluation of the draws: the
    dashboard draws both for every run it shows.  The median is ``np.median``'s, as for
    ``predict`` and the forecast at the target, so a chart's line and the forecast agree to
    the last digit."""
    shape = np.shape(compute)
    c = np.asarray(compute, dtype=float).reshape(-1)
    med = np.full(c.shape, np.nan)
    lo, hi = med.copy(), med.copy()
    if len(draws):
        v = curves_many(c, draws)
        med = np.median(v, axis=0)
        lo, hi = np.quantile(v, [0.025, 0.975], axis=0)
    if len(envelope):
        v = curves_many(c, envelope)
        lo = np.fmin(lo, v.min(0))
        hi = np.fmax(hi, v.max(0))
    return med.reshape(shape), lo.reshape(shape), hi.reshape(shape)


def q95(v: FloatArray) -> tuple[float, float]:
    """The central 95% interval of draws ``v``."""
    lo, hi = np.quantile(v, [0.025, 0.975])
    return float(lo), float(hi)


def a_interval(a: FloatArray, value_range: tuple[float, float]) -> tuple[float, float]:
    """A's 95% interval from its posterior draws, widened by the ceiling's model error
    (``A_MODEL_SD``, set for [0, 1]: times the value range's width) about the median and kept
    inside the value range."""
    lo, hi = q95(a)
    med = float(np.median(a))
    half = 1.96 * A_MODEL_SD * value_span(value_range)
    w_lo = med - float(np.hypot(max(med - lo, 0.0), half))
    w_hi = med + float(np.hypot(max(hi - med, 0.0), half))
    return max(w_lo, value_range[0]), min(w_hi, value_range[1])


def thin_draws(raw: FloatArray) -> FloatArray:
    """The subsample of posterior draws (rows A, B, C_mid, R0) a result keeps: the forecast and
    the intervals at the target are computed from it, so a reloaded result reproduces them."""
    step = max(1, raw.shape[0] // N_STORED)
    return raw[::step][:N_STORED]


def at_target(
    target: float, stored: FloatArray, q: float, noise_sd: float, drift_rate: float,
    beyond: float, value_range: tuple[float, float],
) -> tuple[float, tuple[float, float], tuple[float, float]]:
    """(forecast, curve interval, prediction interval) at ``target`` from stored draws: the
    posterior median of the curve, its 95% band, and that band widened by the noise of one
    evaluation and the misspecification allowance ``beyond`` = ln(target / window end)."""
    lo, hi = value_range
    t = np.array([target])
    med, c_lo, c_hi = median_and_band(t, stored, np.empty((0, 4)))
    forecast = float(med[0])
    extra = extra_half_width(q, noise_sd, drift_rate, beyond)
    p_lo, p_hi = widen(c_lo, c_hi, np.array([forecast]), extra)
    return (forecast, (float(c_lo[0]), float(c_hi[0])),
            (float(max(p_lo[0], lo)), float(min(p_hi[0], hi))))


@dataclass(frozen=True)
class PosteriorSummary:
    a_median: float
    ci_a: tuple[float, float]
    ci_b: tuple[float, float]
    ci_cmid: tuple[float, float]
    forecast: float | None  # posterior median of the curve at the target
    curve_interval: tuple[float, float] | None
    predicted_interval: tuple[float, float] | None
    draws: FloatArray  # rows (A, B, C_mid, R0), a subsample of the posterior draws
    rho: tuple[float, float]  # posterior (mean, sd) of the noise's AR(1) coefficient


def posterior_summary(
    x: FloatArray,
    y: FloatArray,
    r0: float | None,
    c0: float,
    value_range: tuple[float, float],
    unc: Uncertainty,
    m_axis: FloatArray,
    b_axis: FloatArray,
    target: float | None,
    seed: int = 0,
    drift_rate: float = DRIFT_RATE,
    rho_prior: tuple[float, float] | None = None,
    b_prior: tuple[float, float] | None = None,
) -> PosteriorSummary:
    """Intervals and the point forecast from the grid posterior (``ar1.py``)."""
    post, rho = ar1.sample(x, y, r0, value_range, m_axis, b_axis, seed=seed,
                           rho_prior=rho_prior, b_prior=b_prior)
    a, m, b, r0d = post.draws.T
    cm = c0 * np.exp(np.clip(m, -M_CLIP, M_CLIP))
    stored = thin_draws(np.column_stack([a, b, cm, r0d]))
    forecast = curve_iv = pred_iv = None
    if target is not None:
        beyond = float(np.log(max(target, 1e-300) / c0)) - float(x[-1])
        forecast, curve_iv, pred_iv = at_target(target, stored, unc.q, unc.eval_sd, drift_rate,
                                                beyond, value_range)
    return PosteriorSummary(
        a_median=float(np.median(a)), ci_a=a_interval(a, value_range), ci_b=q95(b),
        ci_cmid=q95(cm),
        forecast=forecast, curve_interval=curve_iv, predicted_interval=pred_iv,
        draws=stored, rho=(float(rho.mean()), float(rho.std())),
    )
