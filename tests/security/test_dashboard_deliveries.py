"""Item 11 on the dashboard: the Alerts page's delivery table shows what the API shows to the
signed-in scope (below admin the webhook URL's host only; read scope a generic error), through
the real Dash callback and a real session cookie. With auth off the user is the admin."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.db.models import utcnow
from scalewatch.server.domain.alerts import AttemptRecord
from scalewatch.server.scopes import AUTH_COOKIE
from tests.conftest import make_app
from tests.security.conftest import authed_app

SECRET_URL = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
SOCKET_ERROR = "ConnectionRefusedError: [Errno 111] Connection refused"


def _failed_delivery(store: Any) -> int:
    """An alert whose webhook went to SECRET_URL and failed once with SOCKET_ERROR."""
    rid = store.get_or_create_run("p", "r")[0].id
    rule = store.create_alert_rule("p", "asymptote_drop", {}, run_id=rid, webhook_url=SECRET_URL)
    alert = store.open_alert(rule, rid, "m", {}, None,
                             webhook=lambda a, e, key: (SECRET_URL, "{}"))
    (item,) = store.claim_deliveries("me", lease_seconds=60)
    attempt = AttemptRecord(started_at=utcnow(), duration_ms=1.0, status_code=None,
                            error=SOCKET_ERROR, ok=False)
    store.record_delivery_attempt(item.id, "me", attempt, "retry", utcnow() + timedelta(hours=1))
    return int(alert.id)


def _deliveries_table(client: TestClient, alert_id: int) -> str:
    r = dash_call(client, "alerts-deliveries",
                  {"alerts-table.selected_row_ids": [alert_id], "alerts-acked.data": 0})
    assert r.status_code == 200, r.text
    rows = r.json()["response"]["alerts-deliveries"]["children"]["props"]["data"]
    assert rows, r.text
    return json.dumps(rows, ensure_ascii=False)


def test_the_alerts_page_redacts_deliveries_by_session_scope(sqlite_url) -> None:
    for a in authed_app(sqlite_url):
        alert_id = _failed_delivery(a.app.state.store)
        seen: dict[str, str] = {}
        for scope in ("read", "write", "admin"):
            a.client.cookies.clear()
            r = a.client.post("/login", data={"token": a.tokens[scope], "next": "/dashboard/"},
                              follow_redirects=False)
            assert r.status_code == 303 and a.client.cookies.get(AUTH_COOKIE), r.text
            seen[scope] = _deliveries_table(a.client, alert_id)
        assert "XXXXSECRET" not in seen["read"] and "Errno 111" not in seen["read"]
        assert "https://hooks.slack.com/…" in seen["read"] and "delivery failed" in seen["read"]
        assert "XXXXSECRET" not in seen["write"] and "Errno 111" in seen["write"]
        assert "XXXXSECRET" in seen["admin"] and "Errno 111" in seen["admin"]
        # a bearer token opens the dashboard too: the same rule applies to it
        a.client.cookies.clear()
        text = _deliveries_table_with(a.client, alert_id, a.h("read"))
        assert "XXXXSECRET" not in text and "Errno 111" not in text


def _deliveries_table_with(client: TestClient, alert_id: int, headers: dict[str, str]) -> str:
    client.headers.update(headers)
    try:
        return _deliveries_table(client, alert_id)
    finally:
        for k in headers:
            del client.headers[k]


def test_with_auth_off_the_dashboard_user_sees_everything(sqlite_url) -> None:
    app = make_app(sqlite_url)
    with TestClient(app) as client:
        text = _deliveries_table(client, _failed_delivery(app.state.store))
    app.state.store.engine.dispose()
    assert "XXXXSECRET" in text and "Errno 111" in text
