"""Group alert rules through the real refitter and a loopback webhook receiver, on SQLite and
PostgreSQL: `asymptote_drop` on a group's pooled A and `seed_off_curve` on one seed each open
exactly one alert and one webhook post, however many group refits follow; rule validation."""

from __future__ import annotations

from typing import Any

from tests.alerts.helpers import (
    Receiver,
    ar1,
    collapsing_run,
    compute_axis,
    points,
    sigmoid,
    stable_run,
)
from tests.support.polling import wait_for


def _run(client: Any, name: str, group: str | None = "g") -> int:
    body = {"project": "p", "name": name, "target_compute": 20000.0, "group": group}
    return int(client.post("/api/v1/runs", json=body).json()["id"])


def _post(client: Any, rid: int, c: Any, y: Any, start: int) -> None:
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": points(c, y, start)})
    assert r.status_code == 200, r.text


def _group_fit(client: Any, members: list[int], n_points: int) -> dict:
    """Wait for a stored group fit of exactly these members over `n_points` points in all
    (the members' own fits: the pooled fit leaves a broken seed out)."""
    def ready() -> dict | None:
        f = client.get("/api/v1/groups/fit", params={"project": "p", "group": "g"}).json()
        got = f.get("members") or []
        done = f.get("fit_id") and [m["run_id"] for m in got] == members
        return f if done and sum(m["n_points"] for m in got) == n_points else None
    return wait_for(ready, timeout=120)


def _rule(client: Any, kind: str, url: str) -> dict:
    r = client.post("/api/v1/alert-rules", json={
        "project": "p", "group": "g", "kind": kind, "webhook_url": url})
    assert r.status_code == 201, r.text
    assert r.json()["group"] == "g" and r.json()["run_id"] is None
    return r.json()


def _alerts(client: Any) -> list[dict]:
    return client.get("/api/v1/alerts", params={"group": "g"}).json()["alerts"]


def test_seed_off_curve_fires_once_per_seed(live_app) -> None:  # noqa: ANN001
    _, client = live_app
    with Receiver() as hook:
        rule = _rule(client, "seed_off_curve", hook.url)
        seeds = [_run(client, f"seed{k}") for k in range(3)]
        bad = _run(client, "collapsing")
        curves = [stable_run(seed=k) for k in range(3)] + [collapsing_run(seed=7)]
        for rid, (c, y) in zip([*seeds, bad], curves, strict=True):
            _post(client, rid, c[:80], y[:80], 0)
        fit = _group_fit(client, [*seeds, bad], 320)
        assert not any(m["off_curve"] for m in fit["members"]) and _alerts(client) == []

        c, y = curves[3]
        _post(client, bad, c[80:150], y[80:150], 80)  # the collapse
        fit = _group_fit(client, [*seeds, bad], 390)
        flagged = [m["run_id"] for m in fit["members"] if m["off_curve"]]
        assert flagged == [bad], fit["members"]
        alerts = wait_for(lambda: _alerts(client))
        assert [(a["run_id"], a["group"], a["kind"], a["state"]) for a in alerts] == [
            (bad, "g", "seed_off_curve", "open")]
        assert alerts[0]["rule_id"] == rule["id"] and "collapsing" in alerts[0]["message"]

        # More group refits (the healthy seeds go on): still one alert, one webhook post.
        for rid, (c, y) in zip(seeds, curves[:3], strict=True):
            _post(client, rid, c[80:100], y[80:100], 80)
        _group_fit(client, [*seeds, bad], 450)
        body = wait_for(lambda: hook.delivered())[0]["json"]
        assert len(_alerts(client)) == 1 and len(hook.delivered()) == 1
        assert body["group"] == {"name": "g", "project": "p"}
        assert body["run"]["id"] == bad and "of group g" in body["text"]

        # The seed leaves the group: its alert resolves (a second, resolved post).
        client.patch(f"/api/v1/runs/{bad}", json={"group": None})
        wait_for(lambda: _alerts(client)[0]["state"] == "resolved")
        wait_for(lambda: len(hook.delivered()) == 2)
        assert hook.delivered()[1]["json"]["event"] == "alert.resolved"


def test_asymptote_drop_on_the_pooled_A_fires_once(live_app) -> None:  # noqa: ANN001
    _, client = live_app
    with Receiver() as hook:
        _rule(client, "asymptote_drop", hook.url)
        c = compute_axis()
        good = [_run(client, f"good{k}") for k in range(2)]
        for k, rid in enumerate(good):
            _post(client, rid, c[:120], sigmoid(c[:120], 0.61) + ar1(120, k)[:120], 0)
        first = _group_fit(client, good, 240)
        assert first["status"] == "ok" and abs(first["A"] - 0.61) < 0.03
        # The recipe's seeds are replaced by worse ones: its pooled A drops by ~0.1.
        worse = [_run(client, f"worse{k}") for k in range(2)]
        for k, rid in enumerate(worse):
            _post(client, rid, c[:120], sigmoid(c[:120], 0.50) + ar1(120, 20 + k)[:120], 0)
        for rid in good:
            client.patch(f"/api/v1/runs/{rid}", json={"group": None})
        dropped = _group_fit(client, worse, 240)
        assert dropped["status"] == "ok" and dropped["A"] < 0.53
        alerts = wait_for(lambda: _alerts(client))
        assert [(a["run_id"], a["group"], a["kind"]) for a in alerts] == [
            (None, "g", "asymptote_drop")]
        assert alerts[0]["details"]["A_before"] > alerts[0]["details"]["A_after"] + 0.05
        # Another refit: still one alert and one webhook post.
        _post(client, worse[0], c[120:140], sigmoid(c[120:140], 0.50), 120)
        _group_fit(client, worse, 260)
        body = wait_for(lambda: hook.delivered())[0]["json"]
        assert len(_alerts(client)) == 1 and len(hook.delivered()) == 1
        assert body["run"] is None and body["group"] == {"name": "g", "project": "p"}
        assert "on group g (p)" in body["text"] and "/api/v1/groups/fit?" in body["link"]


def test_group_rule_validation(api) -> None:  # noqa: ANN001
    rid = _run(api, "a")
    base = {"project": "p", "kind": "asymptote_drop"}
    cases = [
        ({**base, "group": "g", "run_id": rid}, "group", "not both"),
        ({**base, "kind": "stalled", "params": {"minutes": 5}, "group": "g"}, "kind", "group"),
        ({**base, "kind": "seed_off_curve"}, "group", "give its group"),
        ({**base, "group": ""}, "group", ""),
        ({**base, "group": "x" * 101}, "group", ""),
    ]
    for body, loc, needle in cases:
        r = api.post("/api/v1/alert-rules", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["errors"][0]["loc"] == loc and needle in r.json()["errors"][0]["msg"]
    assert api.get("/api/v1/alert-rules").json()["total"] == 0  # nothing stored
    ok = api.post("/api/v1/alert-rules", json={**base, "kind": "seed_off_curve", "group": "g"})
    assert ok.status_code == 201 and ok.json()["group"] == "g"
    # The rules covering a run include its group's, and a project-wide one, not other groups'.
    api.post("/api/v1/alert-rules", json={**base, "group": "other"})
    api.post("/api/v1/alert-rules", json=base)
    covering = api.get("/api/v1/alert-rules", params={"run": rid}).json()["rules"]
    assert sorted((r["kind"], r["group"]) for r in covering) == [
        ("asymptote_drop", None), ("seed_off_curve", "g")]
    # PATCH: another group is fine; a run beside the group, or no group for seed_off_curve, not.
    rule = ok.json()["id"]
    moved = api.patch(f"/api/v1/alert-rules/{rule}", json={"group": "other"})
    assert moved.status_code == 200 and moved.json()["group"] == "other"
    for body, loc in (({"run_id": rid}, "group"), ({"group": None}, "group")):
        r = api.patch(f"/api/v1/alert-rules/{rule}", json=body)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == loc, r.text
    assert api.get(f"/api/v1/alert-rules/{rule}").json()["group"] == "other"
