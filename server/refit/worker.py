"""The refitter: one background thread per server process, coordinated through the database.

Ingestion only bumps a counter on the series (the refit seam), so an ingest request never waits
for a fit. This thread claims dirty series with a lease (never two workers on one series, even
across processes), fits them warm-started from their previous fit, stores every fit as history
and tells listeners (alert evaluation). Bursts of ingests coalesce: however many batches arrived
while a fit ran, the next claim fits the series once more. A fit that raises is logged, counted
and stored as an `insufficient_data` fit whose message says "fit failed: ..."; ingestion never
notices.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Protocol

import numpy as np

from scalewatch.server.background import PollingWorker, worker_identity
from scalewatch.server.domain.runs import FitContext
from scalewatch.server.fitting import FitOptions, FitResult, fit_curve
from scalewatch.server.fitting.hindcast import hindcasts_of
from scalewatch.server.refit.backfill import prefix_lengths
from scalewatch.server.refit.groups import GroupFitListener, GroupRefits
from scalewatch.server.services.fits import fit_options_for, fit_record, prior_source
from scalewatch.server.services.runs import fit_context
from scalewatch.server.store.base import DirtySeries, FitStore, GroupStore
from scalewatch.server.store.fit_records import FitRecord

log = logging.getLogger("scalewatch.refit")


def utcnow() -> datetime:
    """Aware UTC, as the store's timestamps (server.db's own helper is out of this unit's
    reach: the refitter sees the store's protocol only)."""
    return datetime.now(timezone.utc)


class FitCounter(Protocol):
    """Where fit outcomes are counted (`scalewatch.server.api.telemetry.Metrics` for /metrics)."""

    def fit_done(self, ok: bool) -> None: ...
    def refit_lag(self, seconds: float) -> None: ...


# (fit context of the run, series id, the stored fit, the fit before it)
FitListener = Callable[[FitContext, int, FitRecord, FitRecord | None], None]


class RefitStore(FitStore, GroupStore, Protocol):
    """What the refitter needs: the series queue and the group queue."""


class Refitter(PollingWorker):
    thread_name = "scalewatch-refit"
    notify_gap = 0.05  # a fit starts at most 50 ms after the ingest that asked for it

    def __init__(
        self,
        store: RefitStore,
        poll_interval: float = 0.5,
        lease_seconds: float = 120.0,
        metrics: FitCounter | None = None,
        listeners: list[FitListener] | None = None,
        group_listeners: list[GroupFitListener] | None = None,
    ) -> None:
        super().__init__(poll_interval)
        self.store = store
        self.lease_seconds = lease_seconds
        self.metrics = metrics
        self.listeners = listeners or []
        self.owner = worker_identity()
        self.groups = GroupRefits(store, self.owner, lease_seconds, group_listeners,
                                  metrics.fit_done if metrics is not None else None)

    # ---- one pass ---------------------------------------------------------------------------
    def run_once(self) -> int:
        """Fit every series currently dirty and unleased, and every such group; returns how
        many were fitted. Series and groups take turns (a claim of each per round): a group's
        fit reads its members' points, which the series fits just caught up with, and a group
        that stays dirty while its seeds keep logging must not starve their own fits."""
        done = 0
        while not self._stop.is_set():
            claimed = self.store.claim_dirty_series(self.owner, self.lease_seconds, limit=4)
            for item in claimed:
                self._refit(item)
                done += 1
            groups = self.groups.run_batch()
            done += groups
            if not claimed and not groups:
                return done
        return done

    @staticmethod
    def _hindcast(item: DirtySeries, compute: list[float], values: list[float],
                  options: FitOptions) -> list[list[float] | None] | None:
        """A finished run's hindcasts from 1/2, 1/3 and 1/5 of its compute (what its project's
        drift allowance per horizon is learned from; ``hindcast.hindcasts_of``), each None
        where that window gives no curve band; None when the engine fails on them."""
        try:
            hs = hindcasts_of(np.asarray(compute), np.asarray(values), options)
        except Exception:  # noqa: BLE001 - a hindcast failing must not lose the fit
            log.exception("hindcast of run %s metric %s failed", item.run_id, item.metric)
            return None
        return [None if h is None else h.as_list() for h in hs]

    @staticmethod
    def _backfill(
        item: DirtySeries,
        previous: FitRecord | None,
        warm: FitResult | None,
        series: tuple[list[float], list[float], list[int]],
        options: FitOptions,
        context: FitContext,
        metric: str,
    ) -> tuple[list[FitRecord], FitResult | None]:
        """The fits of the history that points arriving at once skipped (``backfill.py``),
        oldest first, and the warm start for the fit after them."""
        if options.fit_until is not None:  # a held-out window: its fits never see the rest
            return [], warm
        fitted_until = ((previous or {}).get("fit_range") or [None, None])[1]
        compute, values, steps = (np.asarray(a) for a in series)
        earlier: list[FitRecord] = []
        for m in prefix_lengths(compute, fitted_until):
            t0 = time.perf_counter()
            try:
                result = fit_curve(compute[:m], values[:m], options, previous=warm,
                                   steps=steps[:m])
            except Exception:  # noqa: BLE001 - a missing history must not cost the fit
                log.exception("backfill of run %s metric %s failed", item.run_id, item.metric)
                break
            if result.status == "insufficient_data":
                continue
            warm = result
            record = prior_source(
                fit_record(result, metric=metric, fit_seconds=round(time.perf_counter() - t0, 4)),
                context, options)
            record["backfilled"] = True
            earlier.append(record)
        return earlier, warm

    def _refit(self, item: DirtySeries) -> None:
        try:
            context = fit_context(self.store, item.run_id)
            metric, previous = self.store.latest_fit(item.run_id, item.metric)
            snapshot_at = utcnow()
            requested, compute, values, steps = self.store.series_snapshot(item.series_id)
            options = fit_options_for(context)
        except Exception:  # noqa: BLE001 - a bad series must not stop the others
            log.exception("loading run %s metric %s to fit failed", item.run_id, item.metric)
            if self.metrics is not None:
                self.metrics.fit_done(False)
            # Mark it done so a deterministic failure does not spin; new points retry it.
            self.store.finish_refit(item.series_id, self.owner, item.requested, None, False)
            return
        warm = None
        if previous and previous.get("status") != "insufficient_data":
            try:
                warm = FitResult.from_dict(previous)
            except (KeyError, TypeError, ValueError):
                warm = None
        earlier, warm = self._backfill(item, previous, warm, (compute, values, steps),
                                       options, context, metric)
        t0 = time.perf_counter()
        ok = True
        try:
            result = fit_curve(np.asarray(compute), np.asarray(values), options, previous=warm,
                               steps=np.asarray(steps))
        except Exception as exc:  # noqa: BLE001 - a bad series must not stop the others
            # Points the store accepts can still break the engine (compute spanning 1e-300 ..
            # 1e300, values at the ends of float range). Store the failure as the series' fit:
            # readers then show why instead of "pending" forever, and it is not re-queued until
            # new points arrive.
            log.exception("fit of run %s metric %s failed", item.run_id, item.metric)
            ok = False
            result = FitResult(
                status="insufficient_data",
                message=f"fit failed: {type(exc).__name__}: {exc}"[:500],
                n_points=len(values),
                target_compute=options.target_compute,
                value_range=options.value_range,
            )
        stored = prior_source(
            fit_record(result, metric=metric, fit_seconds=round(time.perf_counter() - t0, 4)),
            context, options)
        if context.status == "finished" and "internal" in stored:
            # Stored even when null (a failed fit, too few points): the key says "tried", so
            # the runs that learn from this one do not queue it again and again.
            stored["internal"]["hindcast"] = (
                self._hindcast(item, compute, values, options) if ok else None)
        fit_id = self.store.finish_refit(
            item.series_id, self.owner, max(requested, item.requested), stored,
            options.intervals and ok, earlier=earlier, snapshot_at=snapshot_at,
        )
        if self.metrics is not None:
            self.metrics.fit_done(ok)
            if item.dirty_since is not None:
                self.metrics.refit_lag((utcnow() - item.dirty_since).total_seconds())
        for run_id, name in context.finished_without_hindcast:
            self.store.request_fit(run_id, name, force=True)  # its refit adds the hindcast
        stored["fit_id"] = fit_id
        for listener in self.listeners:
            try:
                listener(context, item.series_id, stored, previous)
            except Exception:  # noqa: BLE001 - alerts failing must not affect fitting
                log.exception("fit listener %r failed", listener)
