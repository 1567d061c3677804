"""Items 13 and 14: revocation reaches other processes quickly; the dashboard cookie is a
revocable server-side session; security headers; /readyz and outage logs say little."""

from __future__ import annotations

import logging

from fastapi.testclient import TestClient

from scalewatch.server.api.deps import TokenCache
from scalewatch.server.background import OutageLog, PollingWorker
from scalewatch.server.scopes import AUTH_COOKIE
from tests.conftest import make_app
from tests.security.conftest import authed_app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_revocation_in_another_process_applies_within_a_second(sqlite_url) -> None:
    """Two apps on one database stand for two worker processes."""
    for a in authed_app(sqlite_url):
        other = make_app(sqlite_url, auth=True)
        clock = Clock()
        other.state.token_cache = TokenCache(other.state.settings.token_cache_ttl, clock)
        with TestClient(other) as b:
            h = a.h("read")
            assert b.get("/api/v1/runs", headers=h).status_code == 200  # cached in b
            tid = next(t.id for t in a.app.state.store.list_tokens() if t.scope == "read")
            assert a.client.delete(f"/api/v1/tokens/{tid}", headers=a.h("admin")).status_code == 204
            assert a.client.get("/api/v1/runs", headers=h).status_code == 401  # at once here
            clock.now += 1.01
            assert b.get("/api/v1/runs", headers=h).status_code == 401
        other.state.store.engine.dispose()


def _login(client: TestClient, token: str) -> str:
    r = client.post("/login", data={"token": token, "next": "/dashboard/"}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return client.cookies[AUTH_COOKIE]


def test_the_cookie_is_a_session_not_the_token_and_logout_ends_it(authed) -> None:
    c = authed.client
    sid = _login(c, authed.tokens["read"])
    assert authed.tokens["read"] not in sid and sid.startswith("sws_")
    assert c.get("/dashboard/_dash-layout").status_code == 200
    c.get("/logout", follow_redirects=False)
    # a copy of the cookie kept by someone else stops working too
    c.cookies.set(AUTH_COOKIE, sid)
    assert c.get("/dashboard/_dash-layout").status_code == 401


def test_revoking_the_token_ends_its_sessions(authed) -> None:
    c = authed.client
    _login(c, authed.tokens["read"])
    assert c.get("/dashboard/_dash-layout").status_code == 200
    tid = next(t.id for t in authed.app.state.store.list_tokens() if t.scope == "read")
    c2 = TestClient(authed.app)
    assert c2.delete(f"/api/v1/tokens/{tid}", headers=authed.h("admin")).status_code == 204
    assert c.get("/dashboard/_dash-layout").status_code == 401


def test_sessions_expire(authed_db) -> None:
    store = authed_db.app.state.store
    opened = store.create_session(authed_db.tokens["read"], seconds=-1)
    assert opened is not None and store.lookup_session(opened[0]) is None
    opened = store.create_session(authed_db.tokens["read"], seconds=60)
    found = store.lookup_session(opened[0])
    assert found is not None and found.scope == "read"
    assert store.create_session("sw_not-a-token", 60) is None


def test_cross_origin_writes_to_the_dashboard_are_refused(authed) -> None:
    c = authed.client
    _login(c, authed.tokens["admin"])
    for headers in (
        {"Origin": "http://testserver:9999"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "null"},
    ):
        r = c.post("/dashboard/_dash-update-component", json={}, headers=headers)
        assert r.status_code == 403, headers
    r = c.post(
        "/login",
        data={"token": authed.tokens["read"]},
        headers={"Origin": "http://evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 403


def test_security_headers(authed) -> None:
    c = authed.client
    for path in ("/login", "/api/v1/runs", "/healthz"):
        r = c.get(path, headers=authed.h("read"))
        assert r.headers["x-content-type-options"] == "nosniff", path
        assert r.headers["x-frame-options"] == "DENY", path
    csp = c.get("/login").headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp
    _login(c, authed.tokens["read"])
    r = c.get("/dashboard/")
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def test_readyz_does_not_echo_database_errors(tmp_path) -> None:
    from sqlalchemy import create_engine

    app = make_app(f"sqlite:///{tmp_path}/ok.db")
    # the store now points at a PostgreSQL nobody listens on
    app.state.store.engine = create_engine("postgresql+psycopg://u:pw@127.0.0.1:1/secretdb")
    with TestClient(app) as c:
        r = c.get("/readyz")
    assert r.status_code == 503
    assert r.json()["detail"] == "database unreachable"
    assert "127.0.0.1" not in r.text and "secretdb" not in r.text and "5432" not in r.text


def test_an_outage_logs_once_per_state_change(caplog) -> None:
    from sqlalchemy.exc import OperationalError

    class Flaky(PollingWorker):
        def __init__(self) -> None:
            super().__init__(0.001)
            self.passes = 0

        def run_once(self) -> int:
            self.passes += 1
            if self.passes <= 50 or 60 < self.passes <= 80:
                raise OperationalError("SELECT 1", {}, Exception("connection refused: host x"))
            if self.passes >= 100:
                self._stop.set()
            return 0

    import scalewatch.server.background as bg

    fresh = OutageLog()
    old, bg.outage = bg.outage, fresh
    try:
        with caplog.at_level(logging.WARNING, logger="scalewatch"):
            w = Flaky()
            w._loop()
    finally:
        bg.outage = old
    lines = [r for r in caplog.records if r.name == "scalewatch"]
    assert [r.getMessage().split(":")[0] for r in lines] == [
        "database unavailable",
        "database available again",
        "database unavailable",
        "database available again",
    ]
    assert all(r.exc_info is None for r in lines)
