"""The collapse test (``server/fitting/collapse.py``): a run that rose and fell back a lot is
refused a sigmoid; persistent noise on a run that only saturated is not called a collapse."""

from __future__ import annotations

import numpy as np

from scalewatch.server.fitting import fit_curve
from scalewatch.server.fitting.collapse import COLLAPSE_Z, detect_collapse
from scalewatch.server.fitting.model import frac

# A stable sigmoid run of the sampled alert bench (bench/alerts.py --sampled, tuning seed 3,
# stable run 50: A 0.32, B 3.0, AR(1) noise sd 0.036 and rho 0.94), its first 38 evaluations,
# compute in units of C_mid.  The noise wanders up by 0.03 and back down by 0.06 after the
# knee; the old test (4 sds of a k-mean of independent noise) called it "collapse: the metric
# peaked at 0.338 and fell to 0.260; a sigmoid does not describe this run".
WANDER_C = np.round(np.arange(38) * 0.18604, 4)
WANDER_Y = np.array([
    0.0866, 0.067, 0.0828, 0.106, 0.1293, 0.1771, 0.2023, 0.2269, 0.2371, 0.2429, 0.2628,
    0.2687, 0.2791, 0.2863, 0.2923, 0.282, 0.2835, 0.2735, 0.2881, 0.3045, 0.3195, 0.3265,
    0.3399, 0.3209, 0.2984, 0.3313, 0.3497, 0.3332, 0.3194, 0.3188, 0.29, 0.2622, 0.2687,
    0.2668, 0.2655, 0.265, 0.2587, 0.2553])


def _true_refit(theta: tuple[float, float, float, float]):  # type: ignore[no-untyped-def]
    """A refit that returns the run's own curve: the test then sees the noise alone."""
    return lambda x, y, start: theta


def _curve(x: np.ndarray, th: tuple[float, float, float, float]) -> np.ndarray:
    a, m, b, r0 = th
    return r0 + (a - r0) * frac(x, m, b)


def test_persistent_noise_on_a_saturated_sigmoid_is_no_collapse() -> None:
    res = fit_curve(WANDER_C, WANDER_Y)
    assert not res.message.startswith("collapse"), res.message


def test_a_run_that_rose_and_fell_back_is_a_collapse() -> None:
    rng = np.random.default_rng(4)
    x = np.log(np.linspace(0.1, 8.0, 60))  # log-compute, C_mid at 1
    th = (0.60, 0.0, 2.5, 0.20)
    y = _curve(x, th) + rng.normal(0.0, 0.01, x.size)
    fall = np.arange(x.size) >= 40
    y[fall] -= np.linspace(0.0, 0.25, fall.sum())  # slides back by 0.25 of its 0.4 rise
    found = detect_collapse(x, y, th, True, _true_refit(th))
    assert found is not None and found.message.startswith("collapse: the metric peaked at")
    assert found.peak - found.tail > COLLAPSE_Z * found.block_sd


def test_a_fall_within_persistent_noise_is_no_collapse() -> None:
    # The same rise, no fall, AR(1) noise of sd 0.03 and rho 0.9: whatever the noise's own
    # wandering does at the end is no collapse (a threshold set too low fails this).
    rng = np.random.default_rng(7)
    x = np.log(np.linspace(0.1, 8.0, 60))
    th = (0.60, 0.0, 2.5, 0.20)
    seen = 0
    for _ in range(200):
        e = np.empty(x.size)
        e[0] = rng.normal(0.0, 0.03)
        for t in range(1, x.size):
            e[t] = 0.9 * e[t - 1] + np.sqrt(1 - 0.81) * rng.normal(0.0, 0.03)
        seen += detect_collapse(x, _curve(x, th) + e, th, True, _true_refit(th)) is not None
    assert seen <= 2, seen  # the threshold is set for < 0.1% (bench/collapse_null.py)
