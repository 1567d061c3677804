"""``predicted_interval`` is a prediction interval for what the run will show at the target."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalewatch.server.fitting import (
    FitOptions,
    FitResult,
    fit_curve,
    predict,
    predict_band,
    predict_interval,
    predict_with_band,
)
from scalewatch.server.fitting.intervals import mean_noise_sd
from scalewatch.server.fitting.synth import TABLE1, ar1, make_run


def _backtests(n_runs: int, seed: int) -> list[tuple[FitResult, float, float, float]]:
    """Fits of the first half of synthetic Table-1 runs: (result, truth at target, sigma, rho)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_runs):
        _, c_mid, b, a = TABLE1[i % len(TABLE1)]
        budget = float(rng.choice([16000.0, 32000.0, 64000.0]))
        sigma, rho = rng.uniform(0.007, 0.013), rng.uniform(0.3, 0.8)
        c, y, truth = make_run(a, b, c_mid, budget, rng, r0=rng.uniform(0.25, 0.4),
                               n_evals=int(rng.integers(60, 161)), sigma=sigma, rho=rho)
        res = fit_curve(c, y, FitOptions(warmup=1500, fit_until=budget / 2,
                                         target_compute=budget))
        if res.status == "ok":
            out.append((res, float(truth[-1]), sigma, rho))
    return out


@pytest.fixture(scope="module")
def backtests() -> list[tuple[FitResult, float, float, float]]:
    return _backtests(120, 2024)


def test_covers_new_evaluations_at_the_target(backtests) -> None:
    # New evaluations at the target = the true curve + the run's evaluation noise.
    rng = np.random.default_rng(7)
    hits, stat_hits, curve_hits = [], [], []
    for res, truth, sigma, _ in backtests:
        new = truth + rng.normal(0.0, sigma, 50)
        lo, hi = res.predicted_interval
        hits.append(np.mean((new >= lo) & (new <= hi)))
        slo, shi = (v[0] for v in predict_interval(res, [res.target_compute],
                                                   misspecification=False))
        stat_hits.append(np.mean((new >= slo) & (new <= shi)))
        clo, chi = res.curve_interval
        curve_hits.append(clo <= truth <= chi)
        assert lo <= slo <= clo and hi >= shi >= chi  # nested: prediction > statistical > curve
    assert len(hits) >= 40
    # Here the sigmoid is the true model: the statistical interval (parameters + noise) is
    # calibrated (the issue's band, 90-97%, with room for 120 runs' sampling error), and the
    # misspecification allowance costs over-coverage.
    assert 0.90 <= np.mean(stat_hits) <= 0.98, np.mean(stat_hits)
    # With the allowance (learned on real curves, which drift off the sigmoid beyond the
    # window) it covers more: on exact sigmoids that is over-coverage by design.
    assert np.mean(hits) >= max(np.mean(stat_hits), 0.95), np.mean(hits)
    # The curve interval is for the noiseless curve and still covers it.
    assert 0.88 <= np.mean(curve_hits) <= 1.0, np.mean(curve_hits)


def test_mean_of_k_evaluations(backtests) -> None:
    # The mean of k consecutive (AR(1)-correlated) evaluations at the target.
    rng = np.random.default_rng(8)
    k = 10
    hits = []
    for res, truth, sigma, rho in backtests:
        lo, hi = (v[0] for v in predict_interval(res, [res.target_compute], n_evals=k,
                                                 misspecification=False))
        one_lo, one_hi = (v[0] for v in predict_interval(res, [res.target_compute],
                                                         misspecification=False))
        assert one_lo <= lo <= hi <= one_hi  # averaging k evaluations narrows it
        means = np.array([truth + ar1(k, sigma, rho, rng).mean() for _ in range(30)])
        hits.append(np.mean((means >= lo) & (means <= hi)))
    assert 0.88 <= np.mean(hits) <= 0.98, np.mean(hits)


def test_predict_interval_matches_result_and_survives_reload(backtests) -> None:
    res = backtests[0][0]
    lo, hi = predict_interval(res, [res.target_compute])
    assert (lo[0], hi[0]) == pytest.approx(res.predicted_interval, abs=1e-9)
    back = FitResult.from_dict(json.loads(json.dumps(res.to_dict(internal=True))))
    assert back.curve_interval == pytest.approx(res.curve_interval)
    grid = np.geomspace(res.fit_range[0], 4 * res.target_compute, 12)
    np.testing.assert_allclose(predict_interval(back, grid), predict_interval(res, grid),
                               atol=1e-5)
    # Wider than the curve band everywhere, and the misspecification allowance only grows
    # beyond the window: the extra width keeps increasing with extrapolation distance.
    blo, bhi = predict_band(res, grid)
    plo, phi = predict_interval(res, grid)
    assert np.all(plo <= blo + 1e-12) and np.all(phi >= bhi - 1e-12)
    beyond = grid > res.fit_range[1]
    extra = (phi - plo) - (bhi - blo)
    assert np.all(np.diff(extra[beyond]) > -1e-9)


def test_mean_noise_sd() -> None:
    assert mean_noise_sd(0.01, 1.0, 1) == pytest.approx(0.01)
    assert mean_noise_sd(0.01, 1.0, 4) == pytest.approx(0.005)  # white noise: 1/sqrt(k)
    # AR(1) with rho = 0.6 (tau = 4): exact variance of the mean of k.
    rho, k = 0.6, 8
    idx = np.arange(k)
    exact = 0.01 * np.sqrt((rho ** np.abs(idx[:, None] - idx[None, :])).sum()) / k
    assert mean_noise_sd(0.01, (1 + rho) / (1 - rho), k) == pytest.approx(exact)


@pytest.mark.parametrize("method", ["default", "curve_fit"])
def test_predict_with_band_is_predict_and_predict_band_at_once(method: str) -> None:
    """The dashboard draws a run's line and band from one evaluation of the draws: the same
    numbers as asking for each, with or without draws, at any array shape."""
    c, y, _ = make_run(0.6, 1.5, 3000.0, 12000.0, np.random.default_rng(5), n_evals=60)
    res = fit_curve(c, y, FitOptions(method=method, target_compute=40000.0))
    for at in (np.geomspace(10.0, 5e4, 37), np.array([[0.0, 100.0], [5000.0, 9e4]])):
        centre, lo, hi = predict_with_band(res, at)
        want_lo, want_hi = predict_band(res, at)
        assert centre.shape == lo.shape == hi.shape == at.shape
        np.testing.assert_allclose(centre, predict(res, at), rtol=0, atol=1e-12)
        np.testing.assert_allclose(lo, want_lo, rtol=0, atol=1e-12)
        np.testing.assert_allclose(hi, want_hi, rtol=0, atol=1e-12)
    assert bool(res.draws) == (method == "default")
