"""Priors on the efficiency exponent B: learned from a project's finished runs (opt-in), else a
soft ceiling (``STEEP_B``, below) that every single-run and group posterior carries.  The
break test's confirmation (``breaks.py``, the pre-break curve's posterior) uses Jeffreys'
prior alone: it asks how far the run fell below that curve, not where the curve tops out.

Why B: before and around its knee a run's likelihood is a banana in (A, C_mid, B): a steeper,
earlier curve with a lower ceiling fits a short window about as well as the true one.  The
calibration harness shows where that bites: at 2-3 x C_mid the misses of A's interval are
nearly all *low*, with B over-estimated (1.1-1.5 x the truth) and C_mid under-estimated.  The
runs of one project (one model, one evaluation set, recipes that differ in a few knobs) have
similar B: the paper's Table 1 spans 1.65-2.44 for eight of its ten recipes.  A finished run
pins its B down; a young run can borrow what they agree on, and its banana shortens.

What it is not: a prior on A, which is what a project compares and must never be pulled
towards the others' ceilings; nor a hard constraint.  The prior is a Student-t (``NU`` = 4
degrees of freedom) on ln B, so a recipe whose B really differs (the paper's math+code run
at B = 1.09 against a project at ~1.9) pays a small price and its data win once they speak:
measured in ``bench/calibration.py --noise-prior`` with each recipe's runs left out of its own
prior, A's coverage holds where a normal prior lost 14 points at 2 x C_mid.

Opt-in (``FitOptions.b_prior``; on the server ``b_prior: "project"``): a project that mixes
very different recipes, or wants each run judged on its own data alone, leaves it off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from .model import FloatArray

NU = 4.0  # degrees of freedom of the t prior on ln B: heavy tails, so the data can overrule it
SD_FLOOR = 0.1  # a learned prior never claims ln B to better than this (B within ~+-20%)
MIN_RUNS = 3  # a spread needs a few runs: fewer give no prior
LOG_B_RANGE = (math.log(0.05), math.log(50.0))  # what an explicit prior may centre on
# Without a learned prior, B is free below STEEP_B and a t tail (scale STEEP_SCALE in ln B)
# damps knees steeper than it: no published RL curve is that sharp (the paper's Table 1:
# 1.09-2.44; the public real curves 0.6-1.8), and Jeffreys' prior alone gives B = 8 the weight
# of B = 2.  A young run's banana reaches exactly there: a steep early knee under a low
# ceiling.  Measured (``bench/calibration.py`` windows, 540 runs each, two seeds; real curves):
# at 1 x C_mid the forecast's median error 0.065 -> 0.060 and 0.074 -> 0.066, A's interval
# holds the truth 94.6 -> 96.3% and 93.2 -> 95.3%; at >= 2 x C_mid p90 error 0.0346 -> 0.0345
# and 0.0355 -> 0.0342, identification and coverage unchanged; real curves and alerts unchanged.
STEEP_B = 2.5
STEEP_SCALE = 0.3


def check_b_prior(mean: float, sd: float) -> None:
    """Raise ValueError, naming the bad number and its range, unless (mean, sd) of ln B is a
    usable prior: shared by ``scalewatch fit --b-prior`` and the API's ``b_prior`` fields."""
    lo, hi = LOG_B_RANGE
    if not lo <= mean <= hi:
        raise ValueError(f"B prior mean {mean} (of ln B) must lie in [{lo:.2f}, {hi:.2f}]")
    if not 0.0 < sd <= 5.0:
        raise ValueError(f"B prior sd {sd} (of ln B) must lie in (0, 5]")


def log_b_estimate(ci_b: Any) -> tuple[float, float] | None:
    """(mean, sd) of ln B from a fit's 95% B interval, or None when it has none.

    The interval is what every stored fit already carries, so a project's prior is learned
    from fits stored before priors existed without refitting them.
    """
    if not isinstance(ci_b, (list, tuple)) or len(ci_b) != 2:
        return None
    lo, hi = ci_b
    if lo is None or hi is None or not 0.0 < lo <= hi or not math.isfinite(hi):
        return None
    return (math.log(lo) + math.log(hi)) / 2.0, (math.log(hi) - math.log(lo)) / (2 * 1.96)


def learn_b_prior(estimates: Iterable[tuple[float, float] | None]
                  ) -> tuple[float, float] | None:
    """The (centre, scale) of the t prior on ln B from finished runs' (mean, sd) of ln B.

    The centre is the runs' average; the scale holds both the runs' spread (recipes differ)
    and each run's own uncertainty, never below ``SD_FLOOR``.  None with fewer than
    ``MIN_RUNS`` usable runs.
    """
    pairs = [(float(m), float(s)) for e in estimates if e is not None for m, s in [e]
             if math.isfinite(m) and math.isfinite(s) and s >= 0.0]
    if len(pairs) < MIN_RUNS:
        return None
    means = np.array([m for m, _ in pairs])
    sds = np.array([s for _, s in pairs])
    scale = float(np.sqrt(means.var(ddof=1) + float(np.mean(sds**2))))
    return float(means.mean()), max(scale, SD_FLOOR)


def log_density(b: FloatArray, prior: tuple[float, float] | None) -> FloatArray:
    """Log prior weight (up to a constant) of each B in ``b``, on top of Jeffreys' prior.

    Without a learned ``prior``: 0 up to ``STEEP_B``, a t tail beyond it (the default soft
    ceiling).  A learned prior replaces the ceiling: a project whose finished runs are
    steeper knows better."""
    if prior is None:
        z = np.maximum(np.log(b) - math.log(STEEP_B), 0.0) / STEEP_SCALE
    else:
        z = (np.log(b) - prior[0]) / prior[1]
    return -0.5 * (NU + 1.0) * np.log1p(z * z / NU)  # a t density with NU dof, in z


def b_prior_record(prior: tuple[float, float] | None) -> dict[str, Any] | None:
    """The ``B`` entry of a fit's public ``prior`` block (None when it used none)."""
    if prior is None:
        return None
    return {"median": round(math.exp(prior[0]), 4), "log_sd": round(float(prior[1]), 4),
            "dof": NU}
