"""PostgreSQL's ingest: a batch in three round trips, and concurrent batches written together.

`ingest_batch` hands each batch to a `GroupCommit` (`PointsMixin`): alone, a batch is
written by `_ingest_pg` exactly as it always was; when batches of other runs are waiting for the
store too, they are written as one group by `_ingest_group_pg`, in the same three round trips
and one statement more than one of them takes (a request's ingest costs ~2.3 ms of server CPU
whatever its size: statements and round trips, not rows). A group takes only the common case,
points past everything stored of series that exist; a batch that rewrites stored steps or
brings a new metric is written on its own right after the group commits, and if the group's
transaction fails for any reason every batch of it is retried on its own, so one batch's
failure is never another's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection

from scalewatch.server.db.models import utcnow
from scalewatch.server.ingest import Batch, SeriesPoints
from scalewatch.server.store import pgarrays
from scalewatch.server.store.base import Ingested, NotFound
from scalewatch.server.store.chunks import conflict_sql, level_columns
from scalewatch.server.store.common import SqlBase
from scalewatch.server.store.group_commit import GroupCommit, together_else_each
from scalewatch.server.store.group_marks import UPSERT_PG
from scalewatch.server.store.runs_sql import resolve_fit_metric

# At most this many batches (of as many runs) in one group: a request of 10,000 points waits
# for at most 31 others.
MAX_GROUP = 32

_RUN_SUMMARY = """
UPDATE runs SET last_seen_at = %s,
    last_step = CASE WHEN last_step IS NULL OR last_step <= %s THEN %s ELSE last_step END,
    last_compute = CASE WHEN last_step IS NULL OR last_step <= %s THEN %s ELSE last_compute END
WHERE id = %s
RETURNING COALESCE(fit_metric, (SELECT p.fit_metric FROM projects p WHERE p.id = runs.project_id)),
    project_id, group_name
"""

_SERIES = "SELECT name, id, last_step FROM series WHERE run_id = %s"

# Every series of the batch in one statement: counters always move, the latest value only when
# the batch reaches at least as far as what is stored (a replayed old batch must not turn back
# the summary), and the fit metric's refit counter (the refitter's marker) is bumped.
_SERIES_SUMMARY = """
UPDATE series AS s SET updated_at = %s,
    dirty_since = CASE WHEN u.refit > 0 AND s.refit_requested <= s.refit_done
                       THEN %s ELSE s.dirty_since END,
    n_points = s.n_points + u.inserted,
    last_step = CASE WHEN s.last_step IS NULL OR s.last_step <= u.step
                     THEN u.step ELSE s.last_step END,
    last_compute = CASE WHEN s.last_step IS NULL OR s.last_step <= u.step
                        THEN u.compute ELSE s.last_compute END,
    last_value = CASE WHEN s.last_step IS NULL OR s.last_step <= u.step
                      THEN u.value ELSE s.last_value END,
    refit_requested = s.refit_requested + u.refit
FROM unnest(%s::int[], %s::bigint[], %s::bigint[], %s::float8[], %s::float8[], %s::int[])
     AS u(id, inserted, step, compute, value, refit)
WHERE s.id = u.id
"""


# A group's runs, locked in id order (two groups, in two worker processes, lock theirs in the same
# order: no deadlock), with what the refit marker needs. FOR UPDATE returns each row as the
# transaction that held its lock left it; the series are read by a statement of their own,
# after the locks, so they too are what those transactions committed.
_LOCK_RUNS = """
SELECT r.id, COALESCE(r.fit_metric, p.fit_metric), r.project_id, r.group_name
FROM runs r JOIN projects p ON p.id = r.project_id
WHERE r.id = ANY(%s) ORDER BY r.id FOR UPDATE OF r
"""
_SERIES_OF_RUNS = "SELECT run_id, name, id, last_step FROM series WHERE run_id = ANY(%s)"
_RUNS_SUMMARY = """
UPDATE runs SET last_seen_at = %s,
    last_step = CASE WHEN runs.last_step IS NULL OR runs.last_step <= u.step
                     THEN u.step ELSE runs.last_step END,
    last_compute = CASE WHEN runs.last_step IS NULL OR runs.last_step <= u.step
                        THEN u.compute ELSE runs.last_compute END
FROM unnest(%s::int[], %s::bigint[], %s::float8[]) AS u(id, step, compute)
WHERE runs.id = u.id
"""

# Chunk rows built from appended points (chunks.all_levels), merged into the stored chunks
# (chunks.conflict_sql). Their columns as binary arrays (`pgarrays`): one prepared statement
# whatever the rows, where the rows as literals made a new statement to parse and plan at every
# ingest (0.26-0.29 -> 0.12-0.14 ms of database CPU for a batch's three, in-process).
_CHUNK_MERGE = pgarrays.CHUNKS_INSERT + " " + conflict_sql("postgresql", merge=True)


Appends = list[tuple[int, SeriesPoints]]  # (series id, its new points), by series id


def point_arrays(appends: Appends) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Series ids, steps, computes and values of appended points, series after series."""
    return (
        np.concatenate([np.full(len(sp.steps), sid, dtype=np.int64) for sid, sp in appends]),
        np.concatenate([np.asarray(sp.steps, dtype=np.int64) for _, sp in appends]),
        np.concatenate([np.asarray(sp.computes, dtype=np.float64) for _, sp in appends]),
        np.concatenate([np.asarray(sp.values, dtype=np.float64) for _, sp in appends]),
    )


def chunk_split(
    arrays: tuple[np.ndarray, ...], last_steps: dict[int, int | None] | None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The chunk rows of appended points (`point_arrays`), as columns: (new, merge). With
    `last_steps` (series id -> its largest stored step, None: no points), the chunks past the
    one holding that step cannot exist yet (new: a plain INSERT); only that one chunk a level
    is merged (the merge's conflict checks cost ~50 us a row). Without, every row is merged."""
    cols = level_columns(*arrays)
    if last_steps is None:
        return [c[:0] for c in cols], cols
    stored = {sid: -1 if last is None else last for sid, last in last_steps.items()}
    last = np.array([stored[sid] for sid in cols[0].tolist()], dtype=np.int64)
    new = cols[2] > (last >> cols[1])  # -1 >> level is -1: every chunk of an empty series
    return [c[new] for c in cols], [c[~new] for c in cols]


def newest(by_metric: Batch) -> tuple[int, float]:
    """(step, compute) of the batch's point with the largest step (the run summary's; the first
    metric's on a tie, as the rows' max() picked)."""
    newest = max(by_metric.values(), key=lambda b: b.steps[-1])
    return newest.steps[-1], newest.computes[-1]


def _appends_only(known: dict[str, tuple[int, int | None]], by_metric: Batch) -> bool:
    """Whether every metric of the batch has a series (`known`: name -> (id, last stored
    step)) and only points past its last stored step: the case a group takes."""
    for metric, batch in by_metric.items():
        if metric not in known or not batch.appends_after(known[metric][1]):
            return False
    return True


class PgIngestMixin(SqlBase):
    # The combiner every non-empty batch goes through (`PointsMixin` makes it, with this
    # mixin's `_ingest_group_or_each` on PostgreSQL).
    ingest_groups: GroupCommit[tuple[int, Batch], Ingested]

    # Shared with SQLite's ingest; `PointsMixin` implements them.
    def _ensure_series(
        self, s: Any, run_id: int, names: list[str]
    ) -> tuple[dict[str, int], dict[str, int | None]]:
        raise NotImplementedError

    def _upsert_series_points(self, conn: Connection, sid: int, batch: SeriesPoints) -> int:
        raise NotImplementedError

    def _replace_chunks(self, conn: Any, rewritten: Appends) -> None:
        raise NotImplementedError

    def _ingest_group_or_each(self, items: list[tuple[int, Batch]]) -> list[Ingested | Exception]:
        """`GroupCommit`'s apply: the group in one transaction, then on their own the batches it
        left out (or all of them, if its transaction failed)."""
        return together_else_each(items, self._ingest_together_pg, self._ingest_one_pg)

    def _ingest_together_pg(
        self, items: Sequence[tuple[int, Batch]]
    ) -> list[Ingested | Exception | None]:
        with self.engine.begin() as conn:
            return self._ingest_group_pg(conn, items)

    def _ingest_one_pg(self, item: tuple[int, Batch]) -> Ingested:
        run_id, by_metric = item
        n_rows = sum(len(b.steps) for b in by_metric.values())
        # A Core connection, not an ORM session: the session's bookkeeping alone cost ~0.2 ms
        # of CPU a batch. Committed at the end (the pipeline's COMMIT already did), rolled back
        # if anything raised.
        with self.engine.begin() as conn:
            inserted, refit = self._ingest_pg(conn, run_id, by_metric)
        return Ingested(n_rows, n_rows - inserted, refit)

    def _ingest_group_pg(
        self, conn: Connection, items: Sequence[tuple[int, Batch]]
    ) -> list[Ingested | Exception | None]:
        """Batches of distinct runs in one transaction and two round trips after the pool's
        ping: the runs' locks and their series; then the points, the chunks, the series' and the
        runs' summaries, the groups' refit marks and COMMIT. Returns each batch's outcome, None
        for a batch left to be written on its own (a rewrite of stored steps, a new metric)."""
        raw: Any = conn.connection.driver_connection  # psycopg's
        now = utcnow()
        run_ids = sorted(run_id for run_id, _ in items)
        lock_cur, series_cur = raw.cursor(), raw.cursor()
        try:
            with raw.pipeline():
                lock_cur.execute(_LOCK_RUNS, (run_ids,))
                series_cur.execute(_SERIES_OF_RUNS, (run_ids,))
            runs = {r[0]: r[1:] for r in lock_cur.fetchall()}
            series: dict[int, dict[str, tuple[int, int | None]]] = defaultdict(dict)
            for run_id, name, sid, last in series_cur.fetchall():
                series[run_id][name] = (sid, last)
        finally:
            lock_cur.close()
            series_cur.close()

        outcomes: list[Ingested | Exception | None] = []
        appends: Appends = []
        last_steps: dict[int, int | None] = {}
        summary: tuple[list[Any], ...] = ([], [], [], [], [], [])  # the series summary's columns
        run_rows: tuple[list[Any], ...] = ([], [], [])  # the runs summary's
        marks: list[tuple[int, str, str]] = []  # one a batch, as when written one by one
        for run_id, by_metric in items:
            if run_id not in runs:
                outcomes.append(NotFound(f"run {run_id} not found"))
                continue
            known = series[run_id]
            if not _appends_only(known, by_metric):
                outcomes.append(None)
                continue
            fit_explicit, project_id, group = runs[run_id]
            fit = resolve_fit_metric(fit_explicit, list(known))
            for metric in sorted(by_metric, key=lambda m: known[m][0]):
                sid, last = known[metric]
                batch = by_metric[metric]
                appends.append((sid, batch))
                last_steps[sid] = last
                for column, value in zip(summary, (sid, len(batch.steps), batch.steps[-1],
                                                   batch.computes[-1], batch.values[-1],
                                                   int(metric == fit)), strict=True):
                    column.append(value)
            for column, value in zip(run_rows, (run_id, *newest(by_metric)), strict=True):
                column.append(value)
            if group is not None and fit in by_metric:
                marks.append((project_id, group, fit))
            n_rows = sum(len(b.steps) for b in by_metric.values())
            outcomes.append(Ingested(n_rows, 0, fit in by_metric))
        if not appends:
            return outcomes
        arrays = point_arrays(appends)
        walls = [w for _, sp in appends for w in sp.walls]
        with raw.pipeline(), raw.cursor() as cur:
            pgarrays.register(cur)
            cur.execute(pgarrays.POINTS_INSERT, pgarrays.points_params(*arrays, walls))
            new, merge = chunk_split(arrays, last_steps)
            if len(new[0]):
                cur.execute(pgarrays.CHUNKS_INSERT, pgarrays.chunks_params(new))
            if len(merge[0]):
                cur.execute(_CHUNK_MERGE, pgarrays.chunks_params(merge))
            cur.execute(_SERIES_SUMMARY, (now, now, *summary))
            cur.execute(_RUNS_SUMMARY, (now, *run_rows))
            for mark in sorted(marks):  # group rows last, in one order (`group_marks`)
                cur.execute(UPSERT_PG, (*mark, now))
            raw.commit()
        return outcomes

    def _ingest_pg(self, conn: Connection, run_id: int, by_metric: Batch) -> tuple[int, bool]:
        """The PostgreSQL ingest in three round trips, whatever the number of metrics: the
        pool's ping; one pipeline of BEGIN, the run row (lock + summary) and the series read;
        one pipeline of the points' INSERT (`pgarrays`: binary arrays, no float formatted or
        parsed; the chunk rows and summaries are built while the database inserts them), the
        new chunks' INSERT, the merge of the chunks they continue, the summary UPDATE and
        COMMIT. Returns (rows inserted, whether a refit was queued).

        Plain SQL on the driver connection (prepared by psycopg after a few calls): building
        SQLAlchemy expressions per series cost more CPU than the database work itself."""
        raw: Any = conn.connection.driver_connection  # psycopg's
        now = utcnow()
        newest_all = newest(by_metric)
        run_cur, series_cur = raw.cursor(), raw.cursor()
        try:
            # One round trip. The UPDATE takes the run row's lock (concurrent batches of one
            # run serialise here; lock order run, then series) and moves the run summary,
            # which depends on the batch alone (every SET sees the old row). The SELECT is a
            # statement of its own, run after the UPDATE got the lock: its snapshot sees what
            # the previous holder of the lock committed (a CTE would read from before the
            # wait). A pipeline only saves the waits between them.
            with raw.pipeline():
                run_cur.execute(_RUN_SUMMARY, (now, newest_all[0], newest_all[0],
                                                  newest_all[0], newest_all[1], run_id))
                series_cur.execute(_SERIES, (run_id,))
            run = run_cur.fetchone()
            found = series_cur.fetchall()
        finally:
            run_cur.close()
            series_cur.close()
        if run is None:
            raise NotFound(f"run {run_id} not found")
        fit_metric_explicit, project_id, group = run
        names = sorted(by_metric)
        if any(n not in {r[0] for r in found} for n in names):
            series_ids, last_steps = self._ensure_series(conn, run_id, names)
        else:
            series_ids = {r[0]: r[1] for r in found}
            last_steps = {r[0]: r[2] for r in found}
        inserted: dict[str, int] = {}
        appends: Appends = []
        rewritten: Appends = []
        for metric in sorted(by_metric, key=lambda m: series_ids[m]):
            batch = by_metric[metric]
            if batch.appends_after(last_steps.get(metric)):
                appends.append((series_ids[metric], batch))  # nothing can conflict
                inserted[metric] = len(batch.steps)
            else:
                inserted[metric] = len(batch.steps) - self._upsert_series_points(
                    conn, series_ids[metric], batch
                )
                rewritten.append((series_ids[metric], batch))
        arrays = point_arrays(appends) if appends else None

        def plan() -> tuple[list[np.ndarray], list[np.ndarray], tuple[Any, ...]]:
            """The chunk rows and the summary UPDATE's arguments (Python only)."""
            new, merge = ([], []) if arrays is None else chunk_split(
                arrays, {series_ids[m]: last_steps.get(m) for m in by_metric}
            )
            fit = resolve_fit_metric(fit_metric_explicit, list(series_ids))
            ids, counts, steps, computes, values, refits = [], [], [], [], [], []
            for metric in sorted(by_metric, key=lambda m: series_ids[m]):
                batch = by_metric[metric]
                ids.append(series_ids[metric])
                counts.append(inserted[metric])
                steps.append(batch.steps[-1])
                computes.append(batch.computes[-1])
                values.append(batch.values[-1])
                refits.append(1 if metric == fit else 0)  # the refit marker
            return new, merge, (fit, (now, now, ids, counts, steps, computes, values, refits))

        self._replace_chunks(conn, rewritten)  # a rewrite reads its points: before the pipeline
        # One round trip: the points, the chunks, the summaries and the group's refit mark, and
        # COMMIT (a failed statement aborts the pipeline before COMMIT; the connection's own
        # commit then finds nothing to do, a failure rolls back as usual). The points' INSERT
        # is sent first: the database inserts them while this thread plans the chunks and
        # summaries.
        with raw.pipeline(), raw.cursor() as cur:
            pgarrays.register(cur)
            if arrays is not None:  # nothing can conflict: past every stored step of its series
                walls = appends[0][1].walls if len(appends) == 1 else [
                    w for _, sp in appends for w in sp.walls]  # fmt: skip
                cur.execute(pgarrays.POINTS_INSERT, pgarrays.points_params(*arrays, walls))
            new, merge, (fit_metric, summary) = plan()
            if new and len(new[0]):
                cur.execute(pgarrays.CHUNKS_INSERT, pgarrays.chunks_params(new))
            if merge and len(merge[0]):
                cur.execute(_CHUNK_MERGE, pgarrays.chunks_params(merge))
            cur.execute(_SERIES_SUMMARY, summary)
            if group is not None and fit_metric in by_metric:
                # A member's new points of its fit metric: its group is refitted too (group
                # rows are locked last, as group_marks does).
                cur.execute(UPSERT_PG, (project_id, group, fit_metric, now))
            raw.commit()
        return sum(inserted.values()), fit_metric in by_metric
