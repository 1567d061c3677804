"""The real server (uvicorn subprocess) over HTTP on loopback, on both databases."""

from __future__ import annotations

import gzip
import json

import httpx
import pytest

from tests.support.live_server import LiveServer


@pytest.fixture
def authed_server(database_url, tmp_path):
    server = LiveServer(database_url, auth=True, home=tmp_path / "home")
    server.start()
    yield server
    server.stop()


def test_trainer_flow_over_http(authed_server):
    writer = authed_server.make_token("write")
    with authed_server.client(writer) as http:
        assert httpx.get(authed_server.url + "/api/v1/runs").status_code == 401
        run = http.post("/api/v1/runs", json={"project": "p", "name": "live"})
        assert run.status_code == 201
        rid = run.json()["id"]
        batch = {
            "points": [
                {"step": s, "compute": s * 1.5, "metrics": {"val_pass_rate": s / 1e4}}
                for s in range(1000)
            ]
        }
        r = http.post(
            f"/api/v1/runs/{rid}/points",
            content=gzip.compress(json.dumps(batch).encode()),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )
        assert r.status_code == 200 and r.json() == {"accepted": 1000, "updated": 0}
        got = http.get(f"/api/v1/runs/{rid}/points", params={"max_points": 100}).json()
        assert got["downsampled"] and got["total"] == 1000
        assert http.delete(f"/api/v1/runs/{rid}").status_code == 403  # write < admin
    with authed_server.client() as admin:
        assert admin.delete(f"/api/v1/runs/{rid}").status_code == 204
        metrics = admin.get("/metrics").text
        assert "scalewatch_points_ingested_total 1000" in metrics


def test_first_start_prints_an_admin_token_once(sqlite_url, tmp_path):
    import re

    server = LiveServer(sqlite_url, home=tmp_path / "h")
    server.auth = True  # auth on, but no token made beforehand
    server.start()
    try:
        match = re.search(r"(sw_[A-Za-z0-9_-]{20,})", server.logs())
        assert match, server.logs()
        with server.client(match.group(1)) as http:
            assert http.get("/api/v1/runs").status_code == 200
    finally:
        server.stop()
    server.start()  # second start: a token exists, none is printed again
    try:
        assert len(re.findall(r"sw_[A-Za-z0-9_-]{20,}", server.logs())) == 1
    finally:
        server.stop()


def test_head_answers_as_its_get_without_a_body(authed_server):
    """Uptime monitors and `curl -I` probe with HEAD: the GET's status and headers, no body,
    behind the same authentication (every GET answered 405 to it)."""
    reader = authed_server.make_token("read")
    assert httpx.head(authed_server.url + "/api/v1/runs").status_code == 401
    with authed_server.client(reader) as http:
        for path in ("/healthz", "/api/v1/runs", "/api/v1/alerts", "/openapi.json"):
            got, head = http.get(path), http.head(path)
            assert head.status_code == got.status_code == 200, (path, head.status_code)
            assert head.content == b""
            assert head.headers["content-type"] == got.headers["content-type"]
            assert head.headers.get("x-content-type-options") == "nosniff"
        assert http.head("/api/v1/runs/999999").status_code == 404
        # A route with no GET still says which methods it has.
        refused = http.head("/api/v1/runs/1/points:batch")
        assert refused.status_code in (404, 405)
    # The connection stays usable after a HEAD (no body bytes left on the wire).
    with authed_server.client(reader) as http:
        assert http.head("/healthz").status_code == 200
        assert http.get("/api/v1/runs").status_code == 200
