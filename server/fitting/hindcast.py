"""How far a finished run strayed beyond its own forecast, and the drift a project's runs need.

The misspecification allowance (``intervals.DRIFT_RATE``) widens every prediction beyond the
fit window for what the sigmoid cannot foresee: late slow gains or declines.  Its default is
learned on 47 public curves of several teams, and it is the 95th percentile of what they
needed; most runs need none of it, so for a project whose runs do follow the sigmoid the
default makes every forecast interval wider than it has to be (``bench/calibration.py``: 99%
coverage where 95% is promised), and a project whose evaluation noise is persistent needs more.

A finished run answers the question for its project: fit its first half, forecast its end,
and compare with what it showed there (a *hindcast*).  The miss beyond the exact-model
interval is the drift rate this run needed.  :func:`learn_drift_rate` turns the hindcasts of
a project's finished runs into the project's rate: the rank of their needed rates that a new
run exceeds with probability at most 5% (split conformal), once there are enough of them
(``MIN_HINDCASTS``) for a rank to vouch for that.

A finished run is cut at several fractions of its compute (``HORIZON_FRACTIONS``,
:func:`hindcasts_of`), and :func:`allowance_knots` learns an allowance per horizon from all
those hindcasts: its level that rank, pooled over the horizons, its shape across them from
what each horizon's hindcasts needed.  A fit takes the allowance at its own distance past
its window (``FitOptions.drift_allowance``), and a claim of A carries it at the run's
target (``intervals.a_with_drift``: a project whose runs drift past their forecasts cannot
vouch for a ceiling any closer than that).  On for
every project (``services/fits.drift_allowance_for``), unlike the noise and B priors: a
conformal rank assumes nothing about the runs being alike, only that a new run is one more of
them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

import numpy as np
from numpy.typing import ArrayLike

from .fit import fit_curve
from .intervals import allowance_rate
from .model import value_span
from .result import FitOptions

COVERAGE = 0.95  # a prediction interval's promise
MIN_HINDCASTS = 19  # fewer finished runs cannot vouch for 95% (the default allowance stays)
# Where a finished run is cut for its hindcasts at several horizons (fractions of its compute):
# forecasts are made from windows that end anywhere from well before half a run to near its
# end, and how much a run strays beyond its forecast does not grow linearly with ln(compute /
# window end), so one horizon (half-run -> end) over-widens the others (bench/RESULTS-
# calibration-sampled.md, round 4).
HORIZON_FRACTIONS = (0.5, 1.0 / 3.0, 0.2)


@dataclass(frozen=True)
class Hindcast:
    """One finished run's hindcast: the miss (shown minus forecast) at its end, the
    exact-model sd of the forecast there on the miss's side, and ln(end / half-run).  The miss
    and the sd are in units of the run's value range (its width is 1 on a [0, 1] pass rate),
    so a project's runs on different scales pool into one allowance, which each fit takes in
    its own units (``intervals.drift_rate_at``)."""

    miss: float
    sd: float
    beyond: float

    def as_list(self) -> list[float]:
        return [round(self.miss, 6), round(self.sd, 6), round(self.beyond, 6)]


def hindcast_of(compute: ArrayLike, values: ArrayLike, options: FitOptions,
                fraction: float = 0.5) -> Hindcast | None:
    """Fit a finished run on the first ``fraction`` of its compute (half by default; with the
    run's own ``options``) and compare its forecast with the mean of its last evaluations (the
    last 5%, at least 3).

    None when the window gives no curve band (too few points, a flat run).
    """
    from . import predict, predict_interval  # noqa: PLC0415 - the package imports this module

    c = np.asarray(compute, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(c) & np.isfinite(y)
    c, y = c[keep], y[keep]
    if c.size < 20 or not c[-1] > 0:
        return None
    k = max(3, c.size // 20)
    at = float(c[-k:].mean())
    half = replace(options, fit_until=float(c[-1]) * fraction, target_compute=at,
                   intervals=True)
    res = fit_curve(c, y, half)
    if res.predicted_interval is None or res.fit_range is None or not res.fit_range[1] > 0:
        return None
    lo, hi = (float(v[0]) for v in predict_interval(res, [at], n_evals=k, misspecification=False))
    centre = float(predict(res, [at])[0])
    beyond = float(np.log(at / res.fit_range[1]))
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(centre)) or beyond <= 0:
        return None
    miss = float(y[-k:].mean()) - centre
    sd = ((hi - centre) if miss > 0 else (centre - lo)) / 1.96
    unit = value_span(options.value_range)
    return Hindcast(miss=miss / unit, sd=max(sd / unit, 1e-9), beyond=beyond)


def needed_rate(h: Hindcast) -> float:
    """The smallest drift rate whose allowance covers this hindcast's miss: zero when the
    exact-model 95% interval already holds it."""
    excess = h.miss**2 - (1.96 * h.sd) ** 2
    return float(np.sqrt(excess) / (1.96 * h.beyond)) if excess > 0 else 0.0


def _conformal(needs: list[float]) -> float | None:
    """The split-conformal rank ceil(0.95 (k + 1)) among ``needs`` (None: too few for it)."""
    ranked = sorted(needs)
    rank = int(np.ceil(COVERAGE * (len(ranked) + 1)))
    return ranked[rank - 1] if rank <= len(ranked) else None


def learn_drift_rate(hindcasts: Iterable[Hindcast | tuple[float, float, float] | None]
                     ) -> float | None:
    """The drift rate (sd per unit ln(compute / window end)) a project's finished runs vouch
    for: the ceil(0.95 (k + 1))-th smallest of the k rates they needed (a split-conformal
    bound: a new run of the project needs no more with probability >= 95%, whatever the shape
    of the misses, and real misses are heavy-tailed: most runs need none, a few a lot).  It
    may be smaller or larger than the default.  None with fewer than ``MIN_HINDCASTS`` runs,
    where no rank vouches for 95% (the caller keeps the default)."""
    rows = [h if isinstance(h, Hindcast) else Hindcast(*map(float, h))
            for h in hindcasts if h is not None]
    need = [needed_rate(h) for h in rows if np.isfinite(h.miss) and h.sd > 0 and h.beyond > 0]
    return _conformal(need) if len(need) >= MIN_HINDCASTS else None


def hindcasts_of(compute: ArrayLike, values: ArrayLike, options: FitOptions
                 ) -> list[Hindcast | None]:
    """A finished run's hindcasts from each of ``HORIZON_FRACTIONS`` of its compute, in that
    order (None where that window gives no curve band)."""
    return [hindcast_of(compute, values, options, f) for f in HORIZON_FRACTIONS]


def _excess_sd(h: Hindcast) -> float:
    """The sd beyond the exact-model interval this hindcast's miss needed (0: none)."""
    excess = h.miss**2 - (1.96 * h.sd) ** 2
    return float(np.sqrt(excess) / 1.96) if excess > 0 else 0.0


def allowance_knots(runs: Iterable[Sequence[Hindcast | tuple[float, float, float] | None]]
                    ) -> tuple[tuple[float, float], ...] | None:
    """The drift allowance per forecast horizon that finished runs' hindcasts at several
    horizons vouch for (per run, one per ``HORIZON_FRACTIONS`` as :func:`hindcasts_of` gives
    them; a shorter sequence, e.g. a run stored with its half-run hindcast only, counts at the
    horizons it has): ((horizon, sd), ...) sorted by horizon (each horizon's median
    ``beyond``), what ``FitOptions.drift_allowance`` takes and ``intervals.allowance_rate``
    reads.  None with fewer than ``MIN_HINDCASTS`` runs that have a hindcast.

    The level is one split-conformal rank (as :func:`learn_drift_rate`) among every hindcast
    of every run, pooled over the horizons; the shape across horizons is learned too:

    1. ``rate``: the rank among the rates (sd beyond the exact-model interval per unit
       ln(compute / window end)) the hindcasts needed: an allowance growing in proportion to
       the distance past the window.  Zero when 95% of the hindcasts needed nothing.
    2. Each horizon's shape ``s``: the geometric mean of its distance and the root mean
       square of what its hindcasts needed, each need capped at ``rate`` x that distance (one
       run that strayed far sets a horizon's shape no more than the proportional allowance
       would give it).
    3. The knots: ``s`` times the rank among the hindcasts' needs divided by their horizon's
       ``s``, never less than a nearer horizon's (a run may stray less from a far forecast's
       wide curve band than from a near one's narrow band, but a horizon whose hindcasts
       needed nothing must not leave every forecast past it with no allowance at all).

    Why a learned shape (round 12 of ``bench/RESULTS-calibration-sampled.md``): how far runs
    stray beyond their forecasts does not grow in proportion to the distance.  A forecast from
    early in a run already carries a wide curve band, so it needs little more; one from past
    the knee carries a narrow band and needs nearly as much, nearer.  One proportional rate
    covered 97-99% from 1.5-2 x C_mid and 91-92% from 5 x on the held-out family; half the
    hindcasts' own shape (the geometric mean; all of it over-fits the few runs that strayed)
    evens that out.  Why pooled and not a rank per horizon (round 4): a project has a few
    dozen finished runs, and for k < 39 the rank ceil(0.95 (k + 1)) is the k-th of k, the
    largest miss, so every knot was set by its one worst run; pooling the horizons puts the
    rank among three times as many hindcasts, off the extreme.  The price: one run's three
    hindcasts are not independent draws, and the shape is learned from the hindcasts the rank
    is then taken over, so the 95% is the pooled rank's, not an exact conformal guarantee."""
    per: dict[int, list[tuple[float, float]]] = {}  # horizon -> (beyond, sd needed) each
    runs_kept = 0
    for run in runs:
        kept = 0
        for i, h in enumerate(run):
            if h is None:
                continue
            row = h if isinstance(h, Hindcast) else Hindcast(*map(float, h))
            if np.isfinite(row.miss) and row.sd > 0 and row.beyond > 0:
                per.setdefault(i, []).append((row.beyond, _excess_sd(row)))
                kept += 1
        runs_kept += kept > 0
    if runs_kept < MIN_HINDCASTS:
        return None
    rate = _conformal([need / beyond for hs in per.values() for beyond, need in hs])
    if rate is None:
        return None
    at = {i: float(np.median([beyond for beyond, _ in hs])) for i, hs in per.items()}
    shape = {i: float(np.sqrt(at[i] * np.sqrt(np.mean(
        [min(need, rate * at[i]) ** 2 for _, need in hs])))) for i, hs in per.items()}
    level = _conformal([need / shape[i] if shape[i] > 0 else 0.0
                        for i, hs in per.items() for _, need in hs])
    if level is None:
        return None
    horizons, sds = zip(*sorted((at[i], level * shape[i]) for i in per), strict=True)
    return tuple(zip(horizons, accumulate(sds, max), strict=True))


def learn_drift_allowance(runs: Iterable[Sequence[Hindcast | tuple[float, float, float] | None]],
                          beyond: float) -> float | None:
    """The drift rate for a forecast ``beyond`` = ln(target / window end) past its window,
    from finished runs' hindcasts at several horizons: :func:`allowance_knots` read at
    ``beyond`` by ``intervals.allowance_rate`` (the sd interpolated linearly in ln(compute)
    between the horizons, from zero at the window's end, grown in proportion past the
    farthest), as a rate (sd per unit
    ``beyond``) so that ``FitOptions.drift_rate`` takes it unchanged at that distance.  A fit
    with ``FitOptions.drift_allowance`` = those knots takes the same rate at its own target.
    None with fewer than ``MIN_HINDCASTS`` finished runs that have a hindcast, or when
    ``beyond`` is not positive."""
    if not beyond > 0:
        return None
    knots = allowance_knots(runs)
    return None if knots is None else allowance_rate(knots, beyond)
