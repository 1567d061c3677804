"""Point ingestion on both databases: upsert semantics, all-or-nothing validation, limits."""

from __future__ import annotations

import gzip
import json
import zlib

from scalewatch.server import limits


def new_run(api, name="run"):
    return api.post("/api/v1/runs", json={"project": "p", "name": name}).json()["id"]


def pts(steps, **metrics):
    return {
        "points": [
            {"step": s, "compute": float(s) * 2.0, "metrics": {k: v(s) for k, v in metrics.items()}}
            for s in steps
        ]
    }


def stored(api, rid, metric):
    return api.get(f"/api/v1/runs/{rid}/points", params={"metric": metric}).json()["points"]


def test_upsert_last_write_wins_and_counts(api):
    rid = new_run(api)
    r = api.post(
        f"/api/v1/runs/{rid}/points",
        json=pts(range(10), reward=lambda s: s / 10, val=lambda s: s / 20),
    )
    assert r.json() == {"accepted": 20, "updated": 0}
    # A resent batch never duplicates.
    r = api.post(
        f"/api/v1/runs/{rid}/points",
        json=pts(range(10), reward=lambda s: s / 10, val=lambda s: s / 20),
    )
    assert r.json() == {"accepted": 20, "updated": 20}
    assert len(stored(api, rid, "reward")) == 10
    # A trainer restarted from step 5 redoes 5..14: overwrites 5..9, adds 10..14.
    r = api.post(f"/api/v1/runs/{rid}/points", json=pts(range(5, 15), reward=lambda s: -1.0))
    assert r.json() == {"accepted": 10, "updated": 5}
    got = stored(api, rid, "reward")
    assert [p["step"] for p in got] == list(range(15))
    assert [p["value"] for p in got[5:]] == [-1.0] * 10
    run = api.get(f"/api/v1/runs/{rid}").json()
    assert run["last_step"] == 14 and run["latest"]["reward"] == -1.0
    # Duplicate step inside one batch: the later one wins, counted once.
    r = api.post(
        f"/api/v1/runs/{rid}/points",
        json={
            "points": [
                {"step": 20, "compute": 1, "metrics": {"reward": 1}},
                {"step": 20, "compute": 1, "metrics": {"reward": 2}},
            ]
        },
    )
    assert r.json() == {"accepted": 1, "updated": 0}
    assert stored(api, rid, "reward")[-1]["value"] == 2
    # Values survive the bulk-append path bit for bit.
    exact = {"step": 30, "compute": 1e-7, "metrics": {"reward": 1 / 3, "tiny": 5e-324}}
    assert api.post(f"/api/v1/runs/{rid}/points", json={"points": [exact]}).status_code == 200
    last = stored(api, rid, "reward")[-1]
    assert last == {"step": 30, "compute": 1e-7, "value": 1 / 3}
    assert stored(api, rid, "tiny")[0]["value"] == 5e-324


def test_invalid_batch_stores_nothing_and_lists_each_problem(api):
    rid = new_run(api)
    body = {
        "points": [
            {"step": 0, "compute": 0.0, "metrics": {"reward": 0.1}},  # valid, must not be stored
            {"step": -1, "compute": 1.0, "metrics": {"reward": 0.1}},
            {"step": 2, "compute": -3.0, "metrics": {"reward": 0.1}},
            {"step": "3", "compute": 1.0, "metrics": {"reward": 0.1}},
            {"step": 4, "compute": 1.0, "metrics": {"": 0.1}},
            {"step": 5, "compute": 1.0, "metrics": {"reward": "high"}},
            {"step": 6, "compute": 1.0, "metrics": {}},
            {"step": 7, "compute": 1.0, "metrics": {"reward": True}},
        ]
    }
    r = api.post(f"/api/v1/runs/{rid}/points", json=body)
    assert r.status_code == 422
    locs = [e["loc"] for e in r.json()["errors"]]
    assert locs == [
        "points[1].step",
        "points[2].compute",
        "points[3].step",
        "points[4].metrics",
        "points[5].metrics.reward",
        "points[6].metrics",
        "points[7].metrics.reward",
    ]
    assert stored(api, rid, "reward") == []
    raw = (
        b'{"points": [{"step": 1, "compute": 1, "metrics": {"a": 1}},'
        b' {"step": 2, "compute": NaN, "metrics": {"a": Infinity}}]}'
    )
    r = api.post(
        f"/api/v1/runs/{rid}/points", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert {e["loc"] for e in r.json()["errors"]} == {"points[1].compute", "points[1].metrics.a"}
    assert stored(api, rid, "a") == []


def test_limits_unknown_run_and_encodings(api):
    rid = new_run(api)
    too_many = pts(range(limits.MAX_POINTS_PER_REQUEST + 1), r=lambda s: 0.0)
    r = api.post(f"/api/v1/runs/{rid}/points", json=too_many)
    assert r.status_code == 413 and "10000" in r.json()["detail"]
    assert api.post("/api/v1/runs/424242/points", json=pts([1], r=lambda s: 0.0)).status_code == 404

    body = gzip.compress(json.dumps(pts(range(1000), r=lambda s: s * 0.001)).encode())
    r = api.post(
        f"/api/v1/runs/{rid}/points",
        content=body,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert r.status_code == 200 and r.json()["accepted"] == 1000
    r = api.post(
        f"/api/v1/runs/{rid}/points",
        content=b"\x1f\x8bnot gzip",
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert r.status_code == 400
    as_json = {"content-type": "application/json"}
    r = api.post(f"/api/v1/runs/{rid}/points", content=b"{not json", headers=as_json)
    assert r.status_code == 400
    r = api.post(
        f"/api/v1/runs/{rid}/points", content=b"{}", headers={**as_json, "content-encoding": "br"}
    )
    assert r.status_code == 415
    bomb = gzip.compress(b" " * (limits.MAX_INFLATED_BYTES + 10))
    r = api.post(
        f"/api/v1/runs/{rid}/points", content=bomb, headers={**as_json, "content-encoding": "gzip"}
    )
    assert r.status_code == 413


def test_downsampling_keeps_extremes_and_since_step(api):
    rid = new_run(api)
    n = 5000
    values = [0.5] * n
    values[1234] = 0.99  # a spike
    values[4321] = 0.01  # a collapse
    for lo in range(0, n, 2500):
        api.post(
            f"/api/v1/runs/{rid}/points",
            json={
                "points": [
                    {"step": s, "compute": float(s), "metrics": {"v": values[s]}}
                    for s in range(lo, lo + 2500)
                ]
            },
        )
    page = api.get(f"/api/v1/runs/{rid}/points", params={"metric": "v", "max_points": 200}).json()
    assert page["downsampled"] is True and page["total"] == n
    assert 4 <= len(page["points"]) <= 200
    steps = [p["step"] for p in page["points"]]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == n - 1
    vals = {p["step"]: p["value"] for p in page["points"]}
    assert vals.get(1234) == 0.99 and vals.get(4321) == 0.01
    tail = api.get(f"/api/v1/runs/{rid}/points", params={"metric": "v", "since_step": 4990}).json()
    assert [p["step"] for p in tail["points"]] == list(range(4990, 5000))
    assert tail["downsampled"] is False
    # Default metric is the run's fit metric; an unknown metric is an empty series.
    assert api.get(f"/api/v1/runs/{rid}/points", params={"metric": "nope"}).json()["points"] == []


def test_every_gzip_member_is_read_and_trailing_bytes_are_refused(api):
    """A gzip body is a series of members (RFC 1952 2.2; `gzip.decompress` and `zcat` read them
    all). Only the first was read: a batch split over two members lost its second half without
    a word (accepted 1 of 2), or failed as invalid JSON; bytes after the stream were ignored."""
    rid = new_run(api)
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    raw = json.dumps(pts(range(4), r=lambda s: s / 10)).encode()
    split = gzip.compress(raw[:30]) + gzip.compress(raw[30:])
    r = api.post(f"/api/v1/runs/{rid}/points", content=split, headers=headers)
    assert r.status_code == 200 and r.json() == {"accepted": 4, "updated": 0}, r.text
    assert [p["step"] for p in stored(api, rid, "r")] == [0, 1, 2, 3]
    for tail in (b"garbage", b"\x1f\x8b", b"\x00" * 8):
        body = gzip.compress(json.dumps(pts([10], r=lambda s: 1.0)).encode()) + tail
        r = api.post(f"/api/v1/runs/{rid}/points", content=body, headers=headers)
        assert r.status_code == 400 and r.json()["detail"].startswith("body is not valid gzip"), (
            tail, r.text)
    many = gzip.compress(b"") * limits.MAX_GZIP_MEMBERS + gzip.compress(raw)
    r = api.post(f"/api/v1/runs/{rid}/points", content=many, headers=headers)
    assert r.status_code == 400 and "members" in r.json()["detail"], r.text
    deflated = zlib.compress(json.dumps(pts([10], r=lambda s: 1.0)).encode()) + b"x"
    r = api.post(f"/api/v1/runs/{rid}/points", content=deflated,
                 headers={**headers, "content-encoding": "deflate"})
    assert r.status_code == 400 and "deflate" in r.json()["detail"], r.text
    assert [p["step"] for p in stored(api, rid, "r")] == [0, 1, 2, 3]  # nothing of the refused
