"""Items 5, 6 and 11: webhook targets (SSRF), a total deadline per attempt, parallel sends with
lease renewal, and what read scope sees of webhooks."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from scalewatch.server.alerts import targets
from scalewatch.server.alerts.webhooks import WebhookSender, post
from scalewatch.server.db.models import utcnow
from scalewatch.server.domain.alerts import AttemptRecord, ClaimedDelivery
from tests.alerts.helpers import Receiver
from tests.security.conftest import authed_app
from tests.support.polling import wait_for

BLOCKED = [
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:8080/x",
    "http://localhost/x",
    "http://10.0.0.7/x",
    "http://192.168.1.1/x",
    "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://[fe80::1]/x",
    "http://0.0.0.0/x",
    "http://2130706433/x",  # 127.0.0.1 as one integer
]


def _rule(url: str) -> dict[str, Any]:
    return {"project": "p", "kind": "asymptote_drop", "webhook_url": url}


@pytest.mark.parametrize("url", BLOCKED)
def test_private_targets_are_refused_when_saved(authed, url) -> None:
    r = authed.client.post("/api/v1/alert-rules", json=_rule(url), headers=authed.h("write"))
    assert r.status_code == 422, (url, r.text)
    ok = authed.client.post(
        "/api/v1/alert-rules", json=_rule("https://93.184.215.14/hook"), headers=authed.h("write")
    )
    assert ok.status_code == 201, ok.text
    r = authed.client.patch(
        f"/api/v1/alert-rules/{ok.json()['id']}",
        json={"webhook_url": url},
        headers=authed.h("write"),
    )
    assert r.status_code == 422, (url, r.text)


def test_allow_private_setting_lets_loopback_through_but_never_metadata(sqlite_url) -> None:
    for a in authed_app(sqlite_url, webhook_allow_private=True):
        h = a.h("write")
        assert (
            a.client.post(
                "/api/v1/alert-rules", json=_rule("http://127.0.0.1:9/x"), headers=h
            ).status_code
            == 201
        )
        assert (
            a.client.post(
                "/api/v1/alert-rules", json=_rule("http://10.1.2.3/x"), headers=h
            ).status_code
            == 201
        )
        r = a.client.post("/api/v1/alert-rules", json=_rule(BLOCKED[0]), headers=h)
        assert r.status_code == 422


def test_serve_has_the_flag() -> None:
    import argparse

    from scalewatch.server import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--webhook-allow-private"])
    assert args.webhook_allow_private is True


def test_sending_refuses_private_targets_again() -> None:
    """A rule saved before the check (or under another setting) is refused at send time."""
    with Receiver() as hook:
        status, error = post(hook.url, b"{}", {"Content-Type": "application/json"}, 5.0)
        assert status is None and error and error.startswith("refused")
        assert hook.requests == []
        status, error = post(
            hook.url, b"{}", {"Content-Type": "application/json"}, 5.0, allow_private=True
        )
        assert status == 200 and error is None


def test_the_checked_address_is_the_one_connected_to(monkeypatch) -> None:
    """DNS is asked once; the request goes to that address with the URL's Host header."""
    calls: list[str] = []
    real = socket.getaddrinfo

    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(host)
        if host == "hooks.test":
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with Receiver() as hook:
        url = f"http://hooks.test:{hook.port}/hook"
        status, _ = post(url, b"{}", {"Content-Type": "application/json"}, 5.0)
        assert status is None and hook.requests == []  # loopback, not allowed
        status, error = post(
            url, b"{}", {"Content-Type": "application/json"}, 5.0, allow_private=True
        )
        assert status == 200, error
        assert hook.requests[0]["headers"]["host"] == f"hooks.test:{hook.port}"
    assert calls.count("hooks.test") == 2  # one lookup per attempt, none inside the connection


class Dribbler:
    """An HTTP 'server' that answers one header byte every `every` seconds, for ever."""

    def __init__(self, every: float = 0.2) -> None:
        self.every = every
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.accepted = threading.Event()
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._dribble, args=(conn,), daemon=True).start()

    def _dribble(self, conn: socket.socket) -> None:
        self.accepted.set()
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not self.stop.is_set():
                conn.sendall(b"X-Slow: 1\r\n")
                time.sleep(self.every)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def dribbler() -> Iterator[Dribbler]:
    d = Dribbler()
    yield d
    d.close()


def test_a_dribbling_receiver_is_cut_off_at_the_deadline(dribbler) -> None:
    t0 = time.monotonic()
    status, error = post(dribbler.url, b"{}", {}, 1.0, allow_private=True)
    elapsed = time.monotonic() - t0
    assert status is None and error and "timed out" in error
    assert elapsed < 8, elapsed  # per-read timeouts alone would run for ever here


class FakeOutbox:
    """An in-memory OutboxStore: two deliveries, every renewal and attempt recorded."""

    def __init__(self, urls: list[str]) -> None:
        self.items = [
            ClaimedDelivery(
                id=i + 1,
                alert_id=1,
                delivery_key=f"k{i}",
                url=u,
                body="{}",
                attempts=0,
                created_at=utcnow(),
                event="alert.opened",
                secret=None,
            )
            for i, u in enumerate(urls)
        ]
        self.claimed = False
        self.renewed: list[list[int]] = []
        self.recorded: dict[int, dict] = {}
        self.lock = threading.Lock()

    def claim_deliveries(self, owner: str, lease_seconds: float = 60, limit: int = 8) -> list:
        if self.claimed:
            return []
        self.claimed = True
        return list(self.items)

    def renew_delivery_leases(self, ids: list[int], owner: str, seconds: float) -> int:
        with self.lock:
            self.renewed.append(list(ids))
        return len(ids)

    def record_delivery_attempt(
        self, delivery_id: int, owner: str, attempt: AttemptRecord, outcome: str,
        next_attempt_at: Any = None,
    ) -> bool:
        with self.lock:
            self.recorded[delivery_id] = {**attempt.model_dump(), "outcome": outcome}
        return True

    def alert_deliveries(self, alert_id: int) -> list:
        return []


def test_sends_are_parallel_and_leases_are_renewed(dribbler) -> None:
    with Receiver() as hook:
        store = FakeOutbox([dribbler.url, hook.url])
        sender = WebhookSender(store, timeout=2.0, allow_private=True)  # type: ignore[arg-type]
        sender.lease_seconds = 0.3  # renew every 0.1 s while the slow one runs
        done = threading.Thread(target=sender.run_once, daemon=True)
        done.start()
        # the good receiver is served while the slow one still holds its attempt
        wait_for(lambda: hook.requests, timeout=30)
        assert 1 not in store.recorded
        done.join(timeout=30)
    assert store.recorded[2]["outcome"] == "delivered"
    assert store.recorded[1]["outcome"] == "retry" and "timed out" in store.recorded[1]["error"]
    assert store.renewed and all(1 in ids for ids in store.renewed)


def test_store_renews_only_its_own_leases(store) -> None:
    run, _ = store.get_or_create_run("p", "r")
    rule = store.create_alert_rule(
        "p", "asymptote_drop", {"delta": 0.02}, webhook_url="https://93.184.215.14/hook"
    )
    store.open_alert(
        rule,
        run.id,
        "m",
        {},
        None,
        webhook=lambda alert, event, key: ("https://93.184.215.14/hook", "{}"),
    )
    (item,) = store.claim_deliveries("me", lease_seconds=1)
    assert store.renew_delivery_leases([item.id], "someone-else", 600) == 0
    assert store.renew_delivery_leases([item.id], "me", 600) == 1
    assert store.claim_deliveries("other", lease_seconds=1) == []  # still leased to "me"


def test_read_scope_sees_host_and_a_generic_error_only(sqlite_url) -> None:
    secret_url = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
    for a in authed_app(sqlite_url):
        c, store = a.client, a.app.state.store
        rid = c.post(
            "/api/v1/runs", json={"project": "p", "name": "r"}, headers=a.h("write")
        ).json()["id"]
        r = c.post(
            "/api/v1/alert-rules", json={**_rule(secret_url), "run_id": rid}, headers=a.h("write")
        )
        assert r.status_code == 201, r.text
        assert "SECRET" not in r.text  # write scope is below admin too
        rule = store.get_alert_rule(r.json()["id"])
        alert = store.open_alert(
            rule, rid, "m", {}, None, webhook=lambda alert, event, key: (secret_url, "{}")
        )
        assert alert is not None
        (item,) = store.claim_deliveries("me", lease_seconds=60)
        store.record_delivery_attempt(
            item.id,
            "me",
            AttemptRecord(
                started_at=utcnow(),
                duration_ms=1.0,
                status_code=None,
                error="ConnectionRefusedError: [Errno 111] Connection refused",
                ok=False,
            ),
            "retry",
            utcnow() + timedelta(hours=1),
        )
        path = f"/api/v1/alerts/{alert.id}/deliveries"
        read = c.get(path, headers=a.h("read")).json()["deliveries"][0]
        assert read["url"] == "https://hooks.slack.com/…"
        assert read["last_error"] == "delivery failed"
        assert read["attempt_log"][0]["error"] == "delivery failed"
        write = c.get(path, headers=a.h("write")).json()["deliveries"][0]
        assert "SECRET" not in write["url"] and "Errno 111" in write["attempt_log"][0]["error"]
        admin = c.get(path, headers=a.h("admin")).json()["deliveries"][0]
        assert admin["url"] == secret_url
        for scope in ("read", "write"):
            rules = c.get("/api/v1/alert-rules", headers=a.h(scope)).json()["rules"]
            assert rules[0]["webhook_url"] == "https://hooks.slack.com/…"
            one = c.get(f"/api/v1/alert-rules/{rule.id}", headers=a.h(scope)).json()
            assert one["webhook_url"] == "https://hooks.slack.com/…"
        assert (
            c.get("/api/v1/alert-rules", headers=a.h("admin")).json()["rules"][0]["webhook_url"]
            == secret_url
        )


def test_target_parsing_refuses_credentials_and_odd_schemes() -> None:
    for bad in ("ftp://x/", "http://user:pw@example.com/", "http:///nohost", "http://x:99999/"):
        with pytest.raises(targets.UnsafeTarget):
            targets.parse(bad)


@pytest.mark.parametrize("url", ["http://exa mple.com/x", "http://exa<mple.com/x",
                                 "http://a..b.com/x", "http://-bad-.com/x",
                                 f"http://{'a' * 64}.com/x"])
def test_a_host_no_name_can_have_is_refused_when_saved(authed, url) -> None:
    """A host that is unresolvable now is saved (DNS may be down), so one that can never
    resolve was saved too ("exa mple.com"): every alert then spent its delivery attempts
    on it. Its syntax decides that: a 422 naming the host."""
    r = authed.client.post("/api/v1/alert-rules", json=_rule(url), headers=authed.h("write"))
    assert r.status_code == 422, (url, r.text)
    assert "host" in r.text and "webhook_url" in r.text, r.text
    for fine in ("https://hooks.example.com/x", "http://\u00e9xample.com/x",
                 "http://[2606:4700::1111]/x", "https://93.184.215.14/hook",
                 "http://no-such-host.invalid/x", "http://under_score.example.com/x"):
        ok = authed.client.post("/api/v1/alert-rules", json=_rule(fine), headers=authed.h("write"))
        assert ok.status_code == 201, (fine, ok.text)
