"""PostgreSQL COPY payloads for ingest, built in bulk with numpy.

Binary COPY (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format"): a header,
then per row a field count and each field as its byte length and big-endian value (length -1:
NULL), then a -1 trailer. A whole batch is one numpy structured array written out at once:
no float is formatted as text on our side or parsed on the server's (the text COPY spent a
third of an ingest's time in repr() and its database side in float parsing), and every value is
stored bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from scalewatch.server.ingest import PointRow
from scalewatch.server.store.chunks import COLUMNS as CHUNK_COLUMNS
from scalewatch.server.store.chunks import ChunkRow

HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"

POINT_COLUMNS = "series_id, step, compute, value, wall_time"

# series_id int4, step int8, compute/value/wall_time float8; without wall_time it is NULL.
_WITH_TIME = np.dtype([
    ("n", ">i2"), ("l_sid", ">i4"), ("sid", ">i4"), ("l_step", ">i4"), ("step", ">i8"),
    ("l_c", ">i4"), ("c", ">f8"), ("l_v", ">i4"), ("v", ">f8"), ("l_w", ">i4"), ("w", ">f8"),
])  # fmt: skip
_NO_TIME = np.dtype([
    ("n", ">i2"), ("l_sid", ">i4"), ("sid", ">i4"), ("l_step", ">i4"), ("step", ">i8"),
    ("l_c", ">i4"), ("c", ">f8"), ("l_v", ">i4"), ("v", ">f8"), ("l_w", ">i4"),
])  # fmt: skip


def _point_rows(sid: int, rows: Sequence[PointRow], timed: bool) -> bytes:
    out = np.empty(len(rows), dtype=_WITH_TIME if timed else _NO_TIME)
    _, steps, computes, values, walls = zip(*rows, strict=True)  # columns, in C
    out["n"] = 5
    out["l_sid"], out["sid"] = 4, sid
    out["l_step"], out["step"] = 8, steps
    out["l_c"], out["c"] = 8, computes
    out["l_v"], out["v"] = 8, values
    if timed:
        out["l_w"], out["w"] = 8, walls
    else:
        out["l_w"] = -1  # NULL
    return out.tobytes()


def points_binary(appends: Iterable[tuple[int, Sequence[PointRow]]]) -> bytes:
    """The binary COPY stream of `points` rows for every (series id, rows)."""
    parts = [HEADER]
    for sid, batch in appends:
        if all(r.wall_time is not None for r in batch):  # the usual batch: one array
            parts.append(_point_rows(sid, batch, True))
            continue
        timed = [r for r in batch if r.wall_time is not None]
        untimed = [r for r in batch if r.wall_time is None]
        if timed:
            parts.append(_point_rows(sid, timed, True))
        if untimed:
            parts.append(_point_rows(sid, untimed, False))
    parts.append(TRAILER)
    return b"".join(parts)


# The chunk columns (chunks.COLUMNS): ints are series_id, level, n (int4), chunk, min_step,
# max_step, lo_step, hi_step (int8); the rest float8.
_INT4 = {"series_id", "level", "n"}
_INT8 = {"chunk", "min_step", "max_step", "lo_step", "hi_step"}
_CHUNK = np.dtype([("fields", ">i2")] + [
    item for c in CHUNK_COLUMNS for item in (
        (f"l_{c}", ">i4"), (c, ">i4" if c in _INT4 else ">i8" if c in _INT8 else ">f8"))
])  # fmt: skip


def chunks_binary(rows: Sequence[ChunkRow]) -> bytes:
    """The binary COPY stream of chunk rows (columns in `chunks.COLUMNS` order)."""
    out = np.empty(len(rows), dtype=_CHUNK)
    out["fields"] = len(CHUNK_COLUMNS)
    for name, column in zip(CHUNK_COLUMNS, zip(*rows, strict=True), strict=True):
        out[f"l_{name}"] = 4 if name in _INT4 else 8
        out[name] = column
    return HEADER + out.tobytes() + TRAILER
