"""The Compare page's points for many runs at once: one level of each series' chunks, read in
a few queries for all of them (`RollupMixin.get_points_many`).

`PointReadsMixin.get_points(rollup=True)` draws a series from its chunks in ~5 round trips (the
series, the level's count, the envelope query, the transaction), each a wake-up of the database
process: ten series cost ~50 round trips, and on a busy 2-core machine every one of them may
wait for a core. Here the whole page is two queries: the series of every run, and one level
of every series' chunks packed into one value (a series with too few chunks there is asked
again at the next finer level), whose envelope (the same four picks a bucket as
`_rollup_sql`'s DISTINCT ON, the same bucket arithmetic) is computed with numpy instead of
four sorts a series in the database.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import and_, select

from scalewatch.server.db.models import Run, Series
from scalewatch.server.store.base import NotFound, PointsPage
from scalewatch.server.store.chunks import CHUNK_LEVELS
from scalewatch.server.store.point_reads_sql import _DOWNSAMPLED, PointReadsMixin

# One row a chunk: the series, then each role's (step, compute, value), as PostgreSQL's binary
# send functions write them (big-endian), all rows concatenated into one bytea on the server:
# one value to transfer and no per-row decoding here (a binary COPY arrives as one message a
# row, which cost 40 ms of Python for ten series).
_ROLE_COLUMNS = (
    ("min_step", "first_compute", "first_value"),
    ("max_step", "last_compute", "last_value"),
    ("lo_step", "lo_compute", "lo_value"),
    ("hi_step", "hi_compute", "hi_value"),
)
_FIELDS: list[tuple[str, str]] = [("sid", ">i8"), ("n", ">i8")]
for _k in range(4):
    _FIELDS += [(f"st{_k}", ">i8"), (f"c{_k}", ">f8"), (f"v{_k}", ">f8")]
_ROW = np.dtype(_FIELDS)

# The chunks of each (series, level) asked, overlapping its range (a role's point lies in its
# chunk's compute span, so no other chunk can hold one in range).
_PAIRS = ("FROM unnest(%s::int[], %s::int[], %s::float8[], %s::float8[]) AS q(sid, lvl, lo, hi) "
          "JOIN point_chunks pc ON pc.series_id = q.sid AND pc.level = q.lvl "
          "AND pc.max_compute >= q.lo AND pc.min_compute <= q.hi")  # fmt: skip
_PACKED = (
    "SELECT string_agg(int8send(pc.series_id::int8) || int8send(pc.n::int8) || "
    + " || ".join(f"int8send(pc.{st}) || float8send(pc.{c}) || float8send(pc.{v})"
                  for st, c, v in _ROLE_COLUMNS)
    + f", ''::bytea) {_PAIRS}"
)
_RANGES = ("SELECT series_id, min(min_compute), max(max_compute) FROM point_chunks "
           "WHERE series_id = ANY(%s::int[]) AND level = %s GROUP BY series_id")  # fmt: skip


def envelope(
    rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, nb: int, span: np.ndarray
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per series (rows' `sid`), the steps, computes and values `_rollup_sql` picks on
    PostgreSQL: for each role, its points inside the series' [lo, hi] fall in bucket
    CAST((compute - lo) * nb / span AS INTEGER) (PostgreSQL rounds to nearest, ties to even:
    numpy's rint, same float arithmetic in the same order), and a bucket keeps the role's
    first by (step), last by (step), lowest by (value, step), highest by (value, step).
    `lo`, `hi`, `span` are indexed by the series' position in `np.unique(rows['sid'])`."""
    sids, pos = np.unique(rows["sid"], return_inverse=True)
    picked_sid, picked_st, picked_c, picked_v = [], [], [], []
    for k in range(4):
        st, c, v = rows[f"st{k}"].astype(np.int64), rows[f"c{k}"].astype(float), \
            rows[f"v{k}"].astype(float)  # fmt: skip
        keep = (c >= lo[pos]) & (c <= hi[pos])
        p, st, c, v = pos[keep], st[keep], c[keep], v[keep]
        b = np.rint((c - lo[p]) * float(nb) / span[p]).astype(np.int64)
        # Sorted by (series, bucket, key): the pick is a group's first (earliest, lowest) or
        # last (latest, highest) row.
        order = np.lexsort((st, b, p)) if k < 2 else np.lexsort((st, v, b, p))
        p, b = p[order], b[order]
        if len(p) == 0:
            continue
        new = np.ones(len(p), dtype=bool)
        new[1:] = (p[1:] != p[:-1]) | (b[1:] != b[:-1])
        at = np.flatnonzero(new) if k in (0, 2) else np.append(np.flatnonzero(new)[1:] - 1,
                                                                 len(p) - 1)  # fmt: skip
        sel = order[at]
        picked_sid.append(pos[keep][sel])
        picked_st.append(st[sel])
        picked_c.append(c[sel])
        picked_v.append(v[sel])
    out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if not picked_sid:
        return out
    ps, pst = np.concatenate(picked_sid), np.concatenate(picked_st)
    pc, pv = np.concatenate(picked_c), np.concatenate(picked_v)
    # One point a step (a step picked by several roles is the same stored point), by step.
    order = np.lexsort((pst, ps))
    ps, pst, pc, pv = ps[order], pst[order], pc[order], pv[order]
    first = np.ones(len(ps), dtype=bool)
    first[1:] = (ps[1:] != ps[:-1]) | (pst[1:] != pst[:-1])
    ps, pst, pc, pv = ps[first], pst[first], pc[first], pv[first]
    for i, sid in enumerate(sids):
        m = ps == i
        out[int(sid)] = (pst[m], pc[m], pv[m])
    return out


class RollupMixin(PointReadsMixin):
    def get_points_many(
        self,
        run_ids: list[int],
        metric: str,
        *,
        max_points: int,
        x_range: tuple[float, float] | None = None,
    ) -> dict[int, PointsPage]:
        """`get_points(run, metric, max_points=, x_range=, rollup=True)` of every run, by run
        id; the same pages (the same cache). On PostgreSQL the long series are read together
        (see the module's docstring); a short one, and every series on SQLite (in-process: a
        query costs no wake-up there), is read as `get_points` reads it. Raises `NotFound`
        for an unknown run."""
        ids = list(dict.fromkeys(run_ids))
        pages: dict[int, PointsPage] = {}
        alone: list[int] = []  # read by get_points
        with self.session() as s:
            found = s.execute(
                select(Run.id, Series.id, Series.n_points, Series.updated_at)
                .select_from(Run)
                .outerjoin(Series, and_(Series.run_id == Run.id, Series.name == metric))
                .where(Run.id.in_(ids))
            ).all()
            missing = set(ids) - {r[0] for r in found}
            if missing:
                raise NotFound(f"run {min(missing)} not found")
            wanted: dict[int, tuple[int, int, Any]] = {}  # sid -> (run, n_points, cache key)
            for run_id, sid, n_points, changed_at in found:
                key = (id(self), sid, changed_at, 0, max_points, x_range, "compute", True)
                if sid is None or self.dialect != "postgresql" or n_points <= max_points:
                    alone.append(run_id)
                elif (hit := _DOWNSAMPLED.get(key)) is not None:
                    pages[run_id] = hit
                else:
                    wanted[sid] = (run_id, int(n_points), key)
            if wanted:
                done = self._rollup_pages(s, wanted, metric, max_points, x_range)
                for sid, (run_id, _, key) in wanted.items():
                    if sid in done:
                        _DOWNSAMPLED.put(key, done[sid])
                        pages[run_id] = done[sid]
                    else:  # no level dense enough, or few points in range: the exact query
                        alone.append(run_id)
        for run_id in alone:
            pages[run_id] = self.get_points(run_id, metric, max_points=max_points,
                                            x_range=x_range, rollup=True)  # fmt: skip
        return pages

    def _rollup_pages(
        self,
        s: Any,
        wanted: dict[int, tuple[int, int, Any]],
        metric: str,
        max_points: int,
        x_range: tuple[float, float] | None,
    ) -> dict[int, PointsPage]:
        """The envelope pages of the series in `wanted` that `_downsample_rollup` would draw
        from their chunks (the others are left out)."""
        raw: Any = s.connection().connection.driver_connection
        cur = raw.cursor()
        try:
            ranges: dict[int, tuple[float, float]] = {}
            if x_range is not None:
                ranges = {sid: (float(x_range[0]), float(x_range[1])) for sid in wanted}
            else:
                cur.execute(_RANGES, (list(wanted), CHUNK_LEVELS[-1]))
                ranges = {sid: (lo, hi) for sid, lo, hi in cur.fetchall() if lo is not None}
            nb = max(1, max_points // 4)
            # The coarsest level with a chunk a bucket, as `_downsample_rollup` finds it: the
            # levels that could have that many, coarsest first, one query a round for every
            # series still without one (a 100k-point series: level 7, in the first round).
            todo = {sid: [lv for lv in reversed(CHUNK_LEVELS) if (n >> lv) >= nb]
                    for sid, (_, n, _) in wanted.items() if sid in ranges}  # fmt: skip
            parts: list[np.ndarray] = []
            totals: dict[int, int] = {}  # sid -> points in range
            while pairs := [(sid, lvs.pop(0)) for sid, lvs in todo.items() if lvs]:
                cur.execute(_PACKED, _pair_params(pairs, ranges), binary=True)
                packed = cur.fetchone()
                rows = np.frombuffer(packed[0] if packed and packed[0] else b"", dtype=_ROW)
                sids, counts = np.unique(rows["sid"], return_counts=True)
                dense = sids[counts >= nb]
                for sid in dense.tolist():
                    todo.pop(sid)
                    totals[sid] = int(rows["n"][rows["sid"] == sid].sum())
                parts.append(rows[np.isin(rows["sid"], dense)])
        finally:
            cur.close()
        keep = [sid for sid, total in totals.items() if total > max_points]
        rows = np.concatenate(parts) if parts else np.empty(0, dtype=_ROW)
        rows = rows[np.isin(rows["sid"], keep)]
        sids = np.unique(rows["sid"])
        lo = np.array([ranges[int(sid)][0] for sid in sids])
        hi = np.array([ranges[int(sid)][1] for sid in sids])
        span = np.array([float((h - lo_) or 1) * (1 + 1e-12) for lo_, h in zip(lo, hi,
                                                                                strict=True)])
        out = {}
        for sid, (st, c, v) in envelope(rows, lo, hi, nb, span).items():
            out[sid] = PointsPage(metric, st.tolist(), c.tolist(), v.tolist(), True, totals[sid])
        return out


def _pair_params(
    pairs: list[tuple[int, int]], ranges: dict[int, tuple[float, float]]
) -> tuple[list[int], list[int], list[float], list[float]]:
    return ([p[0] for p in pairs], [p[1] for p in pairs], [ranges[p[0]][0] for p in pairs],
            [ranges[p[0]][1] for p in pairs])  # fmt: skip
