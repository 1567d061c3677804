"""Point reads: a series' points by step, and downsampling inside the database (raw
buckets, or the `point_chunks` rollup), with a small cache of downsampled pages."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, select, text
from sqlalchemy.orm import Session

from scalewatch.server import limits
from scalewatch.server.db.models import Point, Run, Series
from scalewatch.server.store.base import NotFound, PointsPage
from scalewatch.server.store.chunks import CHUNK_LEVELS
from scalewatch.server.store.common import SqlBase

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


# Downsampling from point_chunks (see PointReadsMixin._downsample_chunks): chunks inside one bucket
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

# The rollup envelope (PointReadsMixin._downsample_rollup): each of a chunk's four points falls in
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


class PointReadsMixin(SqlBase):
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
        wall_times: bool = False,
    ) -> PointsPage:
        """Points by step; with `max_points` downsampled in the database. Without it at most
        `limit` (default `MAX_RAW_POINTS`) points from `since_step` on; `downsampled` is then
        True when more exist past the last one returned. `rollup` (with `max_points`): a long
        series is drawn from its `point_chunks` alone (`_downsample_rollup`), not exactly the
        raw buckets but a few milliseconds whatever its length. `wall_times` (a raw page, without
        `max_points`): each point's wall-clock time too."""
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
                query = select(Point.step, Point.compute, Point.value, Point.wall_time) \
                    if wall_times else select(Point.step, Point.compute, Point.value)
                rows: Sequence[Any] = s.execute(
                    query.where(where).order_by(Point.step).limit(cap + 1)).all()
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
                    [r[3] for r in rows[:cap]] if wall_times else None,
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

        Row = tuple[Any, ...]

        def offer(b: int, first: Row, last: Row, low: Row, high: Row, n: int) -> None:
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
