"""A finished run's hindcast and the drift rate a project's finished runs teach."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scalewatch.server.fitting import FitOptions, fit_curve, predict_interval
from scalewatch.server.fitting.hindcast import (
    HORIZON_FRACTIONS,
    Hindcast,
    allowance_knots,
    hindcast_of,
    hindcasts_of,
    learn_drift_allowance,
    learn_drift_rate,
    needed_rate,
)
from scalewatch.server.fitting.intervals import DRIFT_RATE

from .helpers import ROWS, table1_run

NAMES = list(ROWS)


def _hindcasts(drift_per_ln: float, n: int = 20) -> list[Hindcast | None]:
    """Hindcasts of `n` finished runs whose values leave the sigmoid after half their compute
    by `drift_per_ln` per unit ln(compute / half) (0: they follow it)."""
    out = []
    for i in range(n):
        name = NAMES[i % len(NAMES)]  # exact sigmoids (no early linear regime) up to 8 x C_mid
        c, y, _ = table1_run(name, 8 * ROWS[name][0], seed=i, c_lin=1e-9, n_evals=80)
        half = c[-1] / 2
        late = c > half
        y = y.copy()
        y[late] -= drift_per_ln * np.log(c[late] / half)
        out.append(hindcast_of(c, y, FitOptions()))
    return out


def test_sigmoid_runs_teach_a_rate_well_below_the_default_and_drifting_runs_a_larger_one():
    follow = learn_drift_rate(_hindcasts(0.0))
    drift = learn_drift_rate(_hindcasts(0.08))
    assert follow is not None and drift is not None
    assert follow < DRIFT_RATE / 2, follow
    assert drift > 0.05, drift  # they left the curve by 0.08 per unit ln(compute)


def test_a_hindcast_compares_the_half_run_forecast_with_the_runs_end():
    c, y, _ = table1_run("ScaleRL", 8 * ROWS["ScaleRL"][0], seed=3)
    h = hindcast_of(c, y, FitOptions())
    assert h is not None
    assert abs(h.beyond - np.log(c[-6:].mean() / c[c <= c[-1] / 2].max())) < 1e-9
    res = fit_curve(c, y, FitOptions(fit_until=c[-1] / 2, target_compute=c[-6:].mean()))
    assert res.predicted_at_target is not None
    assert abs(h.miss - (y[-6:].mean() - res.predicted_at_target)) < 0.01
    assert h.sd > 0


def test_too_little_to_learn_from_keeps_the_default():
    c, y, _ = table1_run("ScaleRL", 8 * ROWS["ScaleRL"][0], seed=1)
    assert hindcast_of(c[:15], y[:15], FitOptions()) is None  # too few points for a hindcast
    eighteen = [Hindcast(0.0, 0.01, 0.7)] * 17 + [None, (0.0, 0.01, 0.7)]
    assert learn_drift_rate(eighteen) is None  # 18 runs: no rank vouches for 95%
    assert learn_drift_rate([]) is None


def test_the_rate_is_the_rank_that_vouches_for_95_percent():
    # Needed rates 0.00, 0.01, ..., 0.18 (19 runs): the 19th smallest of 19, then (39 runs)
    # the 38th smallest: the largest needs are outliers a bigger project can afford to miss.
    def run_needing(rate: float) -> Hindcast:
        return Hindcast(miss=-1.96 * float(np.hypot(0.01, rate * 0.7)), sd=0.01, beyond=0.7)

    assert abs(needed_rate(run_needing(0.05)) - 0.05) < 1e-12
    assert needed_rate(Hindcast(0.01, 0.01, 0.7)) == 0.0  # inside the exact-model interval
    nineteen = [run_needing(0.01 * i) for i in range(19)]
    assert abs(learn_drift_rate(nineteen) - 0.18) < 1e-9  # type: ignore[operator]
    many = nineteen + [run_needing(0.0)] * 19 + [run_needing(0.5)]
    assert abs(learn_drift_rate(many) - 0.18) < 1e-9  # type: ignore[operator]
    more = many + [run_needing(0.0)] * 20  # 59 runs: the 57th smallest
    assert abs(learn_drift_rate(more) - 0.17) < 1e-9  # type: ignore[operator]


def test_hindcasts_at_several_horizons_reach_further_the_earlier_the_cut():
    c, y, _ = table1_run("ScaleRL", 8 * ROWS["ScaleRL"][0], seed=3)
    hs = hindcasts_of(c, y, FitOptions())
    assert len(hs) == len(HORIZON_FRACTIONS) and all(h is not None for h in hs)
    assert hs[0] == hindcast_of(c, y, FitOptions())  # the first is the half-run hindcast
    beyond = [h.beyond for h in hs if h is not None]
    assert beyond == sorted(beyond) and beyond[0] < beyond[-1]


def _needing(sd: float, beyond: float) -> Hindcast:
    """A hindcast whose miss needed an sd of ``sd`` beyond its exact-model sd of 0.01."""
    return Hindcast(miss=1.96 * float(np.hypot(0.01, sd)), sd=0.01, beyond=beyond)


def test_the_allowance_ranks_all_horizons_hindcasts_and_learns_their_shape():
    # 19 runs whose hindcasts at 1/2, 1/3, 1/5 of their compute need sds 0.014, 0.033 and
    # 0.016 (rates 0.02, 0.03 and 0.01 per unit ln(compute)).  Pooled, 57 hindcasts; the rate
    # ranked ceil(0.95 x 58) = 56th is 0.03, so an allowance in proportion to the distance
    # would give 0.021, 0.033 and 0.048.  The learned shape gives each horizon the geometric
    # mean of its distance and what its hindcasts needed, and the pooled rank sets the level:
    # the horizon that needed the most gets exactly its need, the nearer one less than in
    # proportion, the farther one no less than a nearer one (0.0277 -> 0.033), and every
    # hindcast stays covered.
    runs = [[_needing(0.02 * 0.7, 0.7), _needing(0.03 * 1.1, 1.1), _needing(0.01 * 1.6, 1.6)]]
    knots = allowance_knots(runs * 19)
    assert knots is not None and [k[0] for k in knots] == [0.7, 1.1, 1.6]
    level = 0.033 / np.sqrt(1.1 * 0.033)  # the rank: the 1.1 horizon's need over its shape
    shaped = [level * np.sqrt(b * need) for b, need in ((0.7, 0.014), (1.1, 0.033),
                                                        (1.6, 0.016))]
    assert np.allclose(shaped, [0.017146, 0.033, 0.027713], atol=1e-6)
    expected = [shaped[0], shaped[1], shaped[1]]
    assert np.allclose([k[1] for k in knots], expected, atol=1e-12), knots
    for (b, sd), need in zip(knots, (0.014, 0.033, 0.016), strict=True):
        assert need <= sd + 1e-12 and sd <= 0.03 * b + 1e-12, (b, sd)
    # A forecast between horizons takes the sd interpolated; nearer than the first, a share of
    # it (from zero at the window's end); past the last, that sd grown in proportion.
    for beyond, sd in ((0.35, expected[0] / 2), (0.9, (expected[0] + expected[1]) / 2),
                       (3.2, expected[2] * 2)):
        rate = learn_drift_allowance(runs * 19, beyond)
        assert rate is not None and abs(rate * beyond - sd) < 1e-12, (beyond, rate)
    # One run in twenty needing a large rate at one horizon sets nothing: with 20 runs and
    # 60 hindcasts the rank (58th of 60) lies among the ordinary runs' needs, and the shape
    # counts the outlier's need no higher than that rate gives its horizon, whereas a rank
    # per horizon (20 runs: the 20th of 20) would be the outlier's.
    ordinary = [[_needing(0.01 * 0.7, 0.7), _needing(0.01 * 1.1, 1.1), _needing(0.01 * 1.6, 1.6)]]
    outlier = [[_needing(0.2 * 0.7, 0.7), _needing(0.01 * 1.1, 1.1), _needing(0.01 * 1.6, 1.6)]]
    for beyond in (0.7, 1.0, 1.6):
        rate = learn_drift_allowance(ordinary * 19 + outlier, beyond)
        assert rate is not None and abs(rate - 0.01) < 1e-9, (beyond, rate)
    # ... but three such runs in twenty are more than 5% of the hindcasts: they set the
    # allowance where they strayed (all of their 0.14), and the farther horizons keep it
    # (never less than a nearer one), short of the 0.2 per unit in proportion.
    knots = allowance_knots(ordinary * 17 + outlier * 3)
    assert knots is not None and np.allclose([k[1] for k in knots], 0.2 * 0.7, atol=1e-9)
    for b, sd in knots[1:]:
        assert sd < 0.2 * b, knots
    # Runs that need nothing at any horizon get no allowance.
    follow = [[_needing(0.0, 0.7), _needing(0.0, 1.1), _needing(0.0, 1.6)]] * 19
    assert learn_drift_allowance(follow, 1.0) == 0.0
    assert allowance_knots(follow) == ((0.7, 0.0), (1.1, 0.0), (1.6, 0.0))


def test_the_allowance_needs_enough_finished_runs():
    runs: list[list[Hindcast | None]] = [[Hindcast(0.0, 0.01, 0.7), None, None]] * 18
    assert learn_drift_allowance(runs, 0.7) is None  # 18 runs: no rank vouches for 95%
    assert learn_drift_allowance(runs + [[None, None, None]], 0.7) is None  # no hindcast
    assert learn_drift_allowance(runs + [[None, None, Hindcast(0.0, 0.01, 1.6)]], 0.7) == 0.0
    assert learn_drift_allowance(runs + [[Hindcast(0.0, 0.01, 0.7)]], 0.7) == 0.0
    assert learn_drift_allowance(runs * 2, 0.0) is None  # not beyond the window


def test_a_fit_takes_the_allowance_at_its_own_horizon_as_the_bench_measures_it():
    """``FitOptions.drift_allowance`` (what the server passes) gives the forecast interval the
    bench's cov-prj computes: the fit's band widened by ``learn_drift_allowance`` at ln(target /
    window end), for a near and a far target; and the default is unchanged without it."""
    runs = [[_needing(0.02, 0.7), _needing(0.03, 1.1), _needing(0.024, 1.6)]] * 19
    knots = allowance_knots(runs)
    assert knots is not None and [k[0] for k in knots] == [0.7, 1.1, 1.6]
    c_mid = ROWS["ScaleRL"][0]
    c, y, _ = table1_run("ScaleRL", 8 * c_mid, seed=5)
    rates = []
    for target in (4 * c_mid, 8 * c_mid, 40 * c_mid):
        base = FitOptions(fit_until=2 * c_mid, target_compute=target)
        default = fit_curve(c, y, base)
        learned = fit_curve(c, y, replace(base, drift_allowance=knots))
        assert default.drift_sd == DRIFT_RATE and default.fit_range is not None
        beyond = float(np.log(target / default.fit_range[1]))
        rate = learn_drift_allowance(runs, beyond)
        assert rate is not None and learned.drift_sd == rate
        lo, hi = predict_interval(replace(default, drift_sd=rate), [target])  # the bench's
        assert learned.predicted_interval is not None
        assert np.allclose(learned.predicted_interval, (lo[0], hi[0]), atol=1e-12)
        rates.append(rate)
    # Each target takes the rate at its own distance (the knots interpolated): the three
    # differ, and nearer than the first horizon the rate is the first knot's (from zero).
    assert len({round(r, 12) for r in rates}) == 3, rates
    assert np.isclose(learn_drift_allowance(runs, 0.3), 0.02 / 0.7, atol=1e-12)  # type: ignore[arg-type]
    # An explicit rate still wins over the learned allowance.
    fixed = fit_curve(c, y, FitOptions(fit_until=2 * c_mid, drift_rate=0.0,
                                       drift_allowance=knots))
    assert fixed.drift_sd == 0.0
