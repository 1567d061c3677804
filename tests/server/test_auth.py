"""Auth: every route of the app is proven to answer 401 without a token and 403 below scope."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_app

PUBLIC = {
    "/healthz",
    "/readyz",
    "/metrics",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/openapi.json",
    "/",
}


def _needed_scope(path: str, method: str) -> str:
    if path.startswith("/api/v1/tokens") or method == "DELETE" and path.startswith("/api/v1/runs/"):
        return "admin"
    if method in ("POST", "PATCH", "PUT", "DELETE") and path != "/api/v1/fit":
        return "write"
    return "read"


def all_operations(app) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, from its OpenAPI document."""
    ops = []
    for path, item in app.openapi()["paths"].items():
        for method in item:
            ops.append((method.upper(), path))
    return ops


def _concrete(path: str) -> str:
    # An id that exists nowhere: the route answers 404 once past auth, and no test token
    # (ids 1..3) gets revoked by DELETE /api/v1/tokens/{id} along the way.
    return re.sub(r"\{[^}]+\}", "424242", path)


@pytest.fixture
def authed(database_url):
    app = make_app(database_url, auth=True)
    store = app.state.store
    tokens = {
        scope: store.create_token(f"t-{scope}", scope)[1] for scope in ("read", "write", "admin")
    }
    with TestClient(app) as client:
        yield app, client, tokens


def test_every_route_requires_a_token_and_enough_scope(authed):
    app, client, tokens = authed
    checked = 0
    for method, path in all_operations(app):
        if path in PUBLIC:
            continue
        if True:
            url = _concrete(path)
            r = client.request(method, url)
            assert r.status_code == 401, (method, url, r.status_code)
            r = client.request(method, url, headers={"Authorization": "Bearer sw_wrong"})
            assert r.status_code == 401, (method, url, r.status_code)
            needed = _needed_scope(path, method)
            below = {"read": None, "write": "read", "admin": "write"}[needed]
            if below:
                r = client.request(
                    method, url, headers={"Authorization": f"Bearer {tokens[below]}"}
                )
                assert r.status_code == 403, (method, url, needed, r.status_code)
            r = client.request(method, url, headers={"Authorization": f"Bearer {tokens[needed]}"})
            assert r.status_code not in (401, 403), (method, url, needed, r.status_code)
            checked += 1
    assert checked >= 8


def test_public_probes_need_no_token(authed):
    _, client, _ = authed
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert "scalewatch_requests_total" in client.get("/metrics").text


def test_tokens_are_stored_hashed_and_revocable(authed):
    app, client, tokens = authed
    from sqlalchemy import select

    from scalewatch.server.db.models import ApiToken

    with app.state.store.session() as s:
        stored = s.scalars(select(ApiToken.token_hash)).all()
    assert tokens["admin"] not in stored and all(len(h) == 64 for h in stored)
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    made = client.post("/api/v1/tokens", json={"name": "ci", "scope": "read"}, headers=admin)
    assert made.status_code == 201
    new = made.json()
    assert (
        client.get("/api/v1/runs", headers={"Authorization": f"Bearer {new['token']}"}).status_code
        == 200
    )
    assert client.delete(f"/api/v1/tokens/{new['id']}", headers=admin).status_code == 204
    listed = client.get("/api/v1/tokens", headers=admin).json()["tokens"]
    assert all("token" not in t for t in listed)
