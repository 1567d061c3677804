"""A claim of A carries the drift a project's finished runs showed past their own forecasts
(``intervals.a_with_drift``): none when they followed their curves, a wider interval when
they drifted a little, a withheld A (saying why) when they drifted a lot."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, fit_curve
from scalewatch.server.fitting.fit import drift_too_wide
from scalewatch.server.fitting.group import fit_group
from scalewatch.server.fitting.hindcast import Hindcast, allowance_knots
from scalewatch.server.fitting.intervals import a_with_drift, allowance_at_reach

from .helpers import ROWS, table1_run
from .test_group import _seeds

C_MID = ROWS["ScaleRL"][0]
HORIZONS = (0.7, 1.1, 1.6)  # ln(end / window end) of hindcasts from 1/2, 1/3, 1/5 of a run


def _knots(rate: float) -> tuple[tuple[float, float], ...]:
    """The allowance 19 finished runs set whose hindcasts each needed ``rate`` per unit
    ln(compute) beyond an exact-model sd of 0.01 (0: they followed their curves)."""
    def needing(beyond: float) -> Hindcast:
        return Hindcast(miss=1.96 * float(np.hypot(0.01, rate * beyond)), sd=0.01,
                        beyond=beyond)
    knots = allowance_knots([[needing(b) for b in HORIZONS]] * 19)
    assert knots is not None
    return knots


@pytest.fixture(scope="module")
def claimed() -> tuple[np.ndarray, np.ndarray, FitOptions]:
    """A run whose window (5 x C_mid) claims A with the default options."""
    c, y, _ = table1_run("ScaleRL", 8 * C_MID, seed=2)
    opts = FitOptions(fit_until=5 * C_MID, target_compute=8 * C_MID)
    assert fit_curve(c, y, opts).status == "ok"
    return c, y, opts


def test_runs_that_followed_their_curves_leave_a_claim_as_it_was(claimed) -> None:
    c, y, opts = claimed
    plain = fit_curve(c, y, opts)
    follow = fit_curve(c, y, replace(opts, drift_allowance=_knots(0.0)))
    assert follow.status == "ok" and follow.ci is not None and plain.ci is not None
    assert follow.ci["A"] == plain.ci["A"] and follow.A == plain.A


def test_a_small_drift_widens_the_claim_by_its_sd_at_the_runs_target(claimed) -> None:
    c, y, opts = claimed
    plain = fit_curve(c, y, opts)
    knots = _knots(0.01)
    fit = fit_curve(c, y, replace(opts, drift_allowance=knots))
    assert fit.status == "ok" and fit.ci is not None and plain.ci is not None
    assert plain.A is not None and fit.fit_range is not None
    reach = float(np.log(8 * C_MID / fit.fit_range[1]))
    sd = allowance_at_reach(knots, 8 * C_MID, fit.fit_range[1])
    assert sd == pytest.approx(0.01 * reach, rel=1e-9)
    (lo, hi), (plo, phi) = fit.ci["A"], plain.ci["A"]
    # Each side in quadrature with 1.96 sd, around the same point estimate.
    assert plain.A - lo == pytest.approx(np.hypot(plain.A - plo, 1.96 * sd), rel=1e-9)
    assert hi - plain.A == pytest.approx(np.hypot(phi - plain.A, 1.96 * sd), rel=1e-9)
    assert fit.A_lower_bound == lo


def test_a_large_drift_withholds_a_and_says_it_was_the_projects_drift(claimed) -> None:
    c, y, opts = claimed
    fit = fit_curve(c, y, replace(opts, drift_allowance=_knots(0.06)))
    assert fit.status == "unidentified" and fit.A is None
    assert "strayed past their own forecasts" in fit.message
    reasons = (fit.withheld or {})["reasons"]
    assert [r["code"] for r in reasons] == ["interval_too_wide"]
    assert "strayed past their own forecasts" in reasons[0]["detail"]
    # The continuation is simulated along sigmoids, which cannot say when drift stops.
    assert (fit.withheld or {})["compute_to_identify"] is None
    # The forecast interval still takes the same allowance, as before.
    assert fit.predicted_interval is not None


def test_without_a_target_the_reach_is_the_farthest_the_hindcasts_checked() -> None:
    knots = _knots(0.01)
    assert allowance_at_reach(knots, None, 100.0) == pytest.approx(0.01 * knots[-1][0])
    assert allowance_at_reach(knots, 50.0, 100.0) == 0.0  # the target is inside the window
    assert allowance_at_reach(None, 800.0, 100.0) == 0.0
    # Kept inside the value range; an end clipped at the bound withholds nothing by itself,
    # only the width does.
    assert a_with_drift((0.9, 0.98), 0.95, 0.05, (0.0, 1.0)) == (
        pytest.approx(0.95 - np.hypot(0.05, 0.098)), 1.0)
    assert drift_too_wide(a_with_drift((0.95, 0.99), 0.97, 0.01, (0.0, 1.0)), 0.01) is None
    assert "wider than a claim allows" in (drift_too_wide((0.85, 1.0), 0.05) or "")
    assert drift_too_wide((0.5, 0.7), 0.0) is None  # no drift: not the drift's doing


def test_a_recipes_pooled_claim_carries_the_drift_too() -> None:
    opts = FitOptions(fit_until=5 * 2542.0, target_compute=8 * 2542.0)
    seeds = _seeds(3, 0)
    plain = fit_group(seeds, opts).pooled
    assert plain.status == "ok" and plain.ci is not None
    wide = fit_group(seeds, replace(opts, drift_allowance=_knots(0.01))).pooled
    assert wide.status == "ok" and wide.ci is not None
    assert wide.ci["A"][0] < plain.ci["A"][0] and wide.ci["A"][1] > plain.ci["A"][1]
    withheld = fit_group(seeds, replace(opts, drift_allowance=_knots(0.06))).pooled
    assert withheld.status == "unidentified"
    assert "strayed past their own forecasts" in withheld.message
