"""The A history of points that arrived all at once: fitted afterwards, prefix by prefix.

A live run is refitted as its points stream in, so its A history shows what scalewatch said
at each point of the run.  An imported run (``scalewatch import``, the MLflow endpoint, a
finished run replayed), or a trainer's spool synced after a long outage, arrives in one or a
few batches: its history would be one fit, and the question a team asks before trusting
the forecast -- "when would it have known?" -- would have no answer.  So when a refit finds
the series at least doubled and by at least ``MIN_NEW_POINTS`` since the fit before, the
refitter first fits the prefixes the missing history would have had (the points up to a
step, in the order they were logged), at compute spaced by ``STEP_RATIO``, at most
``MAX_PREFIXES`` of them, and stores them before the new fit, marked ``backfilled``.

They are the fits a live run would have got from the same points, but made after the
fact, with today's settings and priors; alerts see them as history, as they would have
seen live fits (a fall between them and the new fit is one, whenever the points came).
A live run never doubles between two refits once it has ``MIN_NEW_POINTS`` points, so
streaming runs get none, and the refitter's work under load is unchanged.
"""

from __future__ import annotations

import numpy as np

MIN_NEW_POINTS = 50  # fewer new points than this: no backfill (a live run's refits)
MIN_PREFIX_POINTS = 20  # a prefix shorter than this tells nothing about A
STEP_RATIO = 1.25  # compute between consecutive backfilled fits (x 1.25: ~10 per decade)
MAX_PREFIXES = 12  # at most this many fits a backfill (~40 ms each with intervals)


def prefix_lengths(compute: np.ndarray, fitted_until: float | None) -> list[int]:
    """How many points (in logged order) each backfilled fit sees; empty when there is
    nothing to backfill.  ``compute``: the series' compute in logged order;
    ``fitted_until``: the highest compute the previous stored fit saw (None: no fit yet)."""
    n = int(compute.size)
    # Compute reached so far at each point (a restart may log a lower compute again).
    reached = np.maximum.accumulate(np.where(np.isfinite(compute), compute, -np.inf))
    n_fitted = 0 if fitted_until is None else int(np.searchsorted(reached, fitted_until,
                                                                  side="right"))
    if n - n_fitted < max(MIN_NEW_POINTS, n_fitted):
        return []
    first = max(n_fitted + 1, MIN_PREFIX_POINTS)
    if first >= n or reached[first - 1] <= 0:
        return []
    # In logs: compute may span 1e-300 to 1e300, whose ratio is no float.
    log_start, log_end = float(np.log(reached[first - 1])), float(np.log(reached[-1]))
    steps = (log_end - log_start) / np.log(STEP_RATIO)
    if not steps >= 1.0:
        return []
    k = min(int(steps), MAX_PREFIXES)  # below the end by at least one step
    levels = np.exp(np.linspace(log_start, log_end - np.log(STEP_RATIO), k))
    # The longest prefix whose compute has not passed each level.
    lengths = np.searchsorted(reached, levels, side="right")
    lengths = np.clip(lengths, first, n - 1)
    return sorted({int(m) for m in lengths})
