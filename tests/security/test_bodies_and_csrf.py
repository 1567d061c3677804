"""Items 2 and 4: bodies are capped in one place and the token is checked before a body is
read; the REST API takes bearer tokens only and JSON bodies only."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from scalewatch.server import limits
from scalewatch.server.scopes import AUTH_COOKIE

API_POSTS = [
    "/api/v1/fit",
    "/api/v1/runs",
    "/api/v1/runs/1/points",
    "/api/v1/alert-rules",
    "/api/v1/tokens",
    "/api/v1/alerts/1/ack",
]


@pytest.mark.parametrize("path", API_POSTS)
def test_unauthenticated_bodies_are_refused_unread(authed, path) -> None:
    """The whole body would be 20 MB: the stream raises if the server pulls more than one
    chunk of it, so a 401 proves auth came first."""
    pulled = 0

    def body() -> Iterator[bytes]:
        nonlocal pulled
        for _ in range(20):
            pulled += 1
            yield b"x" * 1_000_000

    r = authed.client.post(path, content=body(), headers={"Content-Type": "application/json"})
    assert r.status_code == 401, r.text
    assert pulled <= 1


@pytest.mark.parametrize("path", API_POSTS + ["/login", "/dashboard/_dash-update-component"])
def test_declared_oversized_bodies_are_413_on_every_route(authed, path) -> None:
    r = authed.client.post(
        path,
        content=b"{}",
        headers={
            **authed.h("admin"),
            "Content-Type": "application/json",
            "Content-Length": str(limits.MAX_BODY_BYTES + 1),
        },
    )
    assert r.status_code == 413, (path, r.status_code)


@pytest.mark.parametrize("path", ["/api/v1/fit", "/api/v1/runs", "/api/v1/runs/1/points"])
def test_streamed_oversized_bodies_are_413(authed, path) -> None:
    authed.client.post(
        "/api/v1/runs", json={"project": "p", "name": "r"}, headers=authed.h("write")
    )
    chunk = b" " * 1_000_000

    def body() -> Iterator[bytes]:
        for _ in range(limits.MAX_BODY_BYTES // len(chunk) + 2):
            yield chunk

    r = authed.client.post(
        path, content=body(), headers={**authed.h("admin"), "Content-Type": "application/json"}
    )
    assert r.status_code == 413, (path, r.status_code, r.text[:200])


def test_the_api_ignores_the_dashboard_cookie(authed) -> None:
    """A signed-in browser carries the cookie to any same-site page's request: the API must
    not act on it (the old cookie held the raw token, so try exactly that)."""
    c = authed.client
    rid = c.post(
        "/api/v1/runs", json={"project": "p", "name": "r"}, headers=authed.h("write")
    ).json()["id"]
    c.cookies.set(AUTH_COOKIE, authed.tokens["admin"])
    c.cookies.set("scalewatch_session", authed.tokens["admin"])
    r = c.post(
        f"/api/v1/runs/{rid}/points",
        json={"points": [{"step": 1, "compute": 1.0, "metrics": {"m": 0.1}}]},
    )
    assert r.status_code == 401
    assert c.get("/api/v1/runs").status_code == 401
    assert c.post("/api/v1/alerts/1/ack").status_code == 401


@pytest.mark.parametrize(
    "ctype",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_non_json_bodies_are_415(authed, ctype) -> None:
    c = authed.client
    rid = c.post(
        "/api/v1/runs", json={"project": "p", "name": "r"}, headers=authed.h("write")
    ).json()["id"]
    body = b'{"points": [{"step": 1, "compute": 1.0, "metrics": {"m": 0.1}}]}'
    headers = dict(authed.h("write"))
    if ctype:
        headers["Content-Type"] = ctype
    for path in (f"/api/v1/runs/{rid}/points", "/api/v1/runs"):
        r = c.post(path, content=body, headers=headers)
        assert r.status_code == 415, (path, ctype, r.status_code)
    # JSON with a charset, and gzip-encoded JSON, are fine
    import gzip

    r = c.post(
        f"/api/v1/runs/{rid}/points",
        content=gzip.compress(body),
        headers={
            **authed.h("write"),
            "Content-Type": "application/json; charset=utf-8",
            "Content-Encoding": "gzip",
        },
    )
    assert r.status_code == 200, r.text
    assert (
        c.get(f"/api/v1/runs/{rid}/points?metric=m", headers=authed.h("read")).json()["total"] == 1
    )


def test_bodyless_post_still_works(authed) -> None:
    r = authed.client.post("/api/v1/alerts/999/ack", headers=authed.h("write"))
    assert r.status_code == 404


def test_trainer_client_and_sidecar_send_json() -> None:
    """The stdlib client (which the PipelineRL sidecar uses) labels every body as JSON."""
    import inspect

    from trainer_client import _http, queries

    assert '"Content-Type": "application/json"' in inspect.getsource(_http)
    assert '"Content-Type": "application/json"' in inspect.getsource(queries)


def test_raw_socket_oversized_declared_body_answers_without_reading(live_server) -> None:
    """Against the real server: a 413 comes back before the 1 GB body is sent."""
    host, port = "127.0.0.1", int(live_server.url.rsplit(":", 1)[1])
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(
            b"POST /api/v1/fit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n{"
        )
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:100]


def test_an_encoded_body_where_only_points_inflate_says_so(authed) -> None:
    """Only POST /runs/{id}/points inflates gzip: elsewhere a gzip body was a 400 "There was
    an error parsing the body" (REST) or "request body is not valid JSON" (MLflow), which
    names neither the encoding nor where it is accepted. Now a 415 saying both."""
    import gzip

    body = gzip.compress(b'{"project": "p", "name": "r"}')
    headers = {**authed.h("write"), "Content-Type": "application/json",
               "Content-Encoding": "gzip"}
    for path in ("/api/v1/runs", "/api/v1/alert-rules", "/api/2.0/mlflow/runs/create"):
        r = authed.client.post(path, content=body, headers=headers)
        assert r.status_code == 415, (path, r.status_code, r.text)
        said = r.json().get("detail") or r.json().get("message")
        assert "Content-Encoding" in said and "/points" in said, (path, said)
    assert authed.client.get("/api/v1/runs", headers=authed.h("read")).json()["total"] == 0
    identity = {**headers, "Content-Encoding": "identity"}
    made = authed.client.post("/api/v1/runs", content=gzip.decompress(body), headers=identity)
    assert made.status_code == 201, made.text
