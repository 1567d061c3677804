"""95% intervals that stay honest under serially correlated evaluation noise.

Every evaluation of a run reuses the same prompt set, so the noise is strongly autocorrelated:
plain least-squares intervals (which assume independent points) are far too narrow.  We use

* **Effective sample size.**  The integrated autocorrelation time ``tau`` of the residuals
  (Geyer's initial-positive-sequence estimator, floored by a bias-corrected AR(1) estimate,
  since short series underestimate correlation) inflates the noise variance; the t quantile
  uses ``n / tau - p`` degrees of freedom.
* **Laplace (local) draws.**  ``N(theta_hat, sigma^2 tau (J'J)^-1)`` in (A, ln C_mid, B[, R0]),
  which is accurate once the run is past its knee and gives parameter draws for prediction
  bands and comparison probabilities.
* **Profile over the global grid.**  Far from the knee the likelihood is a long banana that a
  local approximation misses.  The grid already holds, for every (C_mid, B) cell, the SSR as an
  exact quadratic in A, so the profile-likelihood set ``SSR <= SSR_min + q^2 sigma^2 tau`` is
  free to evaluate; A's interval, the curve's interval at the target and the band are the hull
  of both.
* **Prediction interval for an evaluation.**  Users compare a forecast with the evaluation the
  run will *show* at the target, not with the (unobservable) mean curve.  That evaluation is the
  curve plus evaluation noise, so ``predicted_interval`` widens the curve's interval on each side
  by the noise (root sum of squares of the two 95% half-widths).  The noise of one evaluation is
  the residuals' marginal standard deviation, corrected for the degrees of freedom the fit soaks
  up from correlated noise (``eval_sd``); the noise of the mean of ``k`` consecutive evaluations
  follows from the AR(1) coefficient implied by ``tau`` (:func:`mean_noise_sd`).
* **Misspecification allowance beyond the window.**  Real curves are not exact sigmoids (many
  drift slowly up or down late in a run), and the sigmoid family cannot express a drift that
  it does not see.  We ask how large a drift the data themselves cannot rule out: add a linear
  term ``beta * ln(C / C_end)`` to the model, linearise (flat prior on ``beta``, noise inflated
  by ``tau`` as above) and take the standard error ``drift_sd`` of ``beta`` jointly with the
  sigmoid parameters.  Prediction intervals beyond the window's end ``C_end`` are widened by
  ``q * drift_sd * ln(C / C_end)`` (in quadrature with the rest); inside the window, where the
  data pin the curve down, by nothing.  This has no tuned constant: it was chosen a priori (the
  standard model-expansion argument) and checked only on synthetic runs, where the sigmoid is
  the true model and it costs some width (synthetic ``ok`` coverage of a new evaluation rises
  from ~93% to ~96%).  It does not cover a late change the window shows no trace of.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .grid import Grid, bin_data
from .model import FloatArray, curves_many, frac, jacobian_x

N_DRAWS = 200
N_ENVELOPE_POINTS = 8
M_CLIP = 30.0  # |ln(C_mid / c0)| beyond this is meaningless (and overflows)


def autocorr_time(e: FloatArray) -> float:
    """Integrated autocorrelation time of residuals ``e`` (1 for white noise)."""
    n = e.size
    if n < 6:
        return 1.0
    e = e - e.mean()
    var = float(e @ e)
    if var <= 0:
        return 1.0
    kmax = min(n // 3, 200)
    f = np.fft.rfft(e, 2 * n)
    acf = np.fft.irfft(f * np.conj(f))[: kmax + 1] / var
    # Geyer: sum consecutive pairs while their sum stays positive.
    tau = -1.0
    for j in range(0, kmax - 1, 2):
        pair = acf[j] + acf[j + 1]
        if pair <= 0:
            break
        tau += 2.0 * pair
    # Short series bias the lag-1 autocorrelation of fit residuals strongly towards zero (the
    # fit soaks up low frequencies).  Simulating the sigmoid fit on AR(1) noise gives
    # E[rho_hat] ~= rho - (2.5 + 8.5 rho) / n for n = 25..75; invert that, then lean half a
    # standard error towards more correlation, since underestimating tau is what makes
    # intervals overconfident.
    r1 = float(acf[1])
    rho = (r1 + 2.5 / n) / max(1.0 - 8.5 / n, 0.5)
    rho = rho + 0.5 * np.sqrt(max(1.0 - rho * rho, 0.0) / n)
    rho = min(rho, 0.95)
    tau_ar = (1.0 + rho) / (1.0 - rho) if rho > 0 else 1.0
    return float(np.clip(max(tau, tau_ar), 1.0, max(n / 4.0, 1.0)))


@dataclass(frozen=True)
class Uncertainty:
    sigma: float
    tau: float
    q: float  # t quantile used for 95%
    ci_a: tuple[float, float]
    ci_b: tuple[float, float]
    ci_cmid: tuple[float, float]
    predicted_interval: tuple[float, float] | None  # one evaluation at the target
    curve_interval: tuple[float, float] | None  # the mean curve at the target
    eval_sd: float  # standard deviation of one evaluation around the curve
    drift_sd: float  # standard error of a linear drift per unit ln(compute) (misspecification)
    draws: FloatArray  # rows (A, B, C_mid, R0)
    envelope: FloatArray  # rows (A, B, C_mid, R0)


def _noise(e: FloatArray, p: int) -> tuple[float, float, float]:
    n = e.size
    sigma = float(np.sqrt(max(float(e @ e) / max(n - p, 1), 1e-12)))
    tau = autocorr_time(e)
    dof = max(n / tau - p, 2.0)
    return sigma, tau, float(stats.t.ppf(0.975, dof))


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


def drift_sd(jac: FloatArray, x: FloatArray, s2: float) -> float:
    """Standard error of ``beta`` in ``curve + beta * (x - x_end)``, jointly with the curve."""
    je = np.column_stack([jac, x - x[-1]])
    cov = np.linalg.pinv(je.T @ je)
    return float(np.sqrt(max(s2 * cov[-1, -1], 0.0)))


def extra_half_width(
    q: float, sd_noise: float, sd_drift: float, log_beyond: float | FloatArray
) -> float | FloatArray:
    """95% half-width of what a prediction adds to the curve band: noise and drift allowance.

    ``log_beyond`` = ln(C / C_end) of the prediction point (negative inside the window).
    """
    return q * np.hypot(sd_noise, sd_drift * np.maximum(log_beyond, 0.0))


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
    c0: float,
    value_range: tuple[float, float],
    grid: Grid | None,
    ssr_best: float,
    target: float | None,
    x_lo: float,
    full: bool = True,
    seed: int = 0,
) -> Uncertainty:
    """Intervals for the point fit ``theta = (A, m, B, R0)`` (internal coordinates)."""
    lo, hi = value_range
    a, m, b, r0 = theta
    p = 4 if fit_r0 else 3
    e = y - (r0 + (a - r0) * frac(x, m, b))
    sigma, tau, q = _noise(e, p)
    s2 = sigma * sigma * tau
    sd_eval = eval_sd(sigma, tau, int(e.size), p)

    jac = jacobian_x(x, a, m, b, r0, fit_r0)
    sd_drift = drift_sd(jac, x, s2)
    cov = s2 * np.linalg.pinv(jac.T @ jac)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    ci_a = [a - q * sd[0], a + q * sd[0]]
    ci_m = [m - q * sd[1], m + q * sd[1]]
    ci_b = [b - q * sd[2], b + q * sd[2]]

    draws = np.empty((0, 4))
    envelope = np.empty((0, 4))
    pred_iv: tuple[float, float] | None = None
    curve_iv: tuple[float, float] | None = None
    if full:
        # Laplace draws, widened from z to t so small n_eff is not overconfident.
        rng = np.random.default_rng(seed)
        evals, evecs = np.linalg.eigh((cov + cov.T) / 2.0)
        root = evecs * np.sqrt(np.maximum(evals, 0.0))
        z = rng.standard_normal((N_DRAWS, p)) @ root.T * (q / 1.96)
        th = np.array(theta[:p]) + z
        d_a = np.clip(th[:, 0], lo, hi)
        d_b = np.maximum(th[:, 2], 1e-3)
        d_r0 = np.clip(th[:, 3], lo, hi) if fit_r0 else np.full(N_DRAWS, r0)
        # Clip ln(C_mid / c0): far-off draws of an unidentified fit would overflow exp().
        d_cm = c0 * np.exp(np.clip(th[:, 1], -M_CLIP, M_CLIP))
        draws = np.column_stack([d_a, d_b, d_cm, d_r0])
        # Far from the knee the Gaussian is a poor description of a banana-shaped likelihood
        # and many draws are curves the data rule out; drop those (SSR beyond the 99% level a
        # Gaussian draw would reach), so bands stay anchored to the data where there are data.
        binned = bin_data(x, y)
        pred = curves_many(c0 * np.exp(binned.x), draws)
        ssr_d = ((pred - binned.y) ** 2) @ binned.w + binned.ssw
        keep = ssr_d <= ssr_best + stats.chi2.ppf(0.99, p) * (q / 1.96) ** 2 * s2
        if keep.sum() >= 10:  # otherwise keep them all rather than report no band at all
            draws = draws[keep]

        env_rows: list[FloatArray] = []
        if grid is not None:
            thr = ssr_best + q * q * s2
            ok = grid.ssr <= thr
            if np.any(ok):
                half = np.sqrt(np.maximum(thr - grid.ssr_u[ok], 0.0) / grid.k_a[ok])
                a_lo = np.clip(grid.a_u[ok] - half, lo, hi)
                a_hi = np.clip(grid.a_u[ok] + half, lo, hi)
                ci_a = [min(ci_a[0], a_lo.min()), max(ci_a[1], a_hi.max())]
                ci_m = [min(ci_m[0], grid.m[ok].min()), max(ci_m[1], grid.m[ok].max())]
                ci_b = [min(ci_b[0], grid.b[ok].min()), max(ci_b[1], grid.b[ok].max())]
                cm = c0 * np.exp(grid.m[ok])
                cand = np.concatenate([
                    np.column_stack([a_lo, grid.b[ok], cm, grid.r0[ok]]),
                    np.column_stack([a_hi, grid.b[ok], cm, grid.r0[ok]]),
                ])
                # Keep only the extreme members: the sets that bound the band at a few
                # compute values from the start of the fit window to well past the target.
                t_hi = max(target or c0, c0) * 4.0
                pts = np.geomspace(c0 * np.exp(x_lo), t_hi, N_ENVELOPE_POINTS)
                if target is not None:
                    pts = np.append(pts, target)
                vals = curves_many(pts, cand)
                idx = np.unique(np.concatenate([vals.argmin(0), vals.argmax(0)]))
                env_rows.append(cand[idx])
        envelope = np.concatenate(env_rows) if env_rows else np.empty((0, 4))
        if target is not None:
            t = np.array([target])
            c_lo, c_hi = band(t, draws, envelope)
            curve_iv = (float(c_lo[0]), float(c_hi[0]))
            x_t = np.log(max(target, 1e-300) / c0)
            centre = r0 + (a - r0) * frac(x_t, m, b)
            # c0 is the window's last compute, so ln(target / C_end) = x_t - x[-1].
            extra = extra_half_width(q, sd_eval, sd_drift, x_t - float(x[-1]))
            p_lo, p_hi = widen(c_lo, c_hi, np.array([centre]), extra)
            pred_iv = (float(max(p_lo[0], lo)), float(min(p_hi[0], hi)))

    ci_a = [max(ci_a[0], lo), min(ci_a[1], hi)]
    ci_m = [max(ci_m[0], -M_CLIP), min(ci_m[1], M_CLIP)]
    return Uncertainty(
        sigma=sigma, tau=tau, q=q,
        ci_a=(float(ci_a[0]), float(ci_a[1])),
        ci_b=(float(max(ci_b[0], 0.0)), float(ci_b[1])),
        ci_cmid=(float(c0 * np.exp(ci_m[0])), float(c0 * np.exp(ci_m[1]))),
        predicted_interval=pred_iv, curve_interval=curve_iv, eval_sd=sd_eval,
        drift_sd=sd_drift,
        draws=draws, envelope=envelope,
    )


def band(
    compute: FloatArray, draws: FloatArray, envelope: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """95% band: draw quantiles, widened to the profile envelope where that is wider."""
    c = np.asarray(compute, dtype=float)
    lo = np.full(c.shape, np.nan)
    hi = np.full(c.shape, np.nan)
    if len(draws):
        v = curves_many(c, draws)
        lo, hi = np.quantile(v, 0.025, axis=0), np.quantile(v, 0.975, axis=0)
    if len(envelope):
        v = curves_many(c, envelope)
        lo = np.fmin(lo, v.min(0))
        hi = np.fmax(hi, v.max(0))
    return lo, hi
