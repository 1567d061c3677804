"""Webhook delivery through the outbox: real HTTP receiver on loopback, retries, restarts."""

from __future__ import annotations

import json

import httpx

from scalewatch.server.alerts.webhooks import verify
from tests.alerts.helpers import Receiver, points, stable_run
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for

SECRET = "whsec-test"


def _setup(client, url, project="p"):
    """A run whose first identified fit is below the rule's threshold: one alert opens."""
    rid = client.post("/api/v1/runs", json={"project": project, "name": "hooked"}).json()["id"]
    r = client.post(
        "/api/v1/alert-rules",
        json={
            "project": project,
            "run_id": rid,
            "kind": "asymptote_below",
            "params": {"threshold": 0.9},
            "webhook_url": url,
            "webhook_secret": SECRET,
        },
    )
    assert r.status_code == 201, r.text
    c, y = stable_run(seed=3)
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": points(c[:120], y[:120], 0)})
    assert r.status_code == 200, r.text
    return rid, r


def _check_request(req, rid, secret=SECRET):
    assert verify(secret, req["body"], req["headers"].get("x-scalewatch-signature"))
    body = req["json"]
    assert body == json.loads(req["body"])
    assert body["event"] == "alert.opened"
    assert body["run"]["id"] == rid and body["run"]["name"] == "hooked"
    assert body["run"]["project"] == "p" and body["rule"]["kind"] == "asymptote_below"
    assert body["A_after"] is not None and body["link"].endswith(f"/dashboard/run/{rid}")
    assert "hooked" in body["text"] and body["link"] in body["text"]
    assert req["headers"]["x-scalewatch-delivery"] == body["delivery_id"]


def test_failing_receiver_gets_one_delivery_after_retries(live_app):
    _, client = live_app
    with Receiver(fail_first=2) as hook:
        rid, _ = _setup(client, hook.url)
        wait_for(hook.delivered)
        alert = client.get("/api/v1/alerts", params={"run": rid}).json()["alerts"][0]
        deliveries = wait_for(
            lambda: (
                (d := client.get(f"/api/v1/alerts/{alert['id']}/deliveries").json()["deliveries"])[
                    0
                ]["state"]
                == "delivered"
                and d
            )
        )
    assert len(hook.requests) == 3 and len(hook.delivered()) == 1
    assert len({r["headers"]["x-scalewatch-delivery"] for r in hook.requests}) == 1
    for req in hook.requests:
        _check_request(req, rid)
    (delivery,) = deliveries
    assert delivery["event"] == "alert.opened" and delivery["attempts"] == 3
    log = delivery["attempt_log"]
    assert [a["status_code"] for a in log] == [503, 503, 200]
    assert [a["ok"] for a in log] == [False, False, True]
    assert all(a["at"] and a["duration_ms"] >= 0 for a in log)
    assert "secret" not in json.dumps(deliveries).lower().replace("has_secret", "")


def test_wrong_secret_fails_verification(live_app):
    _, client = live_app
    with Receiver() as hook:
        rid, _ = _setup(client, hook.url)
        req = wait_for(hook.delivered)[0]
    assert not verify("other-secret", req["body"], req["headers"]["x-scalewatch-signature"])
    assert not verify(SECRET, req["body"] + b" ", req["headers"]["x-scalewatch-signature"])


def test_unreachable_receiver_records_errors_then_gives_up(database_url, tmp_path):
    from fastapi.testclient import TestClient

    from tests.conftest import make_app

    app = make_app(
        database_url,
        workers=True,
        refit_interval=0.05,
        webhook_backoff=0.05,
        webhook_max_attempts=3,
        webhook_timeout=2.0,
        webhook_allow_private=True,  # the receiver is on loopback
    )
    with Receiver() as closed:
        url = closed.url  # the port is closed once the receiver is shut down
    with TestClient(app) as client:
        rid, _ = _setup(client, url)
        alert = wait_for(lambda: client.get("/api/v1/alerts", params={"run": rid}).json()["alerts"])
        delivery = wait_for(
            lambda: (
                (
                    d := client.get(f"/api/v1/alerts/{alert[0]['id']}/deliveries").json()[
                        "deliveries"
                    ][0]
                )["state"]
                == "failed"
                and d
            )
        )
    app.state.store.engine.dispose()
    assert delivery["attempts"] == 3 and len(delivery["attempt_log"]) == 3
    assert all(a["status_code"] is None and a["error"] for a in delivery["attempt_log"])


def test_delivery_survives_a_server_restart(database_url, tmp_path):
    """SIGKILL the server after the first failed attempt; the restarted one delivers, once."""
    env = {
        "SCALEWATCH_WEBHOOK_BACKOFF": "3",
        "SCALEWATCH_REFIT_INTERVAL": "0.1",
        "SCALEWATCH_WORKERS": "1",
        "SCALEWATCH_WEBHOOK_ALLOW_PRIVATE": "1",
    }
    server = LiveServer(database_url, home=tmp_path / "home", extra_env=env)
    with Receiver(fail_first=1) as hook:
        server.start()
        try:
            with server.client() as client:
                rid, _ = _setup(client, hook.url)
                wait_for(lambda: hook.requests)
                alert_id = client.get("/api/v1/alerts", params={"run": rid}).json()["alerts"][0][
                    "id"
                ]
                wait_for(
                    lambda: (
                        client.get(f"/api/v1/alerts/{alert_id}/deliveries").json()["deliveries"][0][
                            "attempts"
                        ]
                        == 1
                    )
                )
            server.kill()
            assert len(hook.requests) == 1 and not hook.delivered()
            server.start()
            wait_for(hook.delivered)
            with httpx.Client(base_url=server.url, timeout=30) as client:
                delivery = wait_for(
                    lambda: (
                        (
                            d := client.get(f"/api/v1/alerts/{alert_id}/deliveries").json()[
                                "deliveries"
                            ][0]
                        )["state"]
                        == "delivered"
                        and d
                    )
                )
                alerts = client.get("/api/v1/alerts", params={"run": rid}).json()
        finally:
            server.stop()
    assert len(hook.delivered()) == 1 and len(hook.requests) == 2
    assert len({r["headers"]["x-scalewatch-delivery"] for r in hook.requests}) == 1
    for req in hook.requests:
        _check_request(req, rid)
    assert delivery["attempts"] == 2 and [a["status_code"] for a in delivery["attempt_log"]] == [
        503,
        200,
    ]
    assert alerts["total"] == 1  # the restarted refitter did not open a second alert


def _events(hook: Receiver) -> list[str]:
    """The events the receiver acknowledged, in the order they arrived."""
    with hook.lock:
        return [r["json"]["event"] for r in hook.requests if r["status"] == 200]


def test_a_rule_switched_off_tells_its_receiver_after_the_opening(live_app):
    """Switching a rule off (or changing what it means) resolves its open alerts: the receiver
    was told the alert opened and never that it closed. And an alert's events arrive in the
    order they happened: here the opening is still being retried (the receiver fails) when
    the resolution is written, due at once; it went out first."""
    _, client = live_app
    with Receiver(fail_first=3) as hook:
        rid, _ = _setup(client, hook.url)
        wait_for(lambda: hook.requests)  # the opening's first attempt failed
        rule = client.get("/api/v1/alert-rules", params={"run": rid}).json()["rules"][0]
        off = client.patch(f"/api/v1/alert-rules/{rule['id']}", json={"enabled": False})
        assert off.status_code == 200, off.text
        wait_for(lambda: len(_events(hook)) == 2)
        assert _events(hook) == ["alert.opened", "alert.resolved"]
        resolved = hook.delivered()[-1]["json"]
        assert resolved["run"]["id"] == rid and resolved["rule"]["id"] == rule["id"]
        assert verify(SECRET, hook.delivered()[-1]["body"],
                      hook.delivered()[-1]["headers"]["x-scalewatch-signature"])
    (alert,) = client.get("/api/v1/alerts", params={"run": rid}).json()["alerts"]
    assert alert["state"] == "resolved"


def test_a_fixed_webhook_url_takes_the_deliveries_still_waiting(live_app):
    """A rule saved with a wrong URL (nothing listens there): its deliveries kept retrying
    that URL after the rule was fixed, until they gave up."""
    _, client = live_app
    with Receiver() as closed:
        wrong = closed.url
    with Receiver() as hook:
        rid, _ = _setup(client, wrong)
        alert = wait_for(lambda: client.get("/api/v1/alerts", params={"run": rid}).json()["alerts"])
        wait_for(lambda: client.get(f"/api/v1/alerts/{alert[0]['id']}/deliveries").json()[
            "deliveries"][0]["attempt_log"])  # a failed attempt at the wrong URL
        rule = client.get("/api/v1/alert-rules", params={"run": rid}).json()["rules"][0]
        fixed = client.patch(f"/api/v1/alert-rules/{rule['id']}", json={"webhook_url": hook.url})
        assert fixed.status_code == 200, fixed.text
        wait_for(lambda: _events(hook) == ["alert.opened"])
        _check_request(hook.delivered()[0], rid)
