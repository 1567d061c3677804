"""Rule CRUD and validation, alert states, ack, auto-resolve, one active alert per (rule, run)."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from scalewatch.server.alerts.service import AlertService
from scalewatch.server.db.alert_models import Alert
from scalewatch.server.db.models import utcnow
from tests.alerts.helpers import stable_run
from tests.support.polling import wait_for


def _run(api, name="r", project="p"):
    return api.post("/api/v1/runs", json={"project": project, "name": name}).json()["id"]


def test_rule_crud_and_secret_never_returned(api):
    rid = _run(api)
    r = api.post(
        "/api/v1/alert-rules",
        json={
            "project": "p",
            "run_id": rid,
            "kind": "asymptote_drop",
            "params": {},
            "webhook_url": "https://hooks.example/x",
            "webhook_secret": "s3cret",
        },
    )
    assert r.status_code == 201, r.text
    rule = r.json()
    assert rule["params"] == {"delta": 0.02} and rule["has_secret"] is True
    assert "s3cret" not in r.text and "webhook_secret" not in rule
    listed = api.get("/api/v1/alert-rules", params={"project": "p"}).json()
    assert listed["total"] == 1 and "s3cret" not in str(listed)
    patched = api.patch(f"/api/v1/alert-rules/{rule['id']}", json={"params": {"delta": 0.05}})
    assert patched.status_code == 200 and patched.json()["params"] == {"delta": 0.05}
    changed = api.patch(
        f"/api/v1/alert-rules/{rule['id']}", json={"kind": "asymptote_below"}
    )  # a new kind needs its own params
    assert changed.status_code == 422 and "threshold" in changed.text
    changed = api.patch(
        f"/api/v1/alert-rules/{rule['id']}",
        json={"kind": "asymptote_below", "params": {"threshold": 0.5}, "webhook_secret": None},
    )
    assert changed.status_code == 200 and changed.json()["has_secret"] is False
    assert api.get(f"/api/v1/alert-rules/{rule['id']}").json()["kind"] == "asymptote_below"
    assert api.delete(f"/api/v1/alert-rules/{rule['id']}").status_code == 204
    assert api.get(f"/api/v1/alert-rules/{rule['id']}").status_code == 404
    assert api.delete(f"/api/v1/alert-rules/{rule['id']}").status_code == 404
    assert api.patch(f"/api/v1/alert-rules/{rule['id']}", json={}).status_code == 404


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"kind": "nope"}, "kind"),
        ({"kind": "asymptote_below"}, "threshold"),
        ({"kind": "asymptote_below", "params": {"threshold": "x"}}, "number"),
        ({"kind": "asymptote_drop", "params": {"delta": -1}}, "delta"),
        ({"kind": "asymptote_drop", "params": {"bogus": 1}}, "bogus"),
        ({"kind": "stalled", "params": {"minutes": 0}}, "minutes"),
        ({"kind": "off_curve", "params": {"n": 2.5}}, "integer"),
        ({"kind": "below_baseline"}, "baseline_run_id"),
        ({"kind": "below_baseline", "params": {"baseline_run_id": 99999}}, "does not exist"),
        ({"kind": "asymptote_drop", "run_id": 99999}, "does not exist"),
        ({"kind": "asymptote_drop", "webhook_url": "ftp://x"}, "http"),
        # URLs no request can be sent to (every attempt failed), or that urlsplit changes
        ({"kind": "asymptote_drop", "webhook_url": "http://example.com/a b"}, "spaces"),
        ({"kind": "asymptote_drop", "webhook_url": "http://example.com/a\r\nX-Injected: 1"},
         "control characters"),
        ({"kind": "asymptote_drop", "webhook_url": "http://example.com/a\tb"}, "control"),
        ({"kind": "asymptote_drop", "webhook_url": "http://example.com/é"}, "ASCII"),
        ({"kind": "asymptote_drop", "webhook_url": "http://example.com:0/x"}, "port"),
        ({"kind": "asymptote_drop", "webhook_url": "http://[::1"}, "not a URL"),  # was a 500
        ({"kind": "asymptote_drop", "extra": 1}, "extra"),
        ({"kind": "asymptote_drop", "project": ""}, "project"),
        ({"kind": "asymptote_drop", "project": "p\x00q"}, "project must not contain NUL"),
        ({"kind": "asymptote_drop", "webhook_secret": "s\x00"},
         "webhook_secret must not contain NUL"),
    ],
)
def test_rule_validation_is_a_clear_422(api, body, needle):
    body = {"project": "p", **body}
    r = api.post("/api/v1/alert-rules", json=body)
    assert r.status_code == 422, r.text
    assert needle in r.text


def test_rule_run_must_belong_to_the_project(api):
    rid = _run(api, project="other")
    r = api.post(
        "/api/v1/alert-rules", json={"project": "p", "run_id": rid, "kind": "asymptote_drop"}
    )
    assert r.status_code == 422 and "belongs to project" in r.text


def test_unknown_alerts_are_404(api):
    assert api.get("/api/v1/alerts/12345").status_code == 404
    assert api.post("/api/v1/alerts/12345/ack").status_code == 404
    assert api.get("/api/v1/alerts/12345/deliveries").status_code == 404
    assert api.get("/api/v1/alerts", params={"state": "weird"}).status_code == 422
    assert api.get("/api/v1/alerts").json() == {"alerts": [], "total": 0}


def test_one_active_alert_per_rule_and_run_is_enforced_by_the_database(api):
    store = api.app.state.store
    rid = _run(api)
    rule = store.create_alert_rule("p", "asymptote_below", {"threshold": 0.5}, run_id=rid)
    first = store.open_alert(rule, rid, "m", {}, None)
    assert first is not None
    assert store.open_alert(rule, rid, "again", {}, None) is None  # no storm
    # Even a raw insert that bypasses the store's ON CONFLICT is refused by the unique index.
    with pytest.raises(IntegrityError), store.session() as s:
        s.add(
            Alert(
                rule_id=rule.id,
                run_id=rid,
                project="p",
                kind=rule.kind.value,
                state="open",
                open_key=f"{rule.id}:{rid}",
                message="dup",
                details={},
                created_at=utcnow(),
            )
        )
    assert store.resolve_alert(rule, rid) is not None
    second = store.open_alert(rule, rid, "new episode", {}, None)  # resolved ones don't collide
    assert second is not None and second.id != first.id
    alerts, total = store.list_alerts(run_id=rid)
    assert total == 2 and [a.state for a in alerts] == ["open", "resolved"]
    assert store.open_alert_counts([rid, 999]) == {rid: 1}


def test_ack_then_condition_clears_resolves(api):
    """Ack keeps the alert active; the condition clearing resolves it (service + store)."""
    store = api.app.state.store
    rid = _run(api)
    store.create_alert_rule("p", "stalled", {"minutes": 1.0}, run_id=rid)
    service = AlertService(store, "http://sw.example")
    c, y = stable_run(0)
    api.post(
        f"/api/v1/runs/{rid}/points",
        json={"points": [{"step": 1, "compute": float(c[0]), "metrics": {"reward": float(y[0])}}]},
    )
    assert service.check_stalled() == 0  # points just arrived
    from datetime import timedelta

    from sqlalchemy import update

    from scalewatch.server.db.models import Run

    with store.session() as s:  # the run went quiet 5 minutes ago
        s.execute(
            update(Run).where(Run.id == rid).values(last_seen_at=utcnow() - timedelta(minutes=5))
        )
    assert service.check_stalled() == 1
    assert service.check_stalled() == 0  # still stalled: no second alert
    alert = api.get("/api/v1/alerts", params={"run": rid, "state": "open"}).json()["alerts"][0]
    assert alert["kind"] == "stalled" and alert["run_name"] == "r" and alert["project"] == "p"
    acked = api.post(f"/api/v1/alerts/{alert['id']}/ack").json()
    assert acked["state"] == "acknowledged" and acked["acknowledged_at"]
    assert api.get("/api/v1/alerts", params={"run": rid, "state": "open"}).json()["total"] == 0
    assert api.get("/api/v1/alerts", params={"state": "active"}).json()["total"] == 1
    assert store.open_alert_counts([rid]) == {}
    api.post(
        f"/api/v1/runs/{rid}/points",
        json={"points": [{"step": 2, "compute": float(c[1]), "metrics": {"reward": float(y[1])}}]},
    )
    assert service.check_stalled() == 1  # resolved
    done = api.get(f"/api/v1/alerts/{alert['id']}").json()
    assert done["state"] == "resolved" and done["resolved_at"] and done["acknowledged_at"]
    assert api.post(f"/api/v1/alerts/{alert['id']}/ack").json()["state"] == "resolved"


def test_stalled_on_the_timer_opens_and_auto_resolves(live_app):
    _, client = live_app
    rid = _run(client)
    client.post(
        f"/api/v1/runs/{rid}/points",
        json={"points": [{"step": 1, "compute": 1.0, "metrics": {"reward": 0.1}}]},
    )
    client.post(
        "/api/v1/alert-rules",
        json={"project": "p", "kind": "stalled", "params": {"minutes": 0.01}},
    )
    alert = wait_for(
        lambda: client.get("/api/v1/alerts", params={"run": rid, "state": "open"}).json()["alerts"]
    )[0]
    assert alert["fit_id"] is None and "no points" in alert["message"]
    client.patch(f"/api/v1/runs/{rid}", json={"status": "finished"})  # no longer running
    resolved = wait_for(
        lambda: (
            (a := client.get(f"/api/v1/alerts/{alert['id']}").json())["state"] == "resolved" and a
        )
    )
    assert resolved["resolved_at"]
    assert client.get("/api/v1/alerts", params={"run": rid}).json()["total"] == 1


def test_deleting_a_run_deletes_its_alerts_and_rules(api):
    store = api.app.state.store
    rid = _run(api)
    rule = store.create_alert_rule("p", "asymptote_below", {"threshold": 0.5}, run_id=rid)
    store.open_alert(rule, rid, "m", {}, None)
    store.delete_run(rid)
    assert store.list_alerts()[1] == 0
    assert store.list_alert_rules() == []


def test_a_rule_whose_baseline_run_is_gone_can_still_be_switched_off(api):
    """A below_baseline rule's baseline run deleted: every PATCH (off, a new webhook) was a
    422 "baseline run does not exist", though none touched the params; only DELETE worked."""
    base = _run(api)
    other = api.post("/api/v1/runs", json={"project": "p", "name": "other"}).json()["id"]
    rule = api.post("/api/v1/alert-rules", json={
        "project": "p", "kind": "below_baseline", "params": {"baseline_run_id": base}}).json()
    assert api.delete(f"/api/v1/runs/{base}").status_code == 204
    off = api.patch(f"/api/v1/alert-rules/{rule['id']}", json={"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False, off.text
    # What the params depend on is still checked when the patch touches it.
    moved = api.patch(f"/api/v1/alert-rules/{rule['id']}", json={"run_id": other})
    assert moved.status_code == 422 and "does not exist" in moved.text


def test_a_rule_check_422_names_the_field_in_its_detail(api):
    r = api.post("/api/v1/alert-rules", json={"project": "p", "kind": "stalled",
                                              "params": {"minutes": 0}})
    assert r.status_code == 422
    assert r.json()["detail"] == "1 invalid field(s): params", r.json()
