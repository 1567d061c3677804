"""Fit history, the refit work queue (leases on dirty series, safe with many workers), and the
fit reads alert evaluation needs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, or_, select, update
from sqlalchemy.orm import Session

from scalewatch.server.db.models import Fit, Point, Run, Series, utcnow
from scalewatch.server.domain.runs import FitContext
from scalewatch.server.store.base import DirtySeries, NotFound
from scalewatch.server.store.common import SqlBase, as_utc, iso
from scalewatch.server.store.fit_records import (
    FitHistoryEntry,
    FitRecord,
    fit_columns,
    fit_summary,
    history_entry,
)
from scalewatch.server.store.runs_sql import explicit_fit_metric, resolve_fit_metric


def _add_fit(s: Session, series_id: int, record: FitRecord, has_intervals: bool) -> int:
    """Insert one fit of a series; its stored result carries its id and time. Returns the id."""
    fit = Fit(series_id=series_id, created_at=utcnow(), **fit_columns(record, has_intervals))
    s.add(fit)
    s.flush()
    fit.result = {**record, "fit_id": fit.id, "fitted_at": iso(fit.created_at)}
    fit.summary = fit_summary(fit.result)
    return fit.id


# The newest finished runs a fit learns from.  Every refit reads them (their fit summaries),
# so a project of thousands of finished runs must not make every fit read thousands: 200 are
# plenty for each use (the drift rate's rank is then the 191st of 200), and the newest runs are
# the ones most like the next.  Measured on a project of 1,000 finished runs: reading all of
# them took 23 ms a fit on SQLite and 38 ms on PostgreSQL (as much as the fit itself), the
# newest 200 take 7 and 13 ms.
LEARN_FROM_NEWEST = 200


Triple = tuple[float, float, float]


def _triple(h: Any) -> Triple | None:
    """One stored hindcast, [miss, sd, beyond] (``hindcast.Hindcast.as_list``), or None."""
    if isinstance(h, list) and len(h) == 3 and all(isinstance(v, (int, float)) for v in h):
        return float(h[0]), float(h[1]), float(h[2])
    return None


def stored_hindcasts(stored: Any) -> list[Triple | None] | None:
    """A finished run's stored hindcasts, one per horizon (``hindcast.HORIZON_FRACTIONS``
    order: from 1/2, 1/3, 1/5 of its compute; None where that window had no band).  A fit
    stored before there were several horizons holds one triple, its half-run hindcast: read
    as the first horizon's.  None when there is none (null: too few points)."""
    if (single := _triple(stored)) is not None:
        return [single]
    if not isinstance(stored, list):
        return None
    rows = [_triple(h) for h in stored]
    return rows if any(r is not None for r in rows) else None


def finished_runs_teach(s: Session, project_id: int, metric: str,
                        but: int | None = None) -> dict[str, list[Any]]:
    """What the newest finished runs of a project (but run `but`; ``LEARN_FROM_NEWEST``)
    teach its fits -- the drift allowance, and the opt-in priors -- from the summaries of
    their latest fits of `metric`: their noise posteriors (rho mean, sd), their hindcasts,
    the B intervals of those whose A is identified, and which of them have no hindcast yet
    (fitted before they finished, or before hindcasts existed): (run id, metric) pairs for
    the refitter to queue."""
    query = (
        select(Run.id, Fit.summary)
        .select_from(Run)
        .join(Series, and_(Series.run_id == Run.id, Series.name == metric))
        .join(Fit, Fit.id == Series.latest_fit_id)
        .where(Run.project_id == project_id, Run.status == "finished")
    )
    if but is not None:
        query = query.where(Run.id != but)
    rows = s.execute(query.order_by(Run.id.desc()).limit(LEARN_FROM_NEWEST)).all()
    noise, hindcasts, missing, b = [], [], [], []
    for run_id, summary in rows:
        summary = summary or {}
        # B from `ok` fits only: an unidentified fit's B interval is mostly the prior's.
        if summary.get("status") == "ok" and (ci_b := (summary.get("ci") or {}).get("B")):
            b.append(ci_b)
        rho = summary.get("noise_rho")
        if isinstance(rho, list) and len(rho) == 2 and None not in rho:
            noise.append((float(rho[0]), float(rho[1])))
        if "hindcast" not in summary:
            missing.append((int(run_id), metric))
        elif (per_horizon := stored_hindcasts(summary["hindcast"])) is not None:
            hindcasts.append(per_horizon)
    return {"noise": noise, "hindcasts": hindcasts, "missing": missing, "b": b}


class FitsMixin(SqlBase):
    # ---- the refit queue -------------------------------------------------------------------
    def claim_dirty_series(
        self, owner: str, lease_seconds: float = 120, limit: int = 8
    ) -> list[DirtySeries]:
        """Lease up to `limit` series whose points changed since their last fit.

        The claim is a compare-and-set UPDATE, atomic on both databases: two workers can never
        hold the same series, and a crashed worker's lease expires so nothing is forgotten.
        """
        now = utcnow()
        with self.session() as s:
            candidates = (
                s.execute(
                    select(Series.id)
                    .where(
                        Series.refit_requested > Series.refit_done,
                        or_(Series.lease_until.is_(None), Series.lease_until < now),
                    )
                    .order_by(Series.updated_at)
                    .limit(limit)
                )
                .scalars()
                .all()
            )
        claimed: list[DirtySeries] = []
        for sid in candidates:
            with self.session() as s:
                res = s.execute(
                    update(Series)
                    .where(
                        Series.id == sid,
                        Series.refit_requested > Series.refit_done,
                        or_(Series.lease_until.is_(None), Series.lease_until < now),
                    )
                    .values(lease_owner=owner, lease_until=now + timedelta(seconds=lease_seconds))
                    .returning(Series.run_id, Series.name, Series.refit_requested,
                               Series.dirty_since)
                ).first()
                if res is not None:
                    claimed.append(DirtySeries(sid, res[0], res[1], res[2], as_utc(res[3])))
        return claimed

    def refit_backlog(self) -> tuple[int, datetime | None]:
        """(series waiting for a refit, the arrival of the oldest point none has fitted)."""
        with self.session() as s:
            n, oldest = s.execute(
                select(func.count(), func.min(Series.dirty_since))
                .where(Series.refit_requested > Series.refit_done)
            ).one()
        return int(n), as_utc(oldest)

    def refit_wait(self, run_id: int, metric: str) -> float | None:
        """Seconds the oldest point of (run, metric) that no fit includes has waited (None:
        every point is fitted, or the wait is unknown)."""
        with self.session() as s:
            since = s.scalar(
                select(Series.dirty_since).where(
                    Series.run_id == run_id, Series.name == metric,
                    Series.refit_requested > Series.refit_done))
        since = as_utc(since)
        return None if since is None else max((utcnow() - since).total_seconds(), 0.0)

    def finish_refit(
        self,
        series_id: int,
        owner: str,
        requested: int,
        result: FitRecord | None,
        has_intervals: bool,
        earlier: Sequence[FitRecord] = (),
        snapshot_at: datetime | None = None,
    ) -> int | None:
        """Store a fit (if any) and mark the series fitted up to `requested`; drop the lease.
        `earlier`: backfilled fits (``refit/backfill.py``), stored first, oldest first, so the
        history's order is the order of the compute they saw. `snapshot_at`: when the fitted
        points were read; points that arrived since keep the series dirty, and their wait is
        counted from then (at most that much too long)."""
        with self.session() as s:
            fit_id = None
            for past in earlier:
                _add_fit(s, series_id, past, has_intervals)
            if result is not None:
                fit_id = _add_fit(s, series_id, result, has_intervals)
            values: dict[str, Any] = {
                "lease_owner": None,
                "lease_until": None,
                "refit_done": requested,
                "dirty_since": case(
                    (Series.refit_requested > requested, snapshot_at or utcnow()), else_=None),
            }
            if fit_id is not None:
                values["latest_fit_id"] = fit_id
            s.execute(
                update(Series)
                .where(Series.id == series_id, Series.lease_owner == owner)
                .values(**values)
            )
            return fit_id

    def request_fit(self, run_id: int, metric: str, force: bool = False) -> bool:
        """Queue a fit of (run, metric) unless one is queued or (unless `force`) its latest
        fit is current.

        Ingest queues only the run's fit metric; a read of another metric's fit calls this
        instead of fitting inside the request, and the refitter does the rest. "Current" means
        stored after the series last changed; `force` refits a current one (a finished run's
        fit that predates its hindcast). False when the run has no points of `metric`.
        """
        with self.session() as s:
            row = s.execute(
                select(
                    Series.id,
                    Series.refit_requested > Series.refit_done,
                    Series.updated_at,
                    Fit.created_at,
                )
                .join(Fit, Fit.id == Series.latest_fit_id, isouter=True)
                .where(Series.run_id == run_id, Series.name == metric)
            ).first()
            if row is None:
                return False
            sid, queued, changed_at, fitted_at = row
            if queued or (not force and fitted_at is not None and changed_at <= fitted_at):
                return True  # the usual read: nothing to write (and no SQLite write lock)
            # Compare-and-set like the claim: concurrent readers queue it once, not N times.
            s.execute(
                update(Series)
                .where(Series.id == sid, Series.refit_requested <= Series.refit_done)
                .values(refit_requested=Series.refit_requested + 1)
            )
            return True

    def latest_fits(
        self, run_ids: list[int], metric: str
    ) -> dict[int, tuple[FitRecord | None, bool]]:
        """`latest_fit(run, metric)` and `request_fit(run, metric)` of every run, by run id:
        (its latest stored fit or None, whether a fit is queued or current), in one query and
        one compare-and-set UPDATE for the series whose fit is older than their points (a
        Compare page of ten runs made 50 round trips of this). Raises `NotFound` for an unknown
        run."""
        ids = list(dict.fromkeys(run_ids))
        with self.session() as s:
            rows = s.execute(
                select(
                    Run.id,
                    Series.id,
                    Series.refit_requested > Series.refit_done,
                    Series.updated_at,
                    Fit.created_at,
                    Fit.result,
                )
                .select_from(Run)
                .outerjoin(Series, and_(Series.run_id == Run.id, Series.name == metric))
                .outerjoin(Fit, Fit.id == Series.latest_fit_id)
                .where(Run.id.in_(ids))
            ).all()
            missing = set(ids) - {r[0] for r in rows}
            if missing:
                raise NotFound(f"run {min(missing)} not found")
            stale = [sid for _, sid, queued, changed_at, fitted_at, _ in rows
                     if sid is not None and not queued
                     and (fitted_at is None or changed_at > fitted_at)]  # fmt: skip
            if stale:  # compare-and-set, as request_fit: concurrent readers queue it once
                s.execute(
                    update(Series)
                    .where(Series.id.in_(stale), Series.refit_requested <= Series.refit_done)
                    .values(refit_requested=Series.refit_requested + 1)
                )
            return {run_id: (result, sid is not None) for run_id, sid, _, _, _, result in rows}

    # ---- inputs of a fit -------------------------------------------------------------------
    def series_snapshot(
        self, series_id: int
    ) -> tuple[int, list[float], list[float], list[int]]:
        """(refit_requested, compute, values, steps) read from one consistent snapshot.

        Ingest bumps the counter in the same transaction as the points, so a fit of exactly
        these points may mark the series done up to exactly this counter: no fit is lost and
        none is repeated for points it has already seen.
        """
        with self.sessions() as s:
            if self.dialect == "postgresql":
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            requested = s.scalar(select(Series.refit_requested).where(Series.id == series_id))
            rows = s.execute(
                select(Point.compute, Point.value, Point.step)
                .where(Point.series_id == series_id)
                .order_by(Point.step)
            ).all()
            s.rollback()  # read-only: end the snapshot
        return (int(requested or 0), [r[0] for r in rows], [r[1] for r in rows],
                [r[2] for r in rows])

    def fit_context(self, run_id: int) -> FitContext:
        """What the fitter needs to know about a run: its own settings and its project's
        defaults (merged by `services.runs.fit_context`), target, fit metric, and what its
        project's finished runs teach (``finished_runs_teach``)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise NotFound(f"run {run_id} not found")
            names = s.scalars(select(Series.name).where(Series.run_id == run_id)).all()
            metric = resolve_fit_metric(explicit_fit_metric(run), list(names))
            # Always: the finished runs' hindcasts set every project's drift allowance
            # (services.fits.drift_allowance_for); their noise and B only the opt-in priors.
            learned = finished_runs_teach(s, run.project_id, metric, but=run.id)
            return FitContext.model_validate({
                "run_id": run.id,
                "project": run.project.name,
                "name": run.name,
                "fit_metric": metric,
                "project_defaults": {"fit_metric": run.project.fit_metric,
                                     "noise_prior": run.project.noise_prior,
                                     "b_prior": run.project.b_prior},
                "project_noise": learned.get("noise"),
                "project_hindcasts": learned.get("hindcasts"),
                "project_b": learned.get("b"),
                "finished_without_hindcast": learned.get("missing", []),
                "target_compute": run.target_compute,
                "fit_settings": dict(run.fit_settings or {}),
                "status": run.status,
                "last_seen_at": run.last_seen_at,
            })

    # ---- reading fits ----------------------------------------------------------------------
    def _series_id(self, s: Session, run_id: int, metric: str | None) -> tuple[int | None, str]:
        run = s.get(Run, run_id)
        if run is None:
            raise NotFound(f"run {run_id} not found")
        rows = s.execute(select(Series.name, Series.id).where(Series.run_id == run_id))
        names: dict[str, int] = {n: i for n, i in rows}
        name = metric or resolve_fit_metric(explicit_fit_metric(run), list(names))
        return names.get(name), name

    def latest_fit(self, run_id: int, metric: str | None = None) -> tuple[str, FitRecord | None]:
        """(metric name, its latest stored fit or None); metric defaults to the run's."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise NotFound(f"run {run_id} not found")
            # The series with their latest fit ids in one query (as `_series_id`, plus the id).
            rows = s.execute(
                select(Series.name, Series.latest_fit_id).where(Series.run_id == run_id)
            ).all()
            names = {n: f for n, f in rows}
            name = metric or resolve_fit_metric(explicit_fit_metric(run), list(names))
            fit_id = names.get(name)
            if fit_id is None:
                return name, None
            return name, s.scalar(select(Fit.result).where(Fit.id == fit_id))

    def fit_history(
        self, run_id: int, metric: str | None = None, limit: int = 1000
    ) -> tuple[str, list[FitHistoryEntry]]:
        with self.session() as s:
            sid, name = self._series_id(s, run_id, metric)
            if sid is None:
                return name, []
            rows = s.execute(
                select(
                    Fit.id,
                    Fit.created_at,
                    Fit.status,
                    Fit.n_points,
                    Fit.max_compute,
                    Fit.A,
                    Fit.A_lo,
                    Fit.A_hi,
                    Fit.has_intervals,
                    Fit.result,
                )
                .where(Fit.series_id == sid)
                .order_by(Fit.id.desc())
                .limit(limit)
            ).all()
            return name, [history_entry(r) for r in reversed(rows)]

    # ---- inputs of an alert evaluation ----------------------------------------------------
    def best_ok_fit(self, series_id: int) -> FitRecord | None:
        """The `ok` fit with the highest A interval lower end: the run's best claim on A."""
        with self.session() as s:
            return s.scalar(
                select(Fit.result)
                .where(Fit.series_id == series_id, Fit.status == "ok", Fit.A_lo.is_not(None))
                .order_by(Fit.A_lo.desc(), Fit.id.desc())
                .limit(1)
            )

    def last_ok_fit_before(self, series_id: int, before_compute: float) -> FitRecord | None:
        """The latest `ok` fit that had only seen compute below `before_compute`."""
        with self.session() as s:
            return s.scalar(
                select(Fit.result)
                .where(
                    Fit.series_id == series_id,
                    Fit.status == "ok",
                    Fit.max_compute < before_compute,
                )
                .order_by(Fit.id.desc())
                .limit(1)
            )

    def latest_ok_fit_of_run(self, run_id: int) -> tuple[str | None, FitRecord | None]:
        """(run name, latest fit of its fit metric) for baselines; (None, None) if no run."""
        with self.session() as s:
            name = s.scalar(select(Run.name).where(Run.id == run_id))
            if name is None:
                return None, None
            sid, _ = self._series_id(s, run_id, None)
            if sid is None:
                return name, None
            fit_id = s.scalar(select(Series.latest_fit_id).where(Series.id == sid))
            if fit_id is None:
                return name, None
            return name, s.scalar(select(Fit.result).where(Fit.id == fit_id))
