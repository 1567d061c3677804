"""Issue 35, gzip bomb: a body's JSON shape is bounded on its bytes before anything parses it.

A 200 KB gzip body inflating to 62 MB of nested brackets took 40 s and 3 GB to refuse (its
points were counted only after the parser had built 31 million lists); a run config nested 300
deep was stored, then every run list answered 500."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest

from scalewatch.server import limits
from scalewatch.server.jsonbounds import JsonScanner, JsonShapeError, check_json_shape
from tests.support.live_server import LiveServer

JSON = {"content-type": "application/json"}
GZIP = {**JSON, "content-encoding": "gzip"}


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def _bomb(inflated_bytes: int, depth: int = 50) -> bytes:
    nest = _nest(depth).encode()
    count = inflated_bytes // (len(nest) + 1)
    return gzip.compress(b'{"points": [' + b",".join([nest] * count) + b"]}", 9)


def _memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def test_a_gzip_bomb_is_refused_before_it_is_built(tmp_path: Path, sqlite_url: str) -> None:
    bomb = _bomb(62 * 1024 * 1024)
    server = LiveServer(sqlite_url, home=tmp_path / "home")
    server.start()
    try:
        assert server.proc is not None
        with server.client() as client:
            run_id = client.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
            before = _memory_kb(server.proc.pid, "VmRSS")
            r = client.post(f"/api/v1/runs/{run_id}/points", content=bomb, headers=GZIP)
            peak = _memory_kb(server.proc.pid, "VmHWM")
            assert r.status_code in (400, 413), r.text
            detail = r.json()["detail"]
            # Refused for its shape, in the first megabyte: not after parsing it all (which
            # also ended in a 413, "643680 points in one request", 3 GB later).
            assert "nested deeper than" in detail or "objects and arrays" in detail, detail
            assert (peak - before) < 256 * 1024, f"server grew {(peak - before) // 1024} MB"
            assert client.get("/healthz").status_code == 200
            assert client.get(f"/api/v1/runs/{run_id}/points").json()["points"] == []
    finally:
        server.stop()


@pytest.mark.parametrize("depth", [40, 300, 900, 100_000])
def test_deep_nesting_in_a_small_body_is_a_4xx_on_every_route(authed, depth: int) -> None:
    client, h = authed.client, authed.h("write")
    run_id = client.post("/api/v1/runs", json={"project": "p", "name": "r"}, headers=h).json()[
        "id"
    ]
    nest = _nest(depth)
    points = '{"points": [{"step": 1, "compute": 1, "metrics": {"a": ' + nest + "}}]}"
    cases = [
        ("POST", f"/api/v1/runs/{run_id}/points", points.encode(), JSON),
        ("POST", f"/api/v1/runs/{run_id}/points", gzip.compress(points.encode()), GZIP),
        ("POST", "/api/v1/runs", b'{"project": "p", "name": "x", "config": {"a": %s}}'
         % nest.encode(), JSON),
        ("PATCH", f"/api/v1/runs/{run_id}", b'{"config": {"a": %s}}' % nest.encode(), JSON),
        ("POST", "/api/v1/fit", b'{"compute": %s, "values": [1]}' % nest.encode(), JSON),
        ("POST", "/api/2.0/mlflow/runs/log-batch",
         b'{"run_id": "%d", "metrics": %s}' % (run_id, nest.encode()), JSON),
    ]
    for method, url, body, headers in cases:
        r = client.request(method, url, content=body, headers={**headers, **h})
        assert 400 <= r.status_code < 500, (url, r.status_code, r.text[:300])
    # nothing deep was stored: every run and the run list still read
    assert client.get("/api/v1/runs", headers=h).status_code == 200
    assert client.get(f"/api/v1/runs/{run_id}", headers=h).status_code == 200


def test_the_largest_valid_batch_passes_the_shape_bounds() -> None:
    """10,000 points of 100 metrics each, with a time: every bound has room for it."""
    metrics = {f"m{i}": 0.5 for i in range(limits.MAX_METRICS_PER_POINT)}
    point = {"step": 1, "compute": 1.0, "time": 1.0, "metrics": metrics}
    body = json.dumps({"points": [point] * limits.MAX_POINTS_PER_REQUEST}).encode()
    scanner = JsonScanner()
    for i in range(0, len(body), 1 << 20):
        scanner.feed(body[i : i + (1 << 20)])
    assert scanner.depth == 0
    assert scanner.containers == 2 + 2 * limits.MAX_POINTS_PER_REQUEST


def test_brackets_and_quotes_inside_strings_do_not_count() -> None:
    name = 'loss[0] {"x"} \\ [[[['  # brackets, escaped quotes and a backslash in a name
    body = json.dumps({"points": [{"step": s, "compute": 1, "metrics": {name: 1}} for s in
                                  range(200)]}).encode()
    for size in (1, 2, 3, 7, 64, len(body)):  # every chunk boundary, escapes split included
        scanner = JsonScanner()
        for i in range(0, len(body), size):
            scanner.feed(body[i : i + size])
        assert (scanner.depth, scanner.containers) == (0, 1 + 1 + 2 * 200), size
    with pytest.raises(JsonShapeError) as deep:
        check_json_shape(b'{"a": ' + _nest(limits.MAX_JSON_DEPTH).encode() + b"}")
    assert deep.value.status == 400 and "nested deeper than" in deep.value.message
    with pytest.raises(JsonShapeError) as wide:
        check_json_shape(b"[" + b",".join([b"[]"] * limits.MAX_JSON_CONTAINERS) + b"]")
    assert wide.value.status == 413


def test_a_valid_batch_inflating_past_one_chunk_is_stored(authed) -> None:
    client, h = authed.client, authed.h("write")
    run_id = client.post("/api/v1/runs", json={"project": "p", "name": "r"}, headers=h).json()[
        "id"
    ]
    names = ['reward[0] "a"', "loss{", "kl]\\"]
    points = [
        {"step": s, "compute": float(s + 1), "metrics": {n: s * 0.01 for n in names}}
        for s in range(limits.MAX_POINTS_PER_REQUEST)
    ]
    raw = json.dumps({"points": points}).encode()
    assert len(raw) > 1 << 20  # inflated in more than one chunk, each scanned
    r = client.post(
        f"/api/v1/runs/{run_id}/points", content=gzip.compress(raw), headers={**GZIP, **h}
    )
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 3 * limits.MAX_POINTS_PER_REQUEST
    got = httpx.QueryParams({"metric": names[0]})
    assert client.get(f"/api/v1/runs/{run_id}/points?{got}", headers=h).json()["total"] == (
        limits.MAX_POINTS_PER_REQUEST
    )
