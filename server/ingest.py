"""Parse and validate a batch of points before anything touches the database.

The whole batch is checked first and every problem is reported with its location
(`points[3].metrics.reward`), so a request is either stored whole or not at all.
Hand-written rather than a pydantic model: it runs on every ingest of up to 10,000 points, and
needs precise per-point messages for NaN/inf, which JSON parsers happily accept.
"""

from __future__ import annotations

import gzip
import json
import math
import operator
import zlib
from collections.abc import Iterable
from typing import Any, NamedTuple, TypeGuard, cast

try:  # a C parser several times faster than json for the ingest hot path
    import orjson
except ImportError:  # pragma: no cover - optional speed-up
    orjson = None  # type: ignore[assignment]

from scalewatch.server import limits
from scalewatch.server.jsonbounds import JsonBounds, JsonScanner, JsonShapeError


class IngestError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


class PointRow(NamedTuple):
    """One metric value at one step (a NamedTuple: ingest builds up to a million per second)."""

    metric: str
    step: int
    compute: float
    value: float
    wall_time: float | None


class SeriesPoints(NamedTuple):
    """One metric's points of a batch as columns, in step order with one point per step (what
    the store writes). The lists are shared between the metrics of a batch whose points all
    carry the same metrics (a trainer's): read them, never change them."""

    steps: list[int]
    computes: list[float]
    values: list[float]
    walls: list[float | None]

    def appends_after(self, last: int | None) -> bool:
        """Whether these points all lie past ``last``, the series' last stored step (None: an
        empty series): a pure append, which nothing stored can conflict with."""
        return last is None or self.steps[0] > last


Batch = dict[str, SeriesPoints]  # metric name -> its points


def in_order(steps: list[int]) -> bool:
    """Strictly increasing: in step order without repeats (one pass, in C)."""
    return all(map(operator.lt, steps, steps[1:]))


def in_step_order(
    steps: list[int], computes: list[float], values: list[float], walls: list[float | None]
) -> SeriesPoints:
    """One metric's columns in step order, one point per step: the last of a repeated step wins
    (a resend may repeat one). A trainer's batch is already in order without repeats: that is
    checked in one pass, and only another batch is sorted."""
    if in_order(steps):
        return SeriesPoints(steps, computes, values, walls)
    last = {st: i for i, st in enumerate(steps)}  # the last write of each step
    order = [last[st] for st in sorted(last)]
    return SeriesPoints(
        [steps[i] for i in order],
        [computes[i] for i in order],
        [values[i] for i in order],
        [walls[i] for i in order],
    )


def group_rows(rows: Iterable[PointRow]) -> Batch:
    """Rows by metric, as `SeriesPoints` (body order per metric, then `in_step_order`)."""
    cols: dict[str, tuple[list[Any], list[Any], list[Any], list[Any]]] = {}
    for metric, step, compute, value, wall in rows:
        c = cols.get(metric)
        if c is None:
            c = cols[metric] = ([], [], [], [])
        c[0].append(step)
        c[1].append(compute)
        c[2].append(value)
        c[3].append(wall)
    return {metric: in_step_order(*c) for metric, c in cols.items()}


# Bytes an inflated body is produced in: each chunk's shape is checked (jsonbounds) before the
# next one is inflated, so a bomb is refused after its first chunk.
INFLATE_CHUNK_BYTES = 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"


def decode_body(raw: bytes, content_encoding: str | None) -> Any:
    """Inflate (gzip/deflate) within the size caps and parse JSON within the shape bounds
    (`jsonbounds`): the careful path's whole decode."""
    scanner = JsonScanner()
    data = inflate(raw, content_encoding, scanner)
    return parse_json(data, None if scanner.offset == len(data) else scanner.bounds)


def inflate(raw: bytes, content_encoding: str | None, scanner: JsonScanner | None = None) -> bytes:
    """The body inflated per its Content-Encoding (gzip/deflate) within the size caps.

    Inflated a chunk at a time: past `MAX_INFLATED_BYTES` it stops there (413). A body that
    inflates to more than one chunk has each chunk checked by `scanner` (the body's shape
    bounds) before the next is made, so a bomb is refused after its first megabyte; a body of
    one chunk is left to the caller (a typed decode needs no scan: see `parse_batch`)."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        return raw
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise IngestError(415, f"unsupported Content-Encoding {content_encoding!r}")
    wbits = 16 + zlib.MAX_WBITS if encoding != "deflate" else zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    chunks: list[bytes] = []
    size, pending, members = 0, raw, 1
    try:
        while True:
            chunk = inflater.decompress(pending, INFLATE_CHUNK_BYTES)
            pending = inflater.unconsumed_tail
            if chunk:
                size += len(chunk)
                if size > limits.MAX_INFLATED_BYTES:
                    raise IngestError(
                        413, f"inflated body exceeds {limits.MAX_INFLATED_BYTES} bytes")
                chunks.append(chunk)
                if len(chunks) == 2:  # more than one chunk: scan what came before too
                    _scan(scanner, chunks[0])
                if len(chunks) >= 2:
                    _scan(scanner, chunk)
            if inflater.eof:
                if not inflater.unused_data:
                    break
                # Another gzip member follows (RFC 1952 2.2): read it too, or its points
                # would be dropped without a word. Anything else after the stream is refused.
                pending = inflater.unused_data
                members += 1
                _check_next_member(encoding, pending, members)
                inflater = zlib.decompressobj(wbits)
            elif not chunk and not pending:  # input used up before the stream's end
                break
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise IngestError(400, f"body is not valid {encoding}: {exc}") from exc
    if not inflater.eof:
        raise IngestError(400, f"body is not valid {encoding}: it ends too early")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _check_next_member(encoding: str, rest: bytes, members: int) -> None:
    if encoding == "deflate" or not rest.startswith(GZIP_MAGIC):
        raise IngestError(
            400, f"body is not valid {encoding}: {len(rest)} bytes follow the end of its data")
    if members > limits.MAX_GZIP_MEMBERS:
        raise IngestError(
            400, f"body is not valid {encoding}: more than {limits.MAX_GZIP_MEMBERS} gzip "
            "members (compress a batch as one)")


def _scan(scanner: JsonScanner | None, chunk: bytes) -> None:
    if scanner is None:
        return
    try:
        scanner.feed(chunk)
    except JsonShapeError as exc:
        raise IngestError(exc.status, exc.message) from exc


def parse_json(raw: bytes, bounds: JsonBounds | None = None) -> Any:
    """The JSON document (NaN/Infinity tokens read, so validation can name them), or 400.

    With `bounds`, the body's shape is checked first (nothing is parsed past them)."""
    if bounds is not None:
        _scan(JsonScanner(bounds), raw)
    if orjson is not None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # e.g. NaN/Infinity tokens: the stdlib parser reads them, validation names them
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(400, f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:  # e.g. 100k nested "[": no batch is nested that deep
        raise IngestError(400, "body is not valid JSON: nested too deeply") from exc


def _is_number(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _finite(x: float) -> bool:
    """math.isfinite, but False (not OverflowError) for an integer beyond float range (10**400)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def check_name(name: Any) -> str | None:
    """Why `name` cannot be a metric name, or None. Metric names may be as long as MLflow's
    metric keys (limits.MAX_METRIC_NAME_LENGTH); project and run names are shorter."""
    if not isinstance(name, str) or not name.strip():
        return "metric names must be non-empty strings"
    if len(name) > limits.MAX_METRIC_NAME_LENGTH:
        shown = repr(name[:40]) + ("..." if len(name) > 40 else "")
        return (f"metric name {shown} has {len(name)} characters; metric names may have at "
                f"most {limits.MAX_METRIC_NAME_LENGTH}")
    if "\x00" in name:
        return "metric names must not contain NUL characters"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: unprintable later
        return "metric names must be valid UTF-8 text (no lone surrogates)"
    return None


_POINT_KEYS = frozenset(("step", "compute", "metrics", "time"))
_isfinite = math.isfinite


def _validate_fast(points: list[Any]) -> list[PointRow] | None:
    """The common case in one tight loop: every point well-formed. Returns None at the first
    doubt, and the careful loop below then reports every problem with its location.

    Written for speed (it runs for every point ingested): names bound locally, rows made with
    tuple.__new__ (a NamedTuple's own __new__ is a Python call per row), no float() of what is
    already a float."""
    rows: list[PointRow] = []
    append = rows.append
    new_row, row_type = tuple.__new__, PointRow
    isfinite, point_keys = _isfinite, _POINT_KEYS
    known_names: set[str] = set()
    max_step, max_metrics = limits.MAX_STEP, limits.MAX_METRICS_PER_POINT
    try:
        for p in points:
            if type(p) is not dict or not p.keys() <= point_keys:
                return None
            step, compute, metrics = p["step"], p["compute"], p["metrics"]
            wall = p.get("time")
            if type(step) is not int or not 0 <= step <= max_step:
                return None
            tc = type(compute)
            if (tc is not float and tc is not int) or not (isfinite(compute) and compute >= 0):
                return None
            if wall is not None:
                tw = type(wall)
                if (tw is not float and tw is not int) or not isfinite(wall):
                    return None
                if tw is int:
                    wall = float(wall)
            if type(metrics) is not dict or not metrics or len(metrics) > max_metrics:
                return None
            if tc is int:
                compute = float(compute)
            for name, value in metrics.items():
                tv = type(value)
                if tv is float:
                    if not isfinite(value):
                        return None
                elif tv is int and isfinite(value):
                    value = float(value)
                else:
                    return None
                if name not in known_names:
                    if check_name(name) is not None:
                        return None
                    known_names.add(name)
                append(new_row(row_type, (name, step, compute, value, wall)))
    except (KeyError, TypeError, OverflowError):  # OverflowError: an int beyond float range
        return None
    return rows


def validate_points(body: Any) -> list[PointRow]:
    """Return one row per (point, metric), or raise IngestError(422) listing every problem."""
    if not isinstance(body, dict) or "points" not in body:
        raise IngestError(422, "body must be an object with a 'points' list")
    points = body["points"]
    if not isinstance(points, list):
        raise IngestError(422, "'points' must be a list")
    if len(points) > limits.MAX_POINTS_PER_REQUEST:
        raise IngestError(
            413,
            f"{len(points)} points in one request; at most {limits.MAX_POINTS_PER_REQUEST}"
            " are accepted, split the batch",
        )
    errors: list[dict[str, str]] = []
    rows: list[PointRow] = []

    def bad(loc: str, msg: str) -> None:
        errors.append({"loc": loc, "msg": msg})

    fast_rows = _validate_fast(points)
    if fast_rows is not None:
        return fast_rows
    for i, p in enumerate(points):
        where = f"points[{i}]"
        if not isinstance(p, dict):
            bad(where, "each point must be an object")
            continue
        unknown = set(p) - _POINT_KEYS
        if unknown:
            bad(where, f"unknown fields: {', '.join(sorted(map(str, unknown)))}")
        step, compute = p.get("step"), p.get("compute")
        metrics, wall = p.get("metrics"), p.get("time")
        ok = True
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        if not isinstance(step, int) or isinstance(step, bool):
            bad(f"{where}.step", "required, must be an integer")
            ok = False
        elif not 0 <= step <= limits.MAX_STEP:
            bad(f"{where}.step", "must be between 0 and 2^62")
            ok = False
        if not _is_number(compute) or not _finite(compute):
            bad(f"{where}.compute", "required, must be a finite number within float range")
            ok = False
        elif compute < 0:
            bad(f"{where}.compute", "must not be negative")
            ok = False
        if wall is not None and (not _is_number(wall) or not _finite(wall)):
            bad(f"{where}.time", "must be a finite number (seconds since the epoch) or null")
            ok = False
        if not isinstance(metrics, dict) or not metrics:
            bad(f"{where}.metrics", "required, must be a non-empty object of name: number")
            continue
        if len(metrics) > limits.MAX_METRICS_PER_POINT:
            bad(f"{where}.metrics", f"at most {limits.MAX_METRICS_PER_POINT} metrics a point")
            continue
        for name, value in metrics.items():
            name_problem = check_name(name)
            if name_problem:
                bad(f"{where}.metrics", name_problem)
                ok = False
            elif not _is_number(value):
                bad(f"{where}.metrics.{name}", "must be a number")
                ok = False
            elif not _finite(value):
                bad(f"{where}.metrics.{name}", "must be a finite number within float range")
                ok = False
        if ok:
            t = float(wall) if wall is not None else None
            good_step, good_compute = cast(int, step), float(cast(float, compute))  # ok: checked
            for name, value in metrics.items():
                rows.append(PointRow(name, good_step, good_compute, float(value), t))
        if len(errors) >= 1000:
            break
    if errors:
        raise IngestError(422, f"{len(errors)} invalid field(s); nothing was stored", errors)
    return rows
