"""A fit's reported B and C_mid lie inside their own 95% intervals.

The points are the least-squares fit's, the intervals the posterior's quantiles; where the
posterior's assumptions pull its mass away from the least-squares optimum the interval spans
both (``fit.holding``), rather than reporting a value its own interval rules out."""

from __future__ import annotations

import numpy as np
import pytest

from scalewatch.server.fitting import FitResult, fit_curve

C = np.linspace(50, 20000, 80)


def _straight_line() -> FitResult:
    # No noise and no knee: AR(1) noise with rho near 1 is the posterior's reading of the
    # misfit, and its mass sat at C_mid ~ 1.2e5 against the point fit's ~ 9,500.
    x = np.linspace(100, 10000, 40)
    return fit_curve(x, 0.1 + 0.5 * x / 10000)


def _steeper_than_any_prior() -> FitResult:
    # B = 11: past the shape prior's support (B <= 8); the posterior's B stopped near 7.4.
    noise = 0.005 * np.random.default_rng(0).normal(size=C.size)
    return fit_curve(C, 0.05 + 0.6 / (1 + (4000 / C) ** 11) + noise)


@pytest.mark.parametrize("make", [_straight_line, _steeper_than_any_prior])
def test_b_and_c_mid_lie_inside_their_own_intervals(make) -> None:  # type: ignore[no-untyped-def]
    res = make()
    assert res.ci is not None and res.B is not None and res.C_mid is not None
    for key, point in (("B", res.B), ("C_mid", res.C_mid)):
        lo, hi = res.ci[key]
        assert lo <= point <= hi, (key, point, res.ci[key])
        assert lo < hi  # still an interval, not the point alone


def test_an_interval_that_holds_its_point_is_left_as_it_is() -> None:
    noise = 0.01 * np.random.default_rng(1).normal(size=C.size)
    res = fit_curve(C, 0.1 + 0.5 / (1 + (4000 / C) ** 1.5) + noise)
    assert res.status == "ok", res.message
    lo, hi = res.ci["B"]  # type: ignore[index]
    assert lo < res.B < hi and hi - lo < 1.0  # type: ignore[operator]
