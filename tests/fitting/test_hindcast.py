"""A finished run's hindcast and the drift rate a project's finished runs teach."""

from __future__ import annotations

import numpy as np

from scalewatch.server.fitting import FitOptions, fit_curve
from scalewatch.server.fitting.hindcast import (
    Hindcast,
    hindcast_of,
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
