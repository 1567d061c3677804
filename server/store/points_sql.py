"""Ingest (upsert, last write wins) and point queries with in-database downsampling."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np
from sqlalchemy import Connection, and_, func, select, text, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session

from scalewatch.server import limits
from scalewatch.server.db.models import Point, Project, Run, Series, utcnow
from scalewatch.server.ingest import Batch, PointRow, SeriesPoints, group_rows
from scalewatch.server.store.base import Ingested, NotFound, PointsPage
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

# Each bucket keeps its first, last, lowest and highest point: collapses and spikes survive
# downsampling, which averaging would hide. Both variants are single hash-aggregate passes over
# the series inside the database (no sorts, nothing loaded into Python but the chosen points):
# PostgreSQL picks whole rows with min/max over arrays (compared element by element), SQLite with
# its documented "bare columns take the row of the min()/max()" rule, one aggregate per query.
_BUCKET = "CAST(({x} - :lo) * :nb / :span AS INTEGER)"
_RANGE = "series_id = :sid AND step >= :since AND {x} >= :lo AND {x} <= :hi"
_PG_DOWNSAMPLE = f"""
SELECT min(ARRAY[step::float8, compute, value]), max(ARRAY[step::float8, compute, value]),
       min(ARRAY[value, step::float8, compute]), max(ARRAY[value, step::float8, compute]),
       count(*)
FROM points WHERE {_RANGE} GROUP BY {_BUCKET}
"""
_SQLITE_DOWNSAMPLE = [
    f"SELECT min(step), compute, value, count(*) FROM points WHERE {_RANGE} GROUP BY {_BUCKET}",
    f"SELECT max(step), compute, value, 0 FROM points WHERE {_RANGE} GROUP BY {_BUCKET}",
    f"SELECT step, compute, min(value), 0 FROM points WHERE {_RANGE} GROUP BY {_BUCKET}",
    f"SELECT step, compute, max(value), 0 FROM points WHERE {_RANGE} GROUP BY {_BUCKET}",
]


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
UPDATE series SET updated_at = ?, n_points = n_points + ?,
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

# Downsampling from point_chunks (see PointsMixin._downsample_chunks): chunks inside one bucket
# and in range give their four points, the raw points of the others are read; then the same
# aggregate as _PG_DOWNSAMPLE, with the same bucket expression, so the answer is identical.
_CHUNK_INSIDE = (
    "min_step >= :since AND {lo_col} >= :lo AND {hi_col} <= :hi AND "
    + _BUCKET.format(x="{lo_col}") + " = " + _BUCKET.format(x="{hi_col}")
)
_PG_CHUNK_DOWNSAMPLE = f"""
WITH c AS (
    SELECT * FROM point_chunks
    WHERE series_id = :sid AND level = :lvl AND {{hi_col}} >= :lo AND {{lo_col}} <= :hi
), cand AS (
    SELECT {_BUCKET.format(x="{lo_col}")} AS b,
           ARRAY[min_step::float8, first_compute, first_value] AS f,
           ARRAY[max_step::float8, last_compute, last_value] AS l,
           ARRAY[lo_value, lo_step::float8, lo_compute] AS lw,
           ARRAY[hi_value, hi_step::float8, hi_compute] AS hg, n::bigint AS n
    FROM c WHERE {_CHUNK_INSIDE}
    UNION ALL
    SELECT {_BUCKET.format(x="p.{x}")},
           ARRAY[p.step::float8, p.compute, p.value], ARRAY[p.step::float8, p.compute, p.value],
           ARRAY[p.value, p.step::float8, p.compute], ARRAY[p.value, p.step::float8, p.compute],
           1
    FROM c JOIN points p ON p.series_id = :sid AND p.step BETWEEN c.min_step AND c.max_step
    WHERE NOT ({_CHUNK_INSIDE.replace("min_step", "c.min_step")})
      AND p.step >= :since AND p.{{x}} >= :lo AND p.{{x}} <= :hi
)
SELECT min(f), max(l), min(lw), max(hg), sum(n) FROM cand GROUP BY b
"""

# The rollup envelope (PointsMixin._downsample_rollup): each of a chunk's four points falls in
# the bucket of its own x; a bucket keeps the earliest of the chunks' first points, the latest
# of their last points, the lowest and the highest (ties as the raw query: the earliest lowest,
# the latest highest). One query per role over one level's chunks, plain columns out (decoding
# arrays cost more than the query): PostgreSQL's DISTINCT ON, SQLite's documented rule that
# the bare columns of a lone min()/max() come from its row.
_ROLES = (  # step, compute, value columns of each role; the order that puts its pick first
    ("min_step", "first_compute", "first_value", "st"),
    ("max_step", "last_compute", "last_value", "st DESC"),
    ("lo_step", "lo_compute", "lo_value", "v, st"),
    ("hi_step", "hi_compute", "hi_value", "v DESC, st DESC"),
)


def _rollup_sql(pg: bool, x: str) -> list[str]:
    """The envelope's queries, parameters sid, lvl, lo, hi, nb, span by name (`:name` for
    sqlite3, `%(name)s` for psycopg: they run on the driver's cursor)."""
    def p(name: str) -> str:
        return f"%({name})s" if pg else f":{name}"

    out = []
    for st, c, v, order in _ROLES:
        xc = c if x == "compute" else st
        where = (f"series_id = {p('sid')} AND level = {p('lvl')} AND {xc} >= {p('lo')} "
                 f"AND {xc} <= {p('hi')}")  # fmt: skip
        bucket = f"CAST(({xc} - {p('lo')}) * {p('nb')} / {p('span')} AS INTEGER)"
        if pg:
            out.append(f"(SELECT DISTINCT ON (b) st, c, v FROM (SELECT {bucket} AS b, {st} AS st,"
                       f" {c} AS c, {v} AS v FROM point_chunks WHERE {where}) t "
                       f"ORDER BY b, {order})")  # fmt: skip
        else:
            agg = "min" if not order.endswith("DESC") else "max"
            cols = f"{agg}({st}), {c}, {v}" if st in ("min_step", "max_step") else \
                f"{st}, {c}, {agg}({v})"  # fmt: skip
            out.append(f"SELECT {cols} FROM point_chunks WHERE {where} GROUP BY {bucket}")
    return [" UNION ALL ".join(out)] if pg else out


_SQLITE_UPSERT = (
    "INSERT INTO points (series_id, step, compute, value, wall_time) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (series_id, step) DO UPDATE SET compute = excluded.compute, "
    "value = excluded.value, wall_time = excluded.wall_time"
)


def _rows(columns: list[np.ndarray]) -> list[tuple]:
    """Chunk columns as rows of Python numbers (what the sqlite3 driver binds)."""
    return list(zip(*(c.tolist() for c in columns), strict=True))


class _LRU:
    """A small thread-safe LRU of downsampled pages (each at most a few thousand points)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._items: OrderedDict[Any, PointsPage] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> PointsPage | None:
        with self._lock:
            page = self._items.get(key)
            if page is not None:
                self._items.move_to_end(key)
            return page

    def put(self, key: Any, page: PointsPage) -> None:
        with self._lock:
            self._items[key] = page
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_DOWNSAMPLED = _LRU()


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
        except NotFound as exc:  # raised before the batch wrote anything
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
            rows.append((stamp, inserted[metric], step, step, step, batch.computes[-1], step,
                         batch.values[-1], int(metric == fit_metric), series_ids[metric]))
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

    def last_points(self, series_id: int, n: int) -> tuple[list[float], list[float]]:
        """The newest `n` points of a series by step, oldest first (for `off_curve` alerts)."""
        with self.session() as s:
            rows = s.execute(
                select(Point.compute, Point.value)
                .where(Point.series_id == series_id)
                .order_by(Point.step.desc())
                .limit(n)
            ).all()
        rows = rows[::-1]
        return [r[0] for r in rows], [r[1] for r in rows]

    def get_points(
        self,
        run_id: int,
        metric: str,
        *,
        since_step: int | None = None,
        max_points: int | None = None,
        x_range: tuple[float, float] | None = None,
        x: str = "compute",
        limit: int | None = None,
        rollup: bool = False,
    ) -> PointsPage:
        """Points by step; with `max_points` downsampled in the database. Without it at most
        `limit` (default `MAX_RAW_POINTS`) points from `since_step` on; `downsampled` is then
        True when more exist past the last one returned. `rollup` (with `max_points`): a long
        series is drawn from its `point_chunks` alone (`_downsample_rollup`), not exactly the
        raw buckets but a few milliseconds whatever its length."""
        with self.session() as s:
            # The run and its series in one query (a page of Compare reads ten of them).
            found = s.execute(
                select(Run.id, Series.id, Series.n_points, Series.updated_at)
                .select_from(Run)
                .outerjoin(Series, and_(Series.run_id == Run.id, Series.name == metric))
                .where(Run.id == run_id)
            ).first()
            if found is None:
                raise NotFound(f"run {run_id} not found")
            _, sid, n_points, changed_at = found
            if sid is None:
                return PointsPage(metric, [], [], [], False, 0)
            since = since_step if since_step is not None else 0
            where = and_(Point.series_id == sid, Point.step >= since)
            col = Point.compute if x == "compute" else Point.step
            if x_range is not None:
                where = and_(where, col >= x_range[0], col <= x_range[1])
            # The series summary bounds the count, so a small series (the usual case) needs no
            # count at all, and a large one gets its exact total from the bucket counts below.
            if max_points is None or n_points <= max_points:
                cap = limit or limits.MAX_RAW_POINTS
                rows = s.execute(
                    select(Point.step, Point.compute, Point.value)
                    .where(where)
                    .order_by(Point.step)
                    .limit(cap + 1)
                ).all()
                more = len(rows) > cap
                total = len(rows)
                if more:  # `total` counts the whole range, not the page
                    total = (int(n_points) if since_step is None and x_range is None
                             else int(s.scalar(select(func.count()).where(where)) or 0))
                return PointsPage(
                    metric,
                    [r[0] for r in rows[:cap]],
                    [r[1] for r in rows[:cap]],
                    [r[2] for r in rows[:cap]],
                    more,
                    total,
                )
            # Every ingest touches series.updated_at, so (series, updated_at, request) names one
            # immutable answer: live pages polling, or a budget change on Compare, reuse it.
            key = (id(self), sid, changed_at, since, max_points, x_range, x, rollup)
            cached = _DOWNSAMPLED.get(key)
            if cached is not None:
                return cached
            page = None
            if rollup and since == 0:
                page = self._downsample_rollup(s, sid, metric, n_points, max_points, x_range, x)
            if page is None:
                page = self._downsample(s, sid, metric, where, col, since, max_points, x_range, x)
            _DOWNSAMPLED.put(key, page)
            return page

    def _downsample(
        self,
        s: Session,
        sid: int,
        metric: str,
        where: Any,
        col: Any,
        since: int,
        max_points: int,
        x_range: tuple[float, float] | None,
        x: str,
    ) -> PointsPage:
        lo = hi = None
        if x_range is not None:
            lo, hi = x_range
        elif since <= 0:  # the whole series: its chunks know the range
            lo, hi = self._chunk_range(s, sid, x)
        if lo is None or hi is None:
            lo, hi = s.execute(select(func.min(col), func.max(col)).where(where)).one()
            if lo is None:
                return PointsPage(metric, [], [], [], False, 0)
        span = (hi - lo) or 1
        params = {
            "sid": sid,
            "since": since,
            "lo": lo,
            "hi": hi,
            "nb": max(1, max_points // 4),
            "span": float(span) * (1 + 1e-12) if x == "compute" else span + 1,
        }
        xcol = "compute" if x == "compute" else "step"
        chosen: dict[int, tuple[float, float]] = {}
        total = 0
        from_chunks = self._downsample_chunks(s, params, x)
        if from_chunks is not None:
            chosen, total = from_chunks
        elif s.get_bind().dialect.name == "postgresql":
            for row in s.execute(text(_PG_DOWNSAMPLE.format(x=xcol)), params):
                first, last, low, high, count = row
                total += count
                for st, c, v in (first, last):
                    chosen[int(st)] = (c, v)
                for v, st, c in (low, high):
                    chosen[int(st)] = (c, v)
        else:
            for sql in _SQLITE_DOWNSAMPLE:
                for st, c, v, count in s.execute(text(sql.format(x=xcol)), params):
                    chosen[int(st)] = (c, v)
                    total += count
        if total <= max_points:  # the range held few points after all: send them all
            rows = s.execute(
                select(Point.step, Point.compute, Point.value).where(where).order_by(Point.step)
            ).all()
            return PointsPage(
                metric,
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                False,
                len(rows),
            )
        picked = [(st, *chosen[st]) for st in sorted(chosen)]
        return PointsPage(
            metric,
            [r[0] for r in picked],
            [r[1] for r in picked],
            [r[2] for r in picked],
            True,
            total,
        )

    def _downsample_rollup(
        self,
        s: Session,
        sid: int,
        metric: str,
        n_points: int,
        max_points: int,
        x_range: tuple[float, float] | None,
        x: str,
    ) -> PointsPage | None:
        """An envelope of the series from one level of its chunks, never its points: each
        chunk's first, last, lowest and highest point falls in the bucket of its own x, and a
        bucket keeps the earliest, latest, lowest and highest of them. Every point drawn is a
        stored point and every chunk's extremes are candidates, so spikes and collapses
        survive; what differs from the exact buckets is only which point of a chunk across a
        bucket boundary stands for it. The level: the coarsest with a chunk per bucket or more
        (level 7 for a 100k-point series: 781 rows). None (use the exact query) when no level
        is that dense or few points are in range."""
        lo, hi = x_range if x_range is not None else self._chunk_range(s, sid, x)
        if lo is None or hi is None:
            return None
        nb = max(1, max_points // 4)
        lo_col, hi_col = ("min_compute", "max_compute") if x == "compute" else ("min_step",
                                                                               "max_step")
        conn = s.connection()
        ph = "%s" if self.dialect == "postgresql" else "?"
        level = total = None
        # The coarsest level with a chunk a bucket. Counting chunks is one query a level, so
        # only the levels that would have that many if the steps were consecutive are asked,
        # coarsest first (sparser steps only make more chunks; a series with too few points
        # for any level is read exactly, cheaply).
        for lv in [lv for lv in reversed(CHUNK_LEVELS) if (n_points >> lv) >= nb]:
            chunks, n = conn.exec_driver_sql(
                f"SELECT count(*), sum(n) FROM point_chunks WHERE series_id = {ph} AND "
                f"level = {ph} AND {hi_col} >= {ph} AND {lo_col} <= {ph}",
                (sid, lv, lo, hi),
            ).one()
            if chunks >= nb:
                level, total = lv, int(n)
                break
        if level is None or total is None or total <= max_points:
            return None
        span = (hi - lo) or 1
        params = {"sid": sid, "lvl": level, "lo": lo, "hi": hi, "nb": nb,
                  "span": float(span) * (1 + 1e-12) if x == "compute" else span + 1}
        chosen: dict[int, tuple[float, float]] = {}
        raw: Any = conn.connection.driver_connection
        cur = raw.cursor()
        try:
            for sql in _rollup_sql(self.dialect == "postgresql", x):
                cur.execute(sql, params)
                for st, c, v in cur.fetchall():
                    chosen[st] = (c, v)
        finally:
            cur.close()
        picked = sorted(chosen.items())
        return PointsPage(metric, [p[0] for p in picked], [p[1][0] for p in picked],
                          [p[1][1] for p in picked], True, total)  # fmt: skip

    def _chunk_range(self, s: Session, sid: int, x: str) -> tuple[Any, Any]:
        lo_col, hi_col = ("min_compute", "max_compute") if x == "compute" else ("min_step",
                                                                               "max_step")
        ph = "%s" if self.dialect == "postgresql" else "?"
        row = s.connection().exec_driver_sql(
            f"SELECT min({lo_col}), max({hi_col}) FROM point_chunks "
            f"WHERE series_id = {ph} AND level = {ph}",
            (sid, CHUNK_LEVELS[-1]),
        ).one()
        return row[0], row[1]

    def _downsample_chunks(
        self, s: Session, params: dict[str, Any], x: str
    ) -> tuple[dict[int, tuple[float, float]], int] | None:
        """The downsampling query's answer (chosen points by step, count) from `point_chunks`:
        a chunk inside one bucket gives its first, last, lowest and highest points; the raw
        points are read only for chunks across a bucket boundary or the range's edges. None
        when the chunks would not save much (few points per chunk or per bucket)."""
        conn = s.connection()
        pg = self.dialect == "postgresql"
        ph = "%s" if pg else "?"
        sid, since, lo, hi = params["sid"], params["since"], params["lo"], params["hi"]
        nb, span = params["nb"], params["span"]
        lo_col, hi_col = ("min_compute", "max_compute") if x == "compute" else ("min_step",
                                                                               "max_step")
        in_range = f"series_id = {ph} AND {hi_col} >= {ph} AND {lo_col} <= {ph}"
        counts = conn.exec_driver_sql(
            f"SELECT level, count(*), sum(n) FROM point_chunks WHERE {in_range} GROUP BY level",
            (sid, lo, hi),
        ).all()
        # The coarsest level with at least 4 chunks a bucket (so boundary chunks, read raw, are
        # at most about a quarter) and 4 points a chunk (else the raw scan is as cheap).
        level = next(
            (lv for lv, chunks, n in sorted(counts, reverse=True)
             if chunks >= 4 * nb and n >= 4 * chunks),
            None,
        )  # fmt: skip
        if level is None:
            return None
        if pg:  # the same, in the database: one query, no rows through Python but the answer
            sql = _PG_CHUNK_DOWNSAMPLE.format(lo_col=lo_col, hi_col=hi_col, x=x)
            chosen_pg: dict[int, tuple[float, float]] = {}
            total = 0
            for first, last, low, high, n in s.execute(text(sql), {**params, "lvl": level}):
                total += int(n)
                for st, c, v in (first, last):
                    chosen_pg[int(st)] = (c, v)
                for v, st, c in (low, high):
                    chosen_pg[int(st)] = (c, v)
            return chosen_pg, total
        # The bucket of an x, computed as the database does in the raw query (IEEE doubles in
        # the same order; PostgreSQL's integer cast rounds half to even, SQLite's truncates).
        # With integer steps and bounds both databases divide integers (truncating).
        ints = isinstance(lo, int) and isinstance(span, int) and x != "compute"
        cast = round if pg else int

        def bucket(v: float) -> int:
            if ints:
                return int((v - lo) * nb // span)
            return cast((v - lo) * nb / span)

        best: dict[int, list[tuple[int, float, float]]] = {}  # bucket -> first, last, low, high
        count = 0

        def offer(b: int, first: tuple, last: tuple, low: tuple, high: tuple, n: int) -> None:
            cur = best.get(b)
            if cur is None:
                best[b] = [first, last, low, high]
            else:
                if first[0] < cur[0][0]:
                    cur[0] = first
                if last[0] > cur[1][0]:
                    cur[1] = last
                if (low[2], low[0]) < (cur[2][2], cur[2][0]):
                    cur[2] = low
                if (high[2], high[0]) > (cur[3][2], cur[3][0]):
                    cur[3] = high

        ranges: list[tuple[int, int]] = []
        for r in conn.exec_driver_sql(
            "SELECT min_step, max_step, n, first_compute, first_value, last_compute, last_value,"
            " lo_step, lo_compute, lo_value, hi_step, hi_compute, hi_value, "
            f"{lo_col}, {hi_col} FROM point_chunks WHERE {in_range} AND level = {ph}",
            (sid, lo, hi, level),
        ):
            xlo, xhi = r[13], r[14]
            b = bucket(xlo)
            if r[0] >= since and xlo >= lo and xhi <= hi and bucket(xhi) == b:
                count += r[2]
                offer(b, (r[0], r[3], r[4]), (r[1], r[5], r[6]), (r[7], r[8], r[9]),
                      (r[10], r[11], r[12]), r[2])
            elif ranges and ranges[-1][1] + 1 >= r[0]:
                ranges[-1] = (ranges[-1][0], max(ranges[-1][1], r[1]))
            else:
                ranges.append((r[0], r[1]))
        for st, c, v in self._points_in_ranges(conn, sid, sorted(ranges)):
            xv = c if x == "compute" else st
            if st >= since and lo <= xv <= hi:
                count += 1
                pt = (st, c, v)
                offer(bucket(xv), pt, pt, pt, pt, 1)
        chosen: dict[int, tuple[float, float]] = {}
        for pts in best.values():
            for st, c, v in pts:
                chosen[int(st)] = (c, v)
        return chosen, count

    def _points_in_ranges(
        self, conn: Any, sid: int, ranges: list[tuple[int, int]]
    ) -> list[tuple[int, float, float]]:
        if not ranges:
            return []
        if self.dialect == "postgresql":
            return [tuple(r) for r in conn.exec_driver_sql(
                "SELECT p.step, p.compute, p.value FROM points p JOIN "
                "unnest(%s::bigint[], %s::bigint[]) AS r(a, b) "
                "ON p.series_id = %s AND p.step BETWEEN r.a AND r.b",
                ([a for a, _ in ranges], [b for _, b in ranges], sid),
            )]  # fmt: skip
        out: list[tuple[int, float, float]] = []
        for a, b in ranges:
            out += [tuple(r) for r in conn.exec_driver_sql(
                "SELECT step, compute, value FROM points "
                "WHERE series_id = ? AND step BETWEEN ? AND ?",
                (sid, a, b),
            )]  # fmt: skip
        return out
