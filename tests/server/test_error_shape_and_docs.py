"""One error shape for the whole API (README "Errors"), and /docs + /redoc with no CDN."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_app

JSON = {"Content-Type": "application/json"}


def assert_error_shape(r: Any, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"detail", "code", "errors"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["code"], str) and re.fullmatch(r"[a-z_]+", body["code"])
    assert isinstance(body["errors"], list)
    for e in body["errors"]:
        assert set(e) == {"loc", "msg"} and isinstance(e["loc"], str) and e["msg"], e
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    app = make_app(sqlite_url)
    with TestClient(app, raise_server_exceptions=False) as c:
        assert c.post("/api/v1/runs", json={"project": "p", "name": "r"}).status_code == 201
        yield c
    app.state.store.engine.dispose()


def _json_body_routes(client: TestClient) -> list[tuple[str, str]]:
    """Every operation that takes a JSON body, from the OpenAPI document."""
    out = []
    for path, ops in client.get("/openapi.json").json()["paths"].items():
        for method, op in ops.items():
            if method in ("post", "patch", "put") and (
                "requestBody" in op or path.endswith("/points")
            ):
                out.append((method, re.sub(r"\{[^}]+\}", "1", path)))
    return out


@pytest.mark.parametrize("body", [b"{bad", b'{"a": 1,}', b"[1, 2", b"\xff\xfe"])
def test_malformed_json_is_the_same_400_on_every_route(client: TestClient, body: bytes) -> None:
    routes = _json_body_routes(client)
    assert ("post", "/api/v1/runs") in routes and ("post", "/api/v1/runs/1/points") in routes
    assert ("post", "/api/v1/fit") in routes and len(routes) >= 5
    for method, path in routes:
        r = client.request(method.upper(), path, content=body, headers=JSON)
        if r.status_code == 422 and body == b"\xff\xfe":
            continue  # non-UTF-8 text is refused as such (issue 13), in the same shape
        got = assert_error_shape(r, 400, "invalid_json")
        assert got["detail"].startswith("body is not valid JSON"), (path, got)


def test_every_kind_of_error_has_the_shape(client: TestClient) -> None:
    cases: list[tuple[str, str, dict[str, Any], int, str]] = [
        ("POST", "/api/v1/runs", {"content": b"[1, 2]", "headers": JSON}, 422, "invalid"),
        ("POST", "/api/v1/runs", {"json": {"project": "p"}}, 422, "invalid"),
        ("POST", "/api/v1/runs/1/points", {"content": b"[1]", "headers": JSON}, 422, "invalid"),
        ("POST", "/api/v1/runs/1/points", {"json": {"points": [{"step": -1}]}}, 422, "invalid"),
        ("POST", "/api/v1/runs/1/points",
         {"content": b"\x1f\x8bzz", "headers": {**JSON, "Content-Encoding": "gzip"}}, 400,
         "bad_request"),
        ("POST", "/api/v1/runs/1/points",
         {"content": gzip.compress(b"{bad"), "headers": {**JSON, "Content-Encoding": "gzip"}},
         400, "invalid_json"),
        ("POST", "/api/v1/runs", {"content": b"{}", "headers": {"Content-Type": "text/plain"}},
         415, "unsupported_media_type"),
        ("GET", "/api/v1/runs/999", {}, 404, "not_found"),
        ("GET", "/api/v1/runs?limit=-5", {}, 422, "invalid"),
        ("POST", "/api/v1/alerts/abc/ack", {}, 422, "invalid"),
        ("GET", "/api/v1/no-such-route", {}, 404, "not_found"),
        ("DELETE", "/api/v1/runs", {}, 405, "method_not_allowed"),
    ]
    for method, path, kw, status, code in cases:
        body = assert_error_shape(client.request(method, path, **kw), status, code)
        if status == 422 and "points" not in path and "[1" not in str(kw):
            assert body["errors"], (path, body)  # which field, where
    fields = assert_error_shape(
        client.post("/api/v1/runs/1/points", json={"points": [{"step": 1, "compute": "x"}]}),
        422,
    )["errors"]
    assert {e["loc"] for e in fields} >= {"points[0].compute"}
    q = assert_error_shape(client.get("/api/v1/runs?limit=-5"), 422)["errors"]
    assert q[0]["loc"] == "query.limit"


def test_auth_errors_have_the_shape(sqlite_url: str) -> None:
    app = make_app(sqlite_url, auth=True)
    with TestClient(app, raise_server_exceptions=False) as c:
        assert_error_shape(c.get("/api/v1/runs"), 401, "unauthorized")
        r = c.get("/api/v1/runs", headers={"Authorization": "Bearer sw_nope"})
        assert_error_shape(r, 401, "unauthorized")
        _, read = app.state.store.create_token("reader", "read")
        r = c.post("/api/v1/runs", json={"project": "p", "name": "x"},
                   headers={"Authorization": f"Bearer {read}"})
        assert_error_shape(r, 403, "forbidden")
    app.state.store.engine.dispose()


def test_openapi_documents_the_error_shape(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["HTTPValidationError"]["required"] == ["detail", "code", "errors"]
    assert "ValidationError" not in schemas


def test_readme_documents_the_error_shape() -> None:
    from tests.test_readme import README

    assert '{"detail": ' in README and '"code": ' in README and '"errors": ' in README
    assert "invalid_json" in README


def test_docs_and_redoc_load_nothing_from_another_host(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        r = client.get(page)
        assert r.status_code == 200
        html = r.text
        urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
        urls += re.findall(r"""url:\s*['"]([^'"]+)['"]""", html)
        assert urls, html
        for url in urls:
            assert not re.match(r"(https?:)?//", url), (page, url)  # same origin only
            if url.startswith("/api-docs-assets/"):
                asset = client.get(url)
                assert asset.status_code == 200 and len(asset.content) > 1000, url
        assert "cdn." not in html and "fonts.googleapis" not in html
