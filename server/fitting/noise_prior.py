"""A prior on the evaluation noise's persistence, learned from a project's finished runs.

Why the noise first: the runs of one project are evaluated on the same prompt set at the same
cadence, so they share how persistent the evaluation errors are (the AR(1) coefficient rho),
while their curves are what the project compares.  Their ceilings A must never be pulled
towards each other; a prior on their shape B is a separate, heavy-tailed opt-in
(``b_prior.py``).  A window of a few dozen evaluations cannot tell rho = 0.5 from
0.8, nor 0.8 from 0.95 (four times the variance), so the flat prior of ``ar1.py`` makes a run
with mild noise wait for wide intervals to shrink and lets a run with persistent noise claim A
too early with intervals that miss.  A finished run of a few hundred evaluations pins rho down;
a new run can then borrow it.  ``bench/calibration.py --noise-prior`` measures the effect
(leave-one-out within each noise family).

Opt-in (a project setting; ``FitOptions.noise_prior``): a project that mixes evaluation sets or
cadences would share a wrong prior.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .b_prior import b_prior_record

RHO_SD_FLOOR = 0.05  # a learned prior never claims rho to better than this
MIN_RUNS = 1
RHO_MAX = 0.98  # the top of ar1.py's rho grid: a prior centred beyond it is meaningless


def check_rho_prior(mean: float, sd: float) -> None:
    """Raise ValueError, naming the bad number and its range, unless (mean, sd) is a usable prior.

    The one range check that ``scalewatch fit --noise-prior`` and the API's ``noise_prior``
    fields share, so both refuse the same values with the same words.
    """
    if not 0.0 <= mean <= RHO_MAX:
        raise ValueError(f"noise prior mean {mean} must lie in [0, {RHO_MAX}] (an AR(1) rho)")
    if not 0.0 < sd <= 1.0:
        raise ValueError(f"noise prior sd {sd} must lie in (0, 1]")


def learn_rho_prior(posteriors: Iterable[tuple[float, float] | None]
                    ) -> tuple[float, float] | None:
    """The (mean, sd) of a normal prior on rho from finished runs' posterior (mean, sd) of it.

    The mean is the runs' average; the sd holds both the runs' spread (runs differ a little
    even on one evaluation set) and each run's own uncertainty, so one short finished run
    gives a broad prior and several agreeing long ones a narrow one, never below
    ``RHO_SD_FLOOR``.  None when no run has a usable estimate.
    """
    pairs = [(float(m), float(s)) for p in posteriors if p is not None
             for m, s in [p] if m is not None and s is not None
             and np.isfinite(m) and np.isfinite(s) and s >= 0.0]
    if len(pairs) < MIN_RUNS:
        return None
    means = np.array([m for m, _ in pairs])
    sds = np.array([s for _, s in pairs])
    spread = float(means.var(ddof=1)) if means.size > 1 else 0.0
    sd = float(np.sqrt(spread + float(np.mean(sds**2))))
    return float(np.clip(means.mean(), 0.0, RHO_MAX)), max(sd, RHO_SD_FLOOR)


def prior_record(prior: tuple[float, float] | None,
                 b_prior: tuple[float, float] | None = None) -> dict[str, Any] | None:
    """The public ``prior`` block of a fit that used the noise prior ``prior`` and/or the B
    prior ``b_prior`` (``b_prior.py``); None when it used neither."""
    out: dict[str, Any] = {}
    if prior is not None:
        out["rho"] = {"mean": round(float(prior[0]), 4), "sd": round(float(prior[1]), 4)}
    if b_prior is not None:
        out["B"] = b_prior_record(b_prior)
    return out or None
