"""A metric on another scale than [0, 1]: a percentage, a reward in [-1, 1].

The engine's thresholds on values (a claim's width 0.1, the paper's 0.02 margin, the noise
floors, the default drift allowance) are set for a [0, 1] pass rate.  With the run's
``value_range`` set to the metric's scale they scale with it, so the same run rescaled gets
the same decisions; under the default [0, 1] such a run is told so instead of reading "flat".
"""

from __future__ import annotations

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, fit_curve
from tests.fitting.helpers import table1_run

# (Table 1 row, budget, seed): runs past their knee (claimed), one short of it (interval too
# wide), one held back by the model form's alternatives
CASES = [("ScaleRL", 20_000.0, 3), ("ScaleRL-32k", 15_000.0, 5), ("ScaleRL-bs2048", 60_000.0, 11),
         ("ScaleRL-Scout", 12_000.0, 2)]
SCALES = [((0.0, 100.0), "percentage"), ((-1.0, 1.0), "reward in [-1, 1]"),
          ((0.0, 10.0), "score out of 10")]


def _to(scale: tuple[float, float], v: float) -> float:
    lo, hi = scale
    return lo + (hi - lo) * v


@pytest.mark.parametrize("name,budget,seed", CASES)
@pytest.mark.parametrize("scale,label", SCALES)
def test_rescaled_run_gets_the_same_decision(name, budget, seed, scale, label):
    c, y, _ = table1_run(name, budget, seed)
    unit = fit_curve(c, y, FitOptions())
    lo, hi = scale
    span = hi - lo
    scaled = fit_curve(c, lo + span * y, FitOptions(value_range=scale))
    assert scaled.status == unit.status, (label, unit.message, scaled.message)
    assert (scaled.break_ is None) == (unit.break_ is None)
    if unit.a_fit is not None:
        assert scaled.a_fit == pytest.approx(_to(scale, unit.a_fit), abs=1e-6 * span)
    if unit.ci is not None:
        # B and C_mid do not depend on the values' unit; A's interval is the posterior's
        # (identical draws) widened by the ceiling's model error and the model form's
        # alternatives, both in units of the range.
        for k in ("B", "C_mid"):
            assert scaled.ci[k] == pytest.approx(unit.ci[k], rel=1e-6)
        for got, want in zip(scaled.ci["A"], unit.ci["A"], strict=True):
            assert got == pytest.approx(_to(scale, want), abs=1e-6 * span)
    if unit.predicted_interval is not None:
        for got, want in zip(scaled.predicted_interval, unit.predicted_interval, strict=True):
            assert got == pytest.approx(_to(scale, want), abs=1e-4 * span)


def test_a_claim_on_a_percentage_scale():
    """The width a claim allows scales: a percentage run past its knee is claimed (before,
    its A interval of ~3 points was held to 0.1 points and never claimed)."""
    c, y, _ = table1_run("ScaleRL", 20_000.0, 3)
    assert fit_curve(c, y, FitOptions()).status == "ok"
    res = fit_curve(c, 100.0 * y, FitOptions(value_range=(0.0, 100.0)))
    assert res.status == "ok", res.message
    lo, hi = res.ci["A"]
    assert 1.0 < hi - lo < 10.0


def test_values_outside_the_default_range_say_so():
    c, y, _ = table1_run("ScaleRL", 20_000.0, 3)
    res = fit_curve(c, 100.0 * y, FitOptions())
    assert res.status == "insufficient_data"
    assert "outside the value range [0, 1]" in res.message
    assert "[0, 100]" in res.message and "value_range" in res.message
    assert "flat" not in res.message
    assert res.withheld["reasons"][0]["code"] == "insufficient_data"
    # a reward in [-1, 1] is no percentage: no [0, 100] hint
    res = fit_curve(c, 2.0 * y - 1.0, FitOptions())
    assert "outside the value range" in res.message and "[0, 100]" not in res.message


def test_noisy_pass_rate_near_zero_is_not_out_of_range():
    """Simulated noise dips a pass rate near 0 below it: no scale problem, the fit runs."""
    rng = np.random.default_rng(7)
    c = np.geomspace(10.0, 10_000.0, 150)
    y = 0.5 / (1.0 + (2_000.0 / c) ** 1.5) + rng.normal(0.0, 0.02, c.size)
    assert np.mean(y < -0.01) > 0.05  # more than 5% of the points lie below the range
    res = fit_curve(c, y, FitOptions())
    assert "outside the value range" not in res.message
    assert res.a_fit is not None


def test_comparison_margin_scales_with_the_range():
    """The paper's "same asymptote" margin (0.02 of a pass rate) is 2 points of a percentage:
    two runs compared on either scale get the same decision."""
    from scalewatch.server.fitting import compare_fits

    def series(scale: float) -> dict:
        out = {}
        for name, seed in (("ScaleRL", 3), ("ScaleRL-32gen", 4)):
            c, y, _ = table1_run(name, 20_000.0, seed)
            res = fit_curve(c, scale * y, FitOptions(value_range=(0.0, scale)))
            assert res.status == "ok", res.message
            out[name] = (c, scale * y, res)
        return out

    unit, pct = compare_fits(series(1.0)), compare_fits(series(100.0))
    assert pct["margin"] == pytest.approx(100.0 * unit["margin"])
    d1, d100 = unit["pairs"][0]["decision"], pct["pairs"][0]["decision"]
    assert d1["rule"] == d100["rule"] == "same_asymptote"
    assert d100["delta_A"] == pytest.approx(100.0 * d1["delta_A"], rel=1e-3)
    assert d100["more_efficient"] == d1["more_efficient"]


@pytest.mark.parametrize("method", ["paper", "curve_fit"])
def test_baselines_on_a_percentage(method):
    """The paper's A grid (0.45-0.80 of a pass rate) is that share of another range: before,
    the paper's method put a percentage run's ceiling at 0.495."""
    c, y, _ = table1_run("ScaleRL", 20_000.0, 3)
    unit = fit_curve(c, y, FitOptions(method=method))
    pct = fit_curve(c, 100.0 * y, FitOptions(method=method, value_range=(0.0, 100.0)))
    assert pct.status == unit.status == "ok"
    ceiling, slope = pct.A, pct.B
    assert ceiling == pytest.approx(100.0 * unit.A, rel=1e-6)
    assert slope == pytest.approx(unit.B, rel=1e-6)
    assert pct.predicted_at_target == pytest.approx(100.0 * unit.predicted_at_target, rel=1e-6)


def test_the_supported_span_is_the_apis_limit():
    """The engine's supported widths and the API's limit are one span (two modules: the client
    shares the limit and cannot import the engine)."""
    from scalewatch.server.fitting.model import SUPPORTED_SPAN
    from trainer_client.limits import VALUE_RANGE_WIDTH

    assert SUPPORTED_SPAN == VALUE_RANGE_WIDTH


@pytest.mark.parametrize("width", [1e-3, 1e9])
def test_the_span_ends_still_give_the_unit_decision(width):
    c, y, _ = table1_run("ScaleRL", 20_000.0, 3)
    unit = fit_curve(c, y, FitOptions())
    scaled = fit_curve(c, width * y, FitOptions(value_range=(0.0, width)))
    assert scaled.status == unit.status == "ok", scaled.message
    ceiling = scaled.A
    assert ceiling == pytest.approx(width * unit.A, rel=1e-6)
    for got, want in zip(scaled.ci["A"], unit.ci["A"], strict=True):
        assert got == pytest.approx(width * want, abs=0.005 * width)


@pytest.mark.parametrize("bad", [(0.0, 1e-4), (0.0, 1e10), (1.0, 1.0)])
def test_a_range_beyond_the_span_is_refused_not_fitted(bad):
    c, y, _ = table1_run("ScaleRL", 20_000.0, 3)
    with pytest.raises(ValueError, match="value_range"):
        fit_curve(c, y, FitOptions(value_range=bad))


def test_hindcasts_and_the_learned_allowance_are_in_units_of_the_range():
    """A finished run's hindcast is the same on either scale, so a project's runs on
    different scales pool into one allowance, and a fit takes it in its own units."""
    from scalewatch.server.fitting.hindcast import hindcasts_of

    c, y, _ = table1_run("ScaleRL", 20_000.0, 3)
    unit = hindcasts_of(c, y, FitOptions())
    pct = hindcasts_of(c, 100.0 * y, FitOptions(value_range=(0.0, 100.0)))
    assert all(h is not None for h in unit)
    for a, b in zip(unit, pct, strict=True):
        assert b.miss == pytest.approx(a.miss, rel=1e-6, abs=1e-9)
        assert b.sd == pytest.approx(a.sd, rel=1e-6)
        assert b.beyond == pytest.approx(a.beyond, rel=1e-9)
    knots = ((0.7, 0.01), (1.1, 0.02), (1.6, 0.03))  # an allowance some project learned
    half = table1_run("ScaleRL", 20_000.0, 3)[:2]
    window = dict(fit_until=6_000.0, target_compute=20_000.0, drift_allowance=knots)
    u = fit_curve(*half, FitOptions(**window))
    p = fit_curve(half[0], 100.0 * half[1], FitOptions(value_range=(0.0, 100.0), **window))
    assert p.drift_sd == pytest.approx(100.0 * u.drift_sd, rel=1e-9) and u.drift_sd > 0
    for got, want in zip(p.predicted_interval, u.predicted_interval, strict=True):
        assert got == pytest.approx(100.0 * want, abs=1e-4)
