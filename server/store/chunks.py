"""Per-series rollups of points ("chunks"), so that downsampling need not read every point.

A chunk of level L holds the points whose ``step >> L`` is the same (level 4: 16 consecutive
steps, level 7: 128, level 10: 1,024): their count, step and compute spans, and four of them
whole: the first and last by step, the lowest and highest by value (ties: the earliest lowest,
the latest highest, as the raw downsampling query picks them). The store keeps them exact at
every ingest: an append merges the batch into its chunks (nothing stored can change, so
first/lowest/highest merge like min/max), any other write recomputes its chunks from the points.

Downsampling over buckets of compute (or step) then reads a chunk's four points instead of its
points whenever the chunk lies inside one bucket, and only the raw points of the chunks that
straddle a bucket boundary or the edges of the requested range: the result is exactly what the
raw query returns, from a fraction of the rows. The Compare page reads the chunks alone (an
envelope of real points, `PointReadsMixin._downsample_rollup`): level 7 is there for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

CHUNK_LEVELS = (4, 7, 10)  # chunk = step >> level; finest first (7: migration 0009)

COLUMNS = (
    "series_id", "level", "chunk", "n", "min_step", "max_step", "min_compute", "max_compute",
    "first_compute", "first_value", "last_compute", "last_value",
    "lo_step", "lo_compute", "lo_value", "hi_step", "hi_compute", "hi_value",
)  # fmt: skip


class ChunkRow(NamedTuple):
    series_id: int
    level: int
    chunk: int
    n: int
    min_step: int
    max_step: int
    min_compute: float
    max_compute: float
    first_compute: float
    first_value: float
    last_compute: float
    last_value: float
    lo_step: int
    lo_compute: float
    lo_value: float
    hi_step: int
    hi_compute: float
    hi_value: float


Pt = tuple[int, float, float]  # step, compute, value


def chunk_rows_from_points(sid: int, level: int, points: Iterable[Pt]) -> list[ChunkRow]:
    """The chunks of `points` (any order, distinct steps; one series) at `level`.

    One pass in step order (ingest calls this for every batch, so it avoids per-point calls)."""
    out: list[ChunkRow] = []
    chunk = None
    n = 0
    first = last = lo = hi = (0, 0.0, 0.0)
    cmin = cmax = 0.0
    for p in sorted(points):
        c = p[0] >> level
        if c != chunk:
            if chunk is not None:
                out.append(ChunkRow(
                    sid, level, chunk, n, first[0], last[0], cmin, cmax, first[1], first[2],
                    last[1], last[2], lo[0], lo[1], lo[2], hi[0], hi[1], hi[2],
                ))  # fmt: skip
            chunk, n, first, lo, hi, cmin, cmax = c, 0, p, p, p, p[1], p[1]
        n += 1
        last = p
        v = p[2]
        if v < lo[2]:  # ties: the earliest lowest stays (points come in step order)
            lo = p
        if v >= hi[2]:  # ties: the latest highest wins
            hi = p
        if p[1] < cmin:
            cmin = p[1]
        elif p[1] > cmax:
            cmax = p[1]
    if chunk is not None:
        out.append(ChunkRow(
            sid, level, chunk, n, first[0], last[0], cmin, cmax, first[1], first[2],
            last[1], last[2], lo[0], lo[1], lo[2], hi[0], hi[1], hi[2],
        ))  # fmt: skip
    return out


def rollup_rows(sid: int, level: int, rows: Sequence[ChunkRow]) -> list[ChunkRow]:
    """Chunks of `level` from finer chunks of one series (exact: min/max of mins/maxes)."""
    groups: dict[int, list[ChunkRow]] = {}
    for r in rows:
        groups.setdefault(r.min_step >> level, []).append(r)
    out = []
    for chunk, rs in sorted(groups.items()):
        first = min(rs, key=lambda r: r.min_step)
        last = max(rs, key=lambda r: r.max_step)
        lo = min(rs, key=lambda r: (r.lo_value, r.lo_step))
        hi = max(rs, key=lambda r: (r.hi_value, r.hi_step))
        out.append(ChunkRow(
            sid, level, chunk, sum(r.n for r in rs), first.min_step, last.max_step,
            min(r.min_compute for r in rs), max(r.max_compute for r in rs),
            first.first_compute, first.first_value, last.last_compute, last.last_value,
            lo.lo_step, lo.lo_compute, lo.lo_value, hi.hi_step, hi.hi_compute, hi.hi_value,
        ))  # fmt: skip
    return out


def all_levels(sid: int, points: Iterable[Pt]) -> list[ChunkRow]:
    """Every level's chunks of `points` (one series)."""
    finest = chunk_rows_from_points(sid, CHUNK_LEVELS[0], points)
    out = list(finest)
    for level in CHUNK_LEVELS[1:]:
        out += rollup_rows(sid, level, finest)
    return out


def level_columns(
    sids: np.ndarray, steps: np.ndarray, computes: np.ndarray, values: np.ndarray
) -> list[np.ndarray]:
    """`all_levels` of many series at once, as one array per column of COLUMNS (rows ordered
    by series, level, chunk): the points of each series are contiguous and in strictly
    increasing step order (a batch's `SeriesPoints`). The same rows bit for bit, ties too: each
    extreme is the value at the first index (lowest, min/max compute) or the last index
    (highest) holding it, which is what the loop's strict/non-strict comparisons keep.

    Vectorised over every level at once (the points repeated once per level, level after
    level): ~0.15 ms for a 1,000-point batch where the loop took ~0.8 ms."""
    n, k = len(steps), len(CHUNK_LEVELS)
    at = np.tile(np.arange(n), k)  # the point behind each position
    level = np.repeat(np.array(CHUNK_LEVELS), n)
    chunk = np.concatenate([steps >> lv for lv in CHUNK_LEVELS])
    sid, value, compute = sids[at], values[at], computes[at]
    starts = np.empty(n * k, dtype=bool)  # a position that starts a chunk row
    starts[0] = True
    np.not_equal(chunk[1:], chunk[:-1], out=starts[1:])
    starts[1:] |= sid[1:] != sid[:-1]
    starts[::n] = True  # each level's first point
    first = np.flatnonzero(starts)
    last = np.append(first[1:], n * k) - 1
    row = np.cumsum(starts) - 1  # each position's chunk row
    pos = np.arange(n * k)

    def where_extreme(x: np.ndarray, extreme: np.ufunc, pick: np.ufunc, none: int) -> np.ndarray:
        """Per row, the first (pick=minimum) or last (maximum) point whose x is the row's
        extreme (minimum or maximum)."""
        return at[pick.reduceat(np.where(x == extreme.reduceat(x, first)[row], pos, none), first)]

    lo = where_extreme(value, np.minimum, np.minimum, n * k)
    hi = where_extreme(value, np.maximum, np.maximum, -1)
    cmin = computes[where_extreme(compute, np.minimum, np.minimum, n * k)]
    cmax = computes[where_extreme(compute, np.maximum, np.minimum, n * k)]
    f, la = at[first], at[last]
    cols = [
        sid[first], level[first], chunk[first], last - first + 1, steps[f], steps[la], cmin,
        cmax, computes[f], values[f], computes[la], values[la],
        steps[lo], computes[lo], values[lo], steps[hi], computes[hi], values[hi],
    ]  # fmt: skip
    if sids[0] == sids[-1]:  # one series: already in (level, chunk) order
        return cols
    order = np.lexsort((cols[2], cols[1], cols[0]))  # series, level, chunk: the key's order
    return [c[order] for c in cols]


_PLACEHOLDERS = {"postgresql": "%s", "sqlite": "?"}


def upsert_sql(dialect: str, merge: bool) -> str:
    """INSERT of chunk rows; on conflict either replace the row, or (`merge`, for rows built
    from appended points only, all past the chunk's stored steps) merge into it."""
    ph = _PLACEHOLDERS[dialect]
    return (
        f"INSERT INTO point_chunks ({', '.join(COLUMNS)}) "
        f"VALUES ({', '.join([ph] * len(COLUMNS))}) " + conflict_sql(dialect, merge)
    )


def conflict_sql(dialect: str, merge: bool) -> str:
    """The ON CONFLICT clause of `upsert_sql` (also used after an INSERT ... SELECT)."""
    least, greatest = ("LEAST", "GREATEST") if dialect == "postgresql" else ("min", "max")
    head = "ON CONFLICT (series_id, level, chunk) DO UPDATE SET "
    if not merge:
        return head + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[3:])
    old = "point_chunks"
    lower = f"excluded.lo_value < {old}.lo_value"  # ties: the stored (earlier) one stays
    higher = f"excluded.hi_value >= {old}.hi_value"  # ties: the new (later) one wins
    sets = [
        f"n = {old}.n + excluded.n",
        "max_step = excluded.max_step",
        f"min_compute = {least}({old}.min_compute, excluded.min_compute)",
        f"max_compute = {greatest}({old}.max_compute, excluded.max_compute)",
        "last_compute = excluded.last_compute",
        "last_value = excluded.last_value",
        *(f"lo_{c} = CASE WHEN {lower} THEN excluded.lo_{c} ELSE {old}.lo_{c} END"
          for c in ("step", "compute", "value")),
        *(f"hi_{c} = CASE WHEN {higher} THEN excluded.hi_{c} ELSE {old}.hi_{c} END"
          for c in ("step", "compute", "value")),
    ]  # fmt: skip
    return head + ", ".join(sets)
