"""The small Levenberg-Marquardt solver the fits use: as good as scipy's least_squares (trf)
from the same start, within bounds, with parameters held fixed and with weights."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from scalewatch.server.fitting import grid as G
from scalewatch.server.fitting import lm
from scalewatch.server.fitting.model import frac, jacobian_x

LOWER = np.array([0.0, -8.0, 0.03, 0.0])
UPPER = np.array([1.0, 7.0, 40.0, 1.0])


def _problem(seed: int, fixed_a: float | None, fit_r0: bool
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A noisy curve, bin-count weights, and a start as the fits make one: the best cell of
    the grid (odd seeds) or a warm start near the data's curve (even seeds)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(15, 400))
    x = np.sort(rng.uniform(-4.0, 0.0, n))
    a, m, b, r0 = rng.uniform(0.5, 0.95), rng.uniform(-3.0, 1.0), rng.uniform(0.7, 4.0), 0.3
    y = np.clip(r0 + (a - r0) * frac(x, m, b) + rng.normal(0, rng.uniform(0.003, 0.03), n),
                0, 1)
    w = rng.integers(1, 5, n).astype(float)
    r0_arg = None if fit_r0 else r0
    if seed % 2:
        m_axis, b_axis = G.default_axes(float(x[0]))
        gr = G.search(G.Binned(x, y, w, 0.0), r0_arg, (0.0, 1.0), m_axis, b_axis, fixed_a)
        i = gr.best
        start = np.array([gr.a[i], gr.m[i], gr.b[i], gr.r0[i]])
    else:
        start = np.array([a + rng.normal(0, 0.03), m + rng.normal(0, 0.3),
                          b * np.exp(rng.normal(0, 0.2)), r0])
    if fixed_a is not None:
        start[0] = fixed_a
    return x, y, w, start


def _scipy_ssr(x: np.ndarray, y: np.ndarray, start: np.ndarray, free: np.ndarray,
               w: np.ndarray) -> float:
    sw = np.sqrt(w)

    def full(p: np.ndarray) -> np.ndarray:
        t = start.copy()
        t[free] = p
        return t

    def fun(p: np.ndarray) -> np.ndarray:
        t = full(p)
        return (t[3] + (t[0] - t[3]) * frac(x, t[1], t[2]) - y) * sw

    def jac(p: np.ndarray) -> np.ndarray:
        t = full(p)
        return jacobian_x(x, *t, True)[:, free] * sw[:, None]

    span = UPPER[free] - LOWER[free]
    p0 = np.clip(start[free], LOWER[free] + 1e-9 * span, UPPER[free] - 1e-9 * span)
    sol = least_squares(fun, p0, jac=jac, bounds=(LOWER[free], UPPER[free]), method="trf",
                        x_scale="jac", ftol=1e-10, xtol=1e-10, gtol=1e-10, max_nfev=200)
    return float(sol.fun @ sol.fun)


@pytest.mark.parametrize("fit_r0,fixed_a", [(True, False), (False, False), (False, True)])
def test_as_good_as_scipy_from_the_same_start(fit_r0: bool, fixed_a: bool) -> None:
    """From the starts the fits use, never a worse SSR than trf (to 1e-6)."""
    free = np.array([not fixed_a, True, True, fit_r0])
    worse = []
    for seed in range(60):
        x, y, w, start = _problem(seed, 0.7 if fixed_a else None, fit_r0)
        sol = lm.solve(x, y, start, free, LOWER, UPPER, w)
        ours = float(w @ (sol.theta[3] + (sol.theta[0] - sol.theta[3])
                          * frac(x, sol.theta[1], sol.theta[2]) - y) ** 2)
        assert ours == pytest.approx(sol.ssr, rel=1e-9)
        theirs = _scipy_ssr(x, y, start, free, w)
        if ours > theirs * (1 + 1e-6) + 1e-12:
            worse.append((seed, ours, theirs))
        # Held parameters stay exactly where they started; the others stay in the box.
        assert np.array_equal(sol.theta[~free], np.clip(start, LOWER, UPPER)[~free])
        assert np.all(sol.theta >= LOWER) and np.all(sol.theta <= UPPER)
    assert not worse


def test_a_bound_that_binds_is_held() -> None:
    """Data rising past the value range: A ends on its upper bound, the rest still fits."""
    x = np.linspace(-4.0, 0.0, 80)
    y = 0.2 + 1.0 * frac(x, -1.0, 2.0)  # asymptote 1.2 > 1
    sol = lm.solve(x, y, np.array([0.8, -1.5, 1.5, 0.2]), np.array([True, True, True, False]),
                   LOWER, UPPER)
    assert sol.theta[0] == 1.0
    assert sol.ssr < float(((y - y.mean()) ** 2).sum()) / 10


def test_an_exact_curve_is_recovered() -> None:
    x = np.linspace(-4.0, 0.0, 50)
    y = 0.3 + 0.4 * frac(x, -1.2, 1.8)
    sol = lm.solve(x, y, np.array([0.6, -0.5, 1.0, 0.3]), np.array([True, True, True, True]),
                   LOWER, UPPER)
    assert np.allclose(sol.theta, [0.7, -1.2, 1.8, 0.3], atol=1e-5)
