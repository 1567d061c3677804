"""The noise prior: learned from finished runs' noise posteriors, and what it does to a fit."""

from __future__ import annotations

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, FitResult, fit_curve
from scalewatch.server.fitting.noise_prior import RHO_SD_FLOOR, learn_rho_prior
from scalewatch.server.fitting.synth import make_run


def test_learned_prior_holds_spread_and_uncertainty_never_below_the_floor():
    assert learn_rho_prior([]) is None
    assert learn_rho_prior([None, (float("nan"), 0.1), (0.5, -1.0)]) is None
    # One run: its own uncertainty (or the floor).
    assert learn_rho_prior([(0.6, 0.12)]) == pytest.approx((0.6, 0.12))
    assert learn_rho_prior([(0.6, 0.01)]) == pytest.approx((0.6, RHO_SD_FLOOR))
    # Agreeing runs: narrow; disagreeing runs: their spread widens it.
    mean, sd = learn_rho_prior([(0.80, 0.03), (0.82, 0.03), (0.78, 0.03)])
    assert mean == pytest.approx(0.80) and sd == pytest.approx(RHO_SD_FLOOR)
    mean, sd = learn_rho_prior([(0.3, 0.03), (0.9, 0.03)])
    assert mean == pytest.approx(0.6) and sd == pytest.approx(np.sqrt(0.18 + 0.0009))


def _run(seed: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    c, y, _ = make_run(0.61, 1.92, 2542.0, 20000.0, np.random.default_rng(seed), rho=rho)
    return c, y


def test_a_fit_reports_its_noise_and_the_prior_it_used():
    c, y = _run(0, 0.8)
    plain = fit_curve(c, y, FitOptions(target_compute=20000))
    assert plain.prior is None and plain.to_dict()["prior"] is None
    assert plain.rho is not None and 0.0 <= plain.rho[0] <= 0.98
    with_prior = fit_curve(c, y, FitOptions(target_compute=20000, noise_prior=(0.8, 0.05)))
    assert with_prior.to_dict()["prior"] == {"rho": {"mean": 0.8, "sd": 0.05}}
    assert with_prior.rho[1] < plain.rho[1]  # the prior narrows what rho can be
    again = FitResult.from_dict(with_prior.to_dict(internal=True))
    assert again.rho == with_prior.rho and again.prior == with_prior.prior


def test_persistent_noise_prior_widens_a_short_windows_interval():
    # 3 x C_mid of runs with persistent noise (rho 0.95).  Where the window happened to look
    # mildly correlated, the flat prior lets A's interval shrink (the runs it calls "ok" too
    # early); a prior from finished runs that says "persistent" keeps it honest.
    fooled = 0
    for seed in range(6):
        c, y = _run(seed, 0.95)
        opts = FitOptions(fit_until=3 * 2542.0, target_compute=20000)
        plain = fit_curve(c, y, opts)
        if plain.rho[0] >= 0.85:
            continue
        fooled += 1
        informed = fit_curve(c, y, FitOptions(fit_until=3 * 2542.0, target_compute=20000,
                                              noise_prior=(0.95, 0.05)))
        widths = [r.ci["A"][1] - r.ci["A"][0] for r in (plain, informed)]
        # A claimed interval carries the model form's uncertainty (structural.py), a withheld
        # one only the posterior's: where the plain fit claims A, the prior must withhold it.
        assert (widths[1] > 1.2 * widths[0]
                or (plain.status == "ok" and informed.status != "ok")), (seed, widths)
    assert fooled >= 2
