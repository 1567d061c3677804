"""The msgspec fast path of ingest decoding gives exactly the careful path's rows, or defers.

`fastdecode.parse_batch` must answer every body as `ingest.validate_points(decode_body())`
does, grouped by metric (`ingest.group_rows`): the same points (same types, floats bit for
bit) or the same IngestError.
"""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from scalewatch.server import limits
from scalewatch.server.fastdecode import decode_batch, parse_batch
from scalewatch.server.ingest import IngestError, decode_body, group_rows, validate_points


def outcome(parse, data: bytes):
    """What ``parse`` makes of ``data``: its result, or the 4xx it raises, as a tuple."""
    try:
        return parse(data)
    except IngestError as exc:
        return ("error", exc.status, exc.message, exc.errors)


def careful(data: bytes):
    """The careful path's rows, grouped by metric."""
    return outcome(lambda d: group_rows(validate_points(decode_body(d, None))), data)


def fast(data: bytes):
    return outcome(lambda d: parse_batch(d, None), data)


def same(a, b) -> bool:
    """Equal, with floats compared bit for bit and types too (1 is not 1.0 here)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def point(step=1, compute=2.0, metrics=None, **extra):
    return {"step": step, "compute": compute, "metrics": metrics or {"m": 0.5}, **extra}


def body(*points, **extra) -> bytes:
    return json.dumps({"points": list(points), **extra}).encode()


BODIES = [
    body(),
    body(point()),
    body(point(time=1.7e9), point(step=2, time=None), point(step=3, compute=4)),
    body(point(metrics={"a": 1, "b": -0.0, "c": 1e308, "d": -2**70})),
    body(point(step=0, compute=0)),
    body(point(step=limits.MAX_STEP)),
    body(point(), run="ignored extra key"),
    b'{"points": [{"step": 1, "compute": 1, "metrics": {"a": 1}, "step": 2}]}',
    b'{"points": [], "points": [{"step": 1, "compute": 1, "metrics": {"a": 1}}]}',
    # every one of these must defer to the careful path and get its answer
    body(point(step=1.0)),
    body(point(step=2.5)),
    body(point(step=True)),
    body(point(step=-1)),
    body(point(step=limits.MAX_STEP + 1)),
    body(point(step=10**30)),
    body(point(compute=-1)),
    body(point(compute=None)),
    body(point(compute=False)),
    body(point(compute="1")),
    body(point(metrics={})),
    body(point(metrics={"a": None})),
    body(point(metrics={"a": True})),
    body(point(metrics={"a": "x"})),
    body(point(metrics={"": 1.0})),
    body(point(metrics={"   ": 1.0})),
    body(point(metrics={"a\x00b": 1.0})),
    body(point(metrics={"x" * (limits.MAX_METRIC_NAME_LENGTH + 1): 1.0})),
    body(point(metrics={f"m{i}": 1.0 for i in range(limits.MAX_METRICS_PER_POINT + 1)})),
    body(point(time="now")),
    body(point(time=True)),
    body(point(extra=1)),
    body({"step": 1, "metrics": {"a": 1}}),
    body("not a point"),
    body(*[point(step=i) for i in range(limits.MAX_POINTS_PER_REQUEST + 1)]),
    b'{"points": [{"step": 1, "compute": 1, "metrics": {"\\ud800": 1}}]}',
    b'{"points": [{"step": 1, "compute": 1e400, "metrics": {"a": 1}}]}',
    b'{"points": [{"step": 1, "compute": 1, "metrics": {"a": NaN}}]}',
    b'{"points": [{"step": 1, "compute": 1, "metrics": {"a": -Infinity}}]}',
    b'{"points": [{"step": 1, "compute": 1, "metrics": {"a": 1e999}}], "x": 1}',
    b'{"points": [{"step": 1, "compute": 1, "metrics": {"a": 10' + b"0" * 400 + b"}}]}",
    b'{"points": [{"step": 1, "compute": 1, "time": 1e400, "metrics": {"a": 1}}]}',
    b'{"points": {"step": 1}}',
    b'{"pts": []}',
    b"[]",
    b"null",
    b"",
    b"{",
    b'{"points": []} trailing',
    b"\xff\xfe{}",
    b"[" * 100_000,
]


def same_batch(a, b) -> bool:
    """`same`, with a batch's metrics compared in order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return same(list(a.items()), list(b.items()))
    return same(a, b)


@pytest.mark.parametrize("data", BODIES, ids=range(len(BODIES)))
def test_same_answer_as_the_careful_path(data):
    assert same_batch(fast(data), careful(data))


def test_fast_path_is_taken_for_a_trainers_batch_only():
    good = body(*[point(step=i, metrics={"a": 0.1, "b": 2}, time=1.7e9 + i) for i in range(50)])
    assert decode_batch(good) is not None
    for bad in (body(point(step=1.0)), body(point(metrics={"": 1.0})), b"[]"):
        assert decode_batch(bad) is None


def test_floats_bit_for_bit():
    rng = random.Random(7)
    values = [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(3000)]
    values = [v for v in values if math.isfinite(v)]
    values += [5e-324, 2.2250738585072014e-308, 0.1, 1 / 3, 9007199254740993.0]
    values += [1.7976931348623157e308, -0.0]
    pts = [point(step=i, compute=abs(v), metrics={"v": v}, time=v) for i, v in enumerate(values)]
    data = body(*pts[: limits.MAX_POINTS_PER_REQUEST])
    batch = decode_batch(data)
    assert batch is not None
    assert same_batch(batch, careful(data))


# Bodies whose grouping is where the two paths could part: out of order, repeated steps (the
# last write wins), points with different metrics, a metric missing from some points.
GROUPING_BODIES = [
    body(point(step=3), point(step=1), point(step=2)),
    body(point(step=2, metrics={"a": 1.0}), point(step=2, metrics={"a": 2.0})),
    body(*[point(step=s, metrics={"a": s, "b": -s}) for s in (5, 1, 5, 3)]),
    body(point(step=1, metrics={"a": 1, "b": 2}), point(step=2, metrics={"b": 3, "c": 4}),
         point(step=0, metrics={"c": 5}), point(step=3, metrics={"a": 6, "c": 7})),
    body(point(step=1, metrics={"a": 1, "b": 2}), point(step=2, metrics={"a": 3, "c": 4})),
    body(point(step=1, metrics={"a": 1}), point(step=2, metrics={"a": 3, "": 4})),
    body(point(time=1.5), point(step=2), point(step=3, time=2)),
]


@pytest.mark.parametrize("data", GROUPING_BODIES, ids=range(len(GROUPING_BODIES)))
def test_batch_is_the_careful_rows_grouped(data):
    assert same_batch(fast(data), careful(data))


def test_batch_fast_path_is_taken_for_a_trainers_batch():
    good = body(*[point(step=i, metrics={"a": 0.1, "b": 2}, time=1.7e9 + i) for i in range(50)])
    batch = decode_batch(good)
    assert batch is not None and list(batch) == ["a", "b"]
    assert batch["a"].steps is batch["b"].steps  # the point columns shared, not copied
    assert same_batch(batch, careful(good))
