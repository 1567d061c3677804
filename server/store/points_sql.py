"""Ingest: upsert points (last write wins) with the series and run summaries and the chunk
rollup kept in the same transaction (the reads: `point_reads_sql`)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np
from sqlalchemy import Connection, func, select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from scalewatch.server import limits
from scalewatch.server.db.models import Project, Run, Series, utcnow
from scalewatch.server.ingest import Batch, PointRow, SeriesPoints, group_rows
from scalewatch.server.store.base import (
    Ingested,
    NotFound,
    TooManySeries,
    check_series_room,
)
from scalewatch.server.store.chunks import (
    CHUNK_LEVELS,
    ChunkRow,
    all_levels,
    upsert_sql,
)
from scalewatch.server.store.common import dialect_insert
from scalewatch.server.store.group_commit import GroupCommit, together_else_each
from scalewatch.server.store.group_marks import UPSERT_SQLITE
from scalewatch.server.store.ingest_pg import (
    MAX_GROUP,
    Appends,
    PgIngestMixin,
    chunk_split,
    newest,
    point_arrays,
)
from scalewatch.server.store.runs_sql import resolve_fit_metric

_PG_UPSERT = """
WITH up AS (
    INSERT INTO points (series_id, step, compute, value, wall_time)
    SELECT %s, t.step, t.compute, t.value, t.wall_time
    FROM unnest(%s::bigint[], %s::float8[], %s::float8[], %s::float8[])
         AS t(step, compute, value, wall_time)
    ON CONFLICT (series_id, step) DO UPDATE
    SET compute = EXCLUDED.compute, value = EXCLUDED.value, wall_time = EXCLUDED.wall_time
    RETURNING (xmax <> 0) AS overwritten
)
SELECT count(*) FILTER (WHERE overwritten) FROM up
"""


# SQLite's summaries (`PointsMixin._update_summaries`), as PostgreSQL's in `ingest_pg`: every
# SET sees the row as it was.
_SQLITE_SERIES_SUMMARY = """
UPDATE series SET updated_at = ?,
    dirty_since = CASE WHEN ? > 0 AND refit_requested <= refit_done THEN ? ELSE dirty_since END,
    n_points = n_points + ?,
    last_step = CASE WHEN last_step IS NULL OR last_step <= ? THEN ? ELSE last_step END,
    last_compute = CASE WHEN last_step IS NULL OR last_step <= ? THEN ? ELSE last_compute END,
    last_value = CASE WHEN last_step IS NULL OR last_step <= ? THEN ? ELSE last_value END,
    refit_requested = refit_requested + ?
WHERE id = ?
"""
_SQLITE_RUN_SUMMARY = """
UPDATE runs SET last_seen_at = ?,
    last_step = CASE WHEN last_step IS NULL OR last_step <= ? THEN ? ELSE last_step END,
    last_compute = CASE WHEN last_step IS NULL OR last_step <= ? THEN ? ELSE last_compute END
WHERE id = ?
"""

_SQLITE_UPSERT = (
    "INSERT INTO points (series_id, step, compute, value, wall_time) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (series_id, step) DO UPDATE SET compute = excluded.compute, "
    "value = excluded.value, wall_time = excluded.wall_time"
)


def _rows(columns: list[np.ndarray]) -> list[tuple[Any, ...]]:
    """Chunk columns as rows of Python numbers (what the sqlite3 driver binds)."""
    return list(zip(*(c.tolist() for c in columns), strict=True))




class PointsMixin(PgIngestMixin):
    def __init__(self, engine: Any) -> None:
        super().__init__(engine)
        # Batches of other runs that wait for the store while one is written go in with the
        # next group (`group_commit`). PostgreSQL: in one transaction of shared statements
        # (`ingest_pg`). SQLite: one transaction too, batch after batch; above all, this
        # process's ingests no longer wait for each other on SQLite's busy handler, which
        # sleeps and polls instead of waking the next writer (saturated near 90 requests/s
        # with the cores half idle).
        apply = (self._ingest_group_or_each if self.dialect == "postgresql"
                 else self._ingest_group_sqlite)  # fmt: skip
        self.ingest_groups = GroupCommit(apply, key=lambda item: item[0], max_items=MAX_GROUP)

    def ingest_points(self, run_id: int, rows: list[PointRow]) -> Ingested:
        """Upsert rows on (run, metric, step) in one transaction; returns (accepted, updated)
        and whether a refit was queued."""
        return self.ingest_batch(run_id, group_rows(rows))

    def ingest_batch(self, run_id: int, by_metric: Batch) -> Ingested:
        """`ingest_points` of a batch already grouped by metric (`ingest.group_rows`, or
        decoded that way by `fastdecode.parse_batch`)."""
        if not by_metric:
            with self.session() as s:
                return self._ingest_in_session(s, run_id, by_metric)  # the run must exist
        return self.ingest_groups.submit((run_id, by_metric))

    def check_new_series(self, run_id: int, names: Sequence[str]) -> None:
        """`TooManySeries` if points of `names` would bring the run past
        `limits.MAX_SERIES_PER_RUN`: for a caller that writes something else before the points
        (MLflow's log-batch: params and tags) and would have the whole request refused. Only a
        forecast: ingest checks again under the run's lock, which is what holds."""
        with self.session() as s:
            stored = s.scalar(select(func.count()).where(Series.run_id == run_id)) or 0
            if stored + len(names) <= limits.MAX_SERIES_PER_RUN:
                return  # room even if every name is new (the usual answer: one indexed count)
            known = set(s.scalars(select(Series.name).where(
                Series.run_id == run_id, Series.name.in_(list(names)))))
        check_series_room(run_id, stored, [n for n in names if n not in known])

    def _ingest_group_sqlite(self, items: list[tuple[int, Batch]]) -> list[Ingested | Exception]:
        """`GroupCommit`'s apply on SQLite: the batches one after the other in one transaction
        (a missing run answers its own 404); every batch on its own if that transaction fails
        (it wrote nothing)."""
        return together_else_each(items, self._ingest_together_sqlite, self._ingest_one_sqlite)

    def _ingest_together_sqlite(
        self, items: Sequence[tuple[int, Batch]]
    ) -> list[Ingested | Exception]:
        with self.session() as s:
            return [self._ingest_or_not_found(s, *item) for item in items]

    def _ingest_or_not_found(
        self, s: Session, run_id: int, by_metric: Batch
    ) -> Ingested | Exception:
        try:
            return self._ingest_in_session(s, run_id, by_metric)
        except (NotFound, TooManySeries) as exc:  # raised before the batch wrote anything
            return exc

    def _ingest_one_sqlite(self, item: tuple[int, Batch]) -> Ingested:
        with self.session() as s:
            return self._ingest_in_session(s, *item)

    def _ingest_in_session(self, s: Session, run_id: int, by_metric: Batch) -> Ingested:
        """One batch in the session's transaction (SQLite's ingest; on PostgreSQL only an
        empty batch, which checks that the run exists)."""
        n_rows = sum(len(b.steps) for b in by_metric.values())
        if self.dialect == "sqlite":
            # SQLite has no row locks (FOR UPDATE is ignored) and pysqlite begins the
            # transaction only at the first write, so two batches could both read "nothing
            # stored yet" and both take the plain-INSERT append path: UNIQUE constraint
            # failed. Writing first takes SQLite's write lock before anything is read
            # (waiting on busy_timeout), which serialises ingests like the row lock does.
            s.execute(update(Run).where(Run.id == run_id).values(id=Run.id))
        # Lock the run row: concurrent batches of one run serialise here, which keeps the
        # summaries exact and the lock order (run, then series by id) deadlock-free.
        # fit_metric: the run's own, else its project's default (the refit marker's metric).
        project_default = (
            select(Project.fit_metric).where(Project.id == Run.project_id).scalar_subquery()
        )
        run = s.execute(
            select(Run.id, func.coalesce(Run.fit_metric, project_default).label("fit_metric"),
                   Run.project_id, Run.group_name)
            .where(Run.id == run_id)
            .with_for_update()
        ).first()
        if run is None:
            raise NotFound(f"run {run_id} not found")
        if not by_metric:
            return Ingested(0, 0, False)
        series_ids, last_steps = self._ensure_series(s, run_id, sorted(by_metric))
        inserted: dict[str, int] = {}
        appended: Appends = []
        rewritten: Appends = []
        for metric in sorted(by_metric, key=lambda m: series_ids[m]):
            batch = by_metric[metric]
            if batch.appends_after(last_steps.get(metric)):
                # Pure append (the trainer's normal case): nothing can conflict, so the
                # rows go in as a bulk executemany without upsert bookkeeping.
                self._append_series_points(s, series_ids[metric], batch)
                overwritten = 0
                appended.append((series_ids[metric], batch))
            else:
                overwritten = self._upsert_series_points(
                    s.connection(), series_ids[metric], batch
                )
                rewritten.append((series_ids[metric], batch))
            inserted[metric] = len(batch.steps) - overwritten
        self._maintain_chunks(s, appended, rewritten)
        refit = self._update_summaries(s, run, series_ids, by_metric, inserted)
        return Ingested(n_rows, n_rows - sum(inserted.values()), refit)

    def _maintain_chunks(self, s: Session, appended: Appends, rewritten: Appends) -> None:
        """Keep `point_chunks` exact (`server/store/chunks.py`), in the ingest's transaction
        (SQLite; PostgreSQL's ingest writes the same rows in fewer round trips).

        Appended points all lie past every stored step of their series, so their chunks merge
        into the stored ones (one statement for every level and series); an upsert into the
        stored range recomputes its coarsest chunks, and the finer ones inside, from the points.
        """
        conn = s.connection()
        if appended:
            _, merge = chunk_split(point_arrays(appended), None)
            conn.exec_driver_sql(upsert_sql(self.dialect, merge=True), _rows(merge))
        self._replace_chunks(conn, rewritten)

    def _replace_chunks(self, conn: Any, rewritten: Appends) -> None:
        """Recompute the chunks (every level) holding the rewritten points, from the points."""
        ph = "%s" if self.dialect == "postgresql" else "?"
        replace: list[ChunkRow] = []
        top = CHUNK_LEVELS[-1]
        for sid, batch in rewritten:
            for chunk in sorted({st >> top for st in batch.steps}):
                pts = conn.exec_driver_sql(
                    "SELECT step, compute, value FROM points "
                    f"WHERE series_id = {ph} AND step >= {ph} AND step < {ph}",
                    (sid, chunk << top, (chunk + 1) << top),
                ).all()
                replace += all_levels(sid, [(p[0], p[1], p[2]) for p in pts])
        if replace:
            conn.exec_driver_sql(upsert_sql(self.dialect, merge=False), replace)

    def _ensure_series(
        self, s: Session | Connection, run_id: int, names: list[str]
    ) -> tuple[dict[str, int], dict[str, int | None]]:
        # Every series of the run (a run has tens of metrics): the caller also needs the full
        # name set to resolve the fit metric, which saves a query.
        rows = s.execute(
            select(Series.name, Series.id, Series.last_step).where(Series.run_id == run_id)
        ).all()
        existing = {r[0]: r[1] for r in rows}
        last_steps = {r[0]: r[2] for r in rows}
        missing = [n for n in names if n not in existing]
        # The bound on a run's metric names (limits.MAX_SERIES_PER_RUN), checked where every
        # ingest path creates series, before this batch wrote anything: a batch that would pass
        # it is refused whole, while one of names the run has creates nothing and passes. Exact
        # under concurrency: series are created only here, and the caller holds the run row's
        # lock (PostgreSQL: the ingest's UPDATE of the run; SQLite: the database's write lock)
        # before these rows were read, so a concurrent batch of the run that created series
        # committed them before this read (READ COMMITTED: each statement sees what committed
        # before it started) or waits for this transaction. The count is the rows just read:
        # no query of its own.
        check_series_room(run_id, len(rows), missing)
        if missing:
            now = utcnow()
            s.execute(
                dialect_insert(s)(Series).on_conflict_do_nothing(),
                [
                    {
                        "run_id": run_id,
                        "name": n,
                        "n_points": 0,
                        "updated_at": now,
                        "refit_requested": 0,
                        "refit_done": 0,
                    }
                    for n in missing
                ],
            )
            existing.update(
                s.execute(
                    select(Series.name, Series.id).where(
                        Series.run_id == run_id, Series.name.in_(missing)
                    )
                ).all()
            )
        return existing, last_steps

    def _append_series_points(self, s: Session, sid: int, batch: SeriesPoints) -> None:
        """SQLite's append (PostgreSQL's is the INSERT of arrays in `_ingest_pg`)."""
        s.connection().exec_driver_sql(
            "INSERT INTO points (series_id, step, compute, value, wall_time) "
            "VALUES (?, ?, ?, ?, ?)",
            list(zip(repeat(sid), *batch)),
        )

    def _upsert_series_points(self, conn: Connection, sid: int, batch: SeriesPoints) -> int:
        """Upsert one series' rows; returns how many overwrote an existing step."""
        if conn.dialect.name == "postgresql":
            # One statement over parallel arrays: no per-row round trips, and the insert/update
            # split comes back from xmax instead of a second query.
            row = conn.exec_driver_sql(
                _PG_UPSERT, (sid, batch.steps, batch.computes, batch.values, batch.walls)
            ).one()
            return int(row[0])
        steps = batch.steps
        lo, hi = steps[0], steps[-1]  # in step order
        # Count overwrites with a primary-key range scan; for a trainer appending new steps the
        # range lies past the stored points and this returns nothing.
        present = {
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT step FROM points WHERE series_id = ? AND step BETWEEN ? AND ?",
                (sid, lo, hi),
            )
        }
        conn.exec_driver_sql(_SQLITE_UPSERT, list(zip(repeat(sid), *batch)))
        return sum(1 for st in steps if st in present)

    def _update_summaries(
        self,
        s: Session,
        run: Row[int, str | None, int, str | None],
        series_ids: dict[str, int],
        by_metric: Batch,
        inserted: dict[str, int],
    ) -> bool:
        """The series and run summaries and the refit markers; True when a refit was queued.
        SQLite's (PostgreSQL's are in `ingest_pg`): plain SQL, the same statement a series
        (building SQLAlchemy expressions per series cost ~3 ms of a 5 ms batch)."""
        now = utcnow()
        # The text SQLAlchemy stores a DateTime as on SQLite (naive UTC, microseconds).
        stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f")
        fit_metric = resolve_fit_metric(run.fit_metric, list(series_ids))
        conn = s.connection()
        # Counters always move, the latest value only when this batch reaches at least as far
        # as what is stored (a replayed old batch must not turn back the summary).
        rows = []
        for metric, batch in by_metric.items():
            step = batch.steps[-1]
            refit = int(metric == fit_metric)
            rows.append((stamp, refit, stamp, inserted[metric], step, step, step,
                         batch.computes[-1], step, batch.values[-1], refit, series_ids[metric]))
        conn.exec_driver_sql(_SQLITE_SERIES_SUMMARY, rows)
        newest_step, newest_compute = newest(by_metric)
        conn.exec_driver_sql(
            _SQLITE_RUN_SUMMARY, (stamp, newest_step, newest_step, newest_step, newest_compute,
                                  run.id),
        )
        if run.group_name is not None and fit_metric in by_metric:
            # A member's new points of its fit metric: its group is refitted too (last).
            conn.exec_driver_sql(
                UPSERT_SQLITE, (run.project_id, run.group_name, fit_metric, stamp)
            )
        return fit_metric in by_metric
