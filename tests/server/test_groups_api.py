"""Groups of runs (recipes) on SQLite and PostgreSQL: `group` on create, resume, patch and the
run list filter; 4xx on bad group names; `GET /groups`; and the group refit marker moving in
the same transaction as a member's points, membership change or deletion."""

from __future__ import annotations

import json

from sqlalchemy import select

from scalewatch.server.db.group_models import GroupSeries


def _marks(api) -> dict[tuple[str, str], tuple[int, int]]:  # noqa: ANN001
    with api.app.state.store.engine.connect() as c:
        rows = c.execute(select(GroupSeries.group_name, GroupSeries.metric,
                                GroupSeries.refit_requested, GroupSeries.refit_done)).all()
    return {(g, m): (req, done) for g, m, req, done in rows}


def _post(api, run_id: int, steps: range, metric: str = "val_pass_rate") -> None:  # noqa: ANN001
    pts = [{"step": s, "compute": float(s), "metrics": {metric: s / 100}} for s in steps]
    r = api.post(f"/api/v1/runs/{run_id}/points", json={"points": pts})
    assert r.status_code == 200, r.text


def test_group_on_create_patch_filter_and_list(api) -> None:  # noqa: ANN001
    a = api.post("/api/v1/runs", json={"project": "p", "name": "a", "group": "cispo-768"})
    assert a.status_code == 201 and a.json()["group"] == "cispo-768"
    b = api.post("/api/v1/runs", json={"project": "p", "name": "b"}).json()
    assert b["group"] is None
    c = api.post("/api/v1/runs", json={"project": "p", "name": "c", "group": "cispo-768"}).json()
    other = api.post("/api/v1/runs", json={"project": "q", "name": "a", "group": "cispo-768"})

    r = api.patch(f"/api/v1/runs/{b['id']}", json={"group": "grpo"})
    assert r.status_code == 200 and r.json()["group"] == "grpo"
    listed = api.get("/api/v1/runs", params={"project": "p", "group": "cispo-768"}).json()
    assert sorted(x["name"] for x in listed["runs"]) == ["a", "c"] and listed["total"] == 2

    groups = api.get("/api/v1/groups", params={"project": "p"}).json()["groups"]
    assert [(g["name"], g["n_runs"], g["runs"]) for g in groups] == [
        ("cispo-768", 2, [a.json()["id"], c["id"]]), ("grpo", 1, [b["id"]])]
    assert all(g["fit"] is None for g in groups)  # nothing fitted yet
    # Same group name in another project: another group (members never span projects).
    q = api.get("/api/v1/groups", params={"project": "q"}).json()["groups"]
    assert q[0]["runs"] == [other.json()["id"]]

    # A resume naming a group moves the run; one without keeps it; null in a PATCH clears.
    moved = api.post("/api/v1/runs", json={"project": "p", "name": "c", "group": "grpo"})
    assert moved.status_code == 200 and moved.json()["group"] == "grpo"
    kept = api.post("/api/v1/runs", json={"project": "p", "name": "c"}).json()
    assert kept["group"] == "grpo"
    assert api.patch(f"/api/v1/runs/{c['id']}", json={"group": None}).json()["group"] is None
    assert api.get(f"/api/v1/runs/{c['id']}").json()["group"] is None


def test_bad_group_names_are_4xx_naming_the_field(api) -> None:  # noqa: ANN001
    run = api.post("/api/v1/runs", json={"project": "p", "name": "a"}).json()
    headers = {"Content-Type": "application/json"}
    for bad in ("", "   ", "x" * 101, "a\x00b", "\udfff"):
        # json.dumps escapes the lone surrogate, as a client would send it.
        body = json.dumps({"project": "p", "name": "z", "group": bad})
        r = api.post("/api/v1/runs", content=body, headers=headers)
        assert r.status_code == 422, (bad, r.text)
        assert any(e["loc"] == "group" for e in r.json()["errors"]), r.json()
        r = api.patch(f"/api/v1/runs/{run['id']}", content=json.dumps({"group": bad}),
                      headers=headers)
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "group", r.text
    r = api.get("/api/v1/runs", params={"group": "x" * 101})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "query.group"
    # Nothing was written by the refused requests.
    assert api.get("/api/v1/runs", params={"project": "p"}).json()["total"] == 1
    r = api.get("/api/v1/groups", params={"project": "nope"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]
    assert api.get("/api/v1/groups").status_code == 422  # project is required


def test_group_marked_dirty_with_points_membership_and_deletion(api) -> None:  # noqa: ANN001
    a = api.post("/api/v1/runs", json={"project": "p", "name": "a", "group": "g"}).json()
    b = api.post("/api/v1/runs", json={"project": "p", "name": "b", "group": "g"}).json()
    _post(api, a["id"], range(1, 5))
    first = _marks(api)[("g", "val_pass_rate")]
    assert first[0] > first[1]  # queued
    _post(api, b["id"], range(1, 5))
    _post(api, a["id"], range(5, 9))
    assert _marks(api)[("g", "val_pass_rate")][0] == first[0] + 2
    _post(api, a["id"], range(9, 12), metric="loss")  # not the fit metric: no group refit
    assert _marks(api)[("g", "val_pass_rate")][0] == first[0] + 2

    before = _marks(api)[("g", "val_pass_rate")][0]
    api.patch(f"/api/v1/runs/{b['id']}", json={"group": "h"})  # leaves g, joins h
    after = _marks(api)
    assert after[("g", "val_pass_rate")][0] == before + 1
    assert after[("h", "val_pass_rate")][0] >= 1
    api.patch(f"/api/v1/runs/{a['id']}", json={"fit_settings": {"r0": 0.05}})  # an input too
    assert _marks(api)[("g", "val_pass_rate")][0] == before + 2
    assert api.delete(f"/api/v1/runs/{a['id']}").status_code == 204
    assert _marks(api)[("g", "val_pass_rate")][0] == before + 3
    assert [g["name"] for g in api.get("/api/v1/groups", params={"project": "p"}).json()[
        "groups"]] == ["h"]
