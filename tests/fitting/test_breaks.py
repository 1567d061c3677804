"""Runs that break mid-run: the engine says where, by how much, and what is left."""

from __future__ import annotations

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, fit_curve
from scalewatch.server.fitting.synth import make_run

C_MID, END = 2542.0, 8 * 2542.0


def _broken(seed: int, drop: float = 0.10, over: int = 20) -> tuple[np.ndarray, np.ndarray, int]:
    """A = 0.61 (Table 1 ScaleRL); from half its compute the values fall by `drop` over `over`
    evaluations and stay there."""
    rng = np.random.default_rng(seed)
    c, y, _ = make_run(0.61, 1.92, C_MID, END, rng, n_evals=100, rho=0.5, c_lin=1e-9)
    start = int(np.searchsorted(c, END / 2))
    return c, y - drop * np.clip((np.arange(c.size) - start) / over, 0.0, 1.0), start


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_break_is_located_sized_and_never_silence(seed: int) -> None:
    c, y, start = _broken(seed)
    steps = np.arange(c.size) * 100
    n = start + 30  # 30 evaluations after the fall began
    res = fit_curve(c[:n], y[:n], FitOptions(target_compute=END), steps=steps[:n])
    assert res.status != "insufficient_data", res.message
    brk = res.to_dict()["break"]
    assert brk is not None, res.message
    assert abs(brk["step"] - steps[start]) <= 8 * 100  # where it starts, within 8 evaluations
    assert 0.06 <= brk["drop"] <= 0.14 and brk["drop_ci"][0] > 0.02
    assert "broke at step" in res.message
    # What the user may expect at the end: bounded by the level it fell to, far below 0.61.
    assert brk["ceiling_upper"] < 0.58
    assert res.predicted_interval[1] <= brk["ceiling_upper"] + 0.05


@pytest.mark.parametrize("seed", range(6))
def test_a_sudden_fall_is_located_where_it_starts(seed: int) -> None:
    """A fall from one evaluation to the next (a data-mix switch) is placed within 2
    evaluations of where it starts: the Run page draws the break and fits the regime from
    there.  (The most negative residual suffix put such starts 3-14 evaluations early.)"""
    c, y, start = _broken(seed, over=1)
    steps = np.arange(c.size) * 100
    for n in (start + 20, start + 45):
        res = fit_curve(c[:n], y[:n], FitOptions(target_compute=END), steps=steps[:n])
        brk = res.to_dict()["break"]
        assert brk is not None, res.message
        assert abs(brk["step"] - steps[start]) <= 2 * 100, (n, brk["step"], steps[start])


def test_a_run_that_stays_down_for_long_keeps_its_break() -> None:
    c, y, start = _broken(3)
    res = fit_curve(c, y, FitOptions(target_compute=END), steps=np.arange(c.size))
    assert res.break_ is not None and res.status != "insufficient_data", res.message
    # Dozens of evaluations since the break, on a level the fit cannot pin a curve through:
    # the regime is "unidentified", not "too_few_points" (what it said whatever the count).
    assert res.break_["n_after"] >= 12 and res.status == "unidentified"
    assert res.break_["regime"] == "unidentified"


@pytest.mark.parametrize("seed", range(6))
def test_stable_runs_have_no_break(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    c, y, _ = make_run(0.61, 1.92, C_MID, END, rng, n_evals=100, rho=0.5, c_lin=1e-9)
    for n in (30, 50, 75, 100):
        res = fit_curve(c[:n], y[:n], FitOptions(target_compute=END))
        assert res.break_ is None, (n, res.message)
        assert res.to_dict()["break"] is None


def test_a_run_that_never_rose_does_not_break() -> None:
    c = np.linspace(0, 16000, 81)
    y = 0.6 - 0.2 * c / c[-1] + np.random.default_rng(0).normal(0, 0.005, c.size)
    res = fit_curve(c, y)
    assert res.break_ is None and res.status == "insufficient_data"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_screen_keeps_every_break_the_exact_test_finds(seed: int) -> None:
    """The linearised screen decides which candidates get an exact refit.  On broken and
    sliding runs, at every refit window after the change, the candidates it keeps must give
    the same verdict as the exact test over all candidates (a break or none), and the
    strongest departure among them must be as strong as the strongest overall, to within
    the noise of which of two overlapping segments wins."""
    from scalewatch.server.fitting import breaks as B
    from scalewatch.server.fitting.breakscreen import MARGIN, linear_z
    from scalewatch.server.fitting.fit import point_fit, prepare

    broken_windows = 0
    for drop, over in ((0.10, 20), (0.06, 40)):
        c, y, start = _broken(seed, drop, over)
        for n in range(start + 4, c.size + 1, 3):
            prep = prepare(c[:n], y[:n], FitOptions(target_compute=END))
            x, v, fit_r0 = prep.x, prep.y, prep.r0 is None
            theta = point_fit(x, v, prep.r0, (0.0, 1.0)).theta
            lengths = [m for m in B.CANDIDATES if m <= x.size - B.MIN_BEFORE and m <= 0.6 * x.size]
            keep = linear_z(x, v, theta, fit_r0, lengths) < -(B.Z_BREAK - MARGIN)
            exact, kept = np.inf, np.inf
            for m, kept_m in zip(lengths, keep, strict=True):
                k = x.size - m
                th = point_fit(x[:k], v[:k], prep.r0, (0.0, 1.0), theta).theta
                if th[0] - th[3] < B.MIN_DROP:
                    continue
                z = B.exact_z(x, v, k, th, fit_r0)[0]
                exact = min(exact, z)
                if kept_m:
                    kept = min(kept, z)
            assert (exact < -B.Z_BREAK) == (kept < -B.Z_BREAK), (drop, n, exact, kept)
            broken_windows += exact < -B.Z_BREAK
    assert broken_windows > 10  # the runs do break: the test compared something


def test_a_collapse_that_bent_the_full_fit_into_a_falling_step_is_a_break() -> None:
    """A run that rose and then lost 0.4: the full fit is a falling step, no basis for the
    linearised screen; the break is still found (the prefix refits leave that basin)."""
    c = np.linspace(150.0, 15000.0, 150)
    rng = np.random.default_rng(7)
    y = (0.3 + 0.31 / (1 + (2542.0 / c) ** 1.92)
         - np.where(c > 9000.0, 0.4 * (1 - np.exp(-(c - 9000.0) / 1500.0)), 0.0)
         + rng.normal(0, 0.005, c.size))
    res = fit_curve(c, y)
    assert res.break_ is not None, res.message
    assert res.break_["drop"] > 0.3 and 7500 < res.break_["compute"] < 9500


def test_the_screens_closed_form_noise_sums_match_the_matrix_ones() -> None:
    from scalewatch.server.fitting.breaks import _shapes
    from scalewatch.server.fitting.breakscreen import _ar1_weight_sums

    m = np.array([3.0, 8.0, 25.0, 128.0])
    rho = np.array([0.0, 0.5, 0.9, 0.98])
    step, ramp = _ar1_weight_sums(m, rho)
    for i, (mi, r) in enumerate(zip(m.astype(int), rho, strict=True)):
        cov = r ** np.abs(np.subtract.outer(np.arange(mi), np.arange(mi)))
        w_step, w_ramp = _shapes(mi)
        assert step[i] == pytest.approx(w_step @ cov @ w_step, rel=1e-12)
        assert ramp[i] == pytest.approx(w_ramp @ cov @ w_ramp, rel=1e-12)


def test_the_fall_onset_is_the_best_least_squares_hinge() -> None:
    """The vectorised search equals fitting every hinge (onset s, ramp w, depth in closed
    form) one by one and keeping the one that explains most of the residuals."""
    from scalewatch.server.fitting.breaks import ONSET_RAMPS, fall_onset

    def brute(r: np.ndarray) -> int:
        best, onset = 0.0, 0
        for s in range(r.size):
            for w in ONSET_RAMPS:
                h = np.minimum(np.arange(1, r.size - s + 1) / w, 1.0)
                hr = float(h @ r[s:])
                if hr < 0 and hr * hr / float(h @ h) > best + 1e-12:
                    best, onset = hr * hr / float(h @ h), s
        return onset

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(3, 90))
        r = rng.normal(0.0, 0.01, n)
        s, w = int(rng.integers(0, n)), int(rng.integers(1, 30))
        r[s:] -= rng.uniform(0.0, 0.1) * np.minimum(np.arange(1, n - s + 1) / w, 1.0)
        assert fall_onset(r) == brute(r)
