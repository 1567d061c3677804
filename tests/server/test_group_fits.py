"""Group fits through the real refitter, on SQLite and PostgreSQL: the pooled fit of a recipe's
seeds, its members and seed spread, `pending` before, fit history, refits on membership
changes, and Compare between groups (and a group against a run)."""

from __future__ import annotations

from scalewatch.server.refit import Refitter
from tests.server.test_refit_api import TRUE, post_series, synthetic
from tests.support.polling import wait_for


def _seeds(client, project: str, group: str, n: int = 3, A: float = 0.61,  # noqa: ANN001
           first_seed: int = 0, points: int = 80) -> list[int]:
    ids = []
    for k in range(n):
        rid = client.post("/api/v1/runs", json={
            "project": project, "name": f"{group}-seed{k}", "group": group,
            "target_compute": 16000}).json()["id"]
        c, y = synthetic(n=points, seed=first_seed + k, A=A + 0.004 * (k - 1))
        post_series(client, rid, c, y)
        ids.append(rid)
    return ids


def _group_fit(client, group: str, n_points: int, project: str = "p") -> dict:  # noqa: ANN001
    def ready() -> dict | None:
        f = client.get("/api/v1/groups/fit", params={"project": project, "group": group}).json()
        return f if f.get("fit_id") and f["n_points"] == n_points else None
    return wait_for(ready, timeout=120)


def test_group_fit_members_spread_and_history(live_app) -> None:  # noqa: ANN001
    _, client = live_app
    ids = _seeds(client, "p", "cispo", n=3)
    fit = _group_fit(client, "cispo", 240)
    assert fit["status"] == "ok" and abs(fit["A"] - TRUE["A"]) < 0.03, fit
    assert fit["group"] == "cispo" and fit["project"] == "p"
    assert fit["metric"] == "val_pass_rate" and fit["target_compute"] == 16000
    assert [m["run_id"] for m in fit["members"]] == ids
    assert all(m["included"] and not m["off_curve"] for m in fit["members"]), fit["members"]
    assert all(m["status"] == "ok" and "internal" not in m for m in fit["members"])
    spread = fit["seed_spread"]
    assert spread["n"] == 3 and spread["sd"] is not None and len(spread["ci"]) == 2
    assert "internal" not in fit

    groups = client.get("/api/v1/groups", params={"project": "p"}).json()["groups"]
    assert groups[0]["fit"]["A"] == fit["A"] and groups[0]["metric"] == "val_pass_rate"
    history = client.get("/api/v1/groups/fits", params={"project": "p", "group": "cispo"})
    assert history.status_code == 200
    assert history.json()["fits"][-1]["id"] == fit["fit_id"]

    # A seed leaving the group refits it on the two left.
    client.patch(f"/api/v1/runs/{ids[2]}", json={"group": None})
    two = _group_fit(client, "cispo", 160)
    assert [m["run_id"] for m in two["members"]] == ids[:2]
    history = client.get("/api/v1/groups/fits", params={"project": "p", "group": "cispo"}).json()
    assert len(history["fits"]) >= 2


def test_group_fit_pending_and_errors(api) -> None:  # noqa: ANN001
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "a", "group": "g"}).json()["id"]
    empty = api.get("/api/v1/groups/fit", params={"project": "p", "group": "g"}).json()
    assert empty["status"] == "insufficient_data" and empty["fit_id"] is None
    c, y = synthetic(n=40)
    post_series(api, rid, c, y)
    pending = api.get("/api/v1/groups/fit", params={"project": "p", "group": "g"})
    assert pending.status_code == 200 and pending.json()["status"] == "pending"
    assert pending.json()["members"][0]["run_id"] == rid
    Refitter(api.app.state.store).run_once()  # the run, then its group
    fitted = api.get("/api/v1/groups/fit", params={"project": "p", "group": "g"}).json()
    assert fitted["fit_id"] is not None and fitted["n_points"] == 40
    assert Refitter(api.app.state.store).run_once() == 0  # nothing left to fit

    r = api.get("/api/v1/groups/fit", params={"project": "p", "group": "nope"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]
    r = api.get("/api/v1/groups/fit", params={"project": "nope", "group": "g"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]
    assert api.get("/api/v1/groups/fits", params={"project": "p", "group": "nope"}
                   ).status_code == 404
    r = api.get("/api/v1/groups/fit", params={"project": "p", "group": "x" * 101})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "query.group"
    # Members fitted on different metrics: a 422 naming each (unless metric= says which).
    other = api.post("/api/v1/runs", json={"project": "p", "name": "b", "group": "g",
                                           "fit_metric": "reward"}).json()["id"]
    r = api.get("/api/v1/groups/fit", params={"project": "p", "group": "g"})
    assert r.status_code == 422 and "reward: b" in r.json()["detail"], r.text
    params = {"project": "p", "group": "g", "metric": "val_pass_rate"}
    ok = api.get("/api/v1/groups/fit", params=params)  # the stored fit, while b's joining
    assert ok.status_code == 200 and ok.json()["fit_id"] == fitted["fit_id"]  # ... is queued
    # The group on val_pass_rate, and on reward: b's fit metric, queued when it joined.
    assert Refitter(api.app.state.store).run_once() == 2
    ok = api.get("/api/v1/groups/fit", params=params).json()
    assert [(m["run_id"], m["status"]) for m in ok["members"]] == [
        (rid, fitted["members"][0]["status"]), (other, "insufficient_data")]


def test_compare_groups_and_a_group_with_a_run(api) -> None:  # noqa: ANN001
    better = _seeds(api, "p", "cispo", n=2, A=0.61)
    worse = _seeds(api, "p", "grpo", n=2, A=0.52, first_seed=10)
    solo = api.post("/api/v1/runs", json={"project": "p", "name": "solo",
                                          "target_compute": 16000}).json()["id"]
    c, y = synthetic(seed=30, A=0.55)
    post_series(api, solo, c, y)
    Refitter(api.app.state.store).run_once()  # the runs, then both groups

    r = api.get("/api/v1/compare", params={"project": "p", "group": ["cispo", "grpo"],
                                           "budget": 16000})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [(x["label"], x["id"], x["group"]) for x in body["runs"]] == [
        ("cispo", None, "cispo"), ("grpo", None, "grpo")]
    assert body["metric"] == "val_pass_rate" and body["runs"][0]["fit"]["status"] == "ok"
    assert "internal" not in body["runs"][0]["fit"]["members"][0]
    assert [m["run_id"] for m in body["runs"][0]["fit"]["members"]] == better
    pair = body["comparison"]["pairs"][0]
    assert pair["runs"] == ["cispo", "grpo"], pair
    assert pair["decision"]["rule"] == "different_asymptote", pair["decision"]
    assert pair["decision"]["higher_asymptote"] == "cispo"
    assert pair["winner_at_budget"]["run"] == "cispo", pair

    # A group beside a run (and the runs-only form keeps working).
    r = api.get("/api/v1/compare", params={"project": "p", "group": "grpo", "run": solo})
    assert r.status_code == 200, r.text
    assert [x["label"] for x in r.json()["runs"]] == ["solo", "grpo"]
    assert api.get("/api/v1/compare", params={"run": [solo, worse[0]]}).status_code == 200

    for params, code, loc in [
        ({}, 422, "query.run"),
        ({"group": "cispo"}, 422, "query.project"),
        ({"project": "p", "group": "nope"}, 404, None),
        ({"project": "nope", "group": "cispo"}, 404, None),
        ({"project": "p", "group": "x" * 101}, 422, "query.group[0]"),
    ]:
        r = api.get("/api/v1/compare", params=params)
        assert r.status_code == code, (params, r.text)
        if loc:
            assert r.json()["errors"][0]["loc"] == loc, r.json()


def test_a_group_that_stays_dirty_does_not_starve_its_seeds_fits(api) -> None:  # noqa: ANN001
    """While a seed keeps logging, its group is dirty again after every group fit: the
    refitter must still come back to the seed's own series (they take turns)."""
    from scalewatch.server.ingest import PointRow

    store = api.app.state.store
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "a", "group": "g"}).json()["id"]
    c, y = synthetic(n=46)
    post_series(api, rid, c[:40], y[:40])
    logged = iter(range(40, 46))

    def seed_keeps_logging(*_args: object) -> None:  # a trainer, as the group is fitted
        i = next(logged, None)
        if i is not None:
            store.ingest_points(rid, [PointRow("val_pass_rate", i, float(c[i]), float(y[i]),
                                               None)])

    Refitter(store, group_listeners=[seed_keeps_logging]).run_once()
    assert api.get(f"/api/v1/runs/{rid}/fit").json()["n_points"] == 46
    group = api.get("/api/v1/groups/fit", params={"project": "p", "group": "g"}).json()
    assert group["members"][0]["n_points"] == 46


def test_two_workers_fit_each_group_once(store) -> None:  # noqa: ANN001
    """Two refitters racing on one database: every series and every group is fitted exactly
    once (the group claim is a compare-and-set lease, like a series')."""
    import threading

    from scalewatch.server.ingest import PointRow

    for g in range(3):
        for k in range(2):
            run, _ = store.get_or_create_run("p", f"g{g}-s{k}", group=f"g{g}")
            c, y = synthetic(n=40, seed=10 * g + k)
            store.ingest_points(run.id, [
                PointRow("val_pass_rate", i, float(ci), float(yi), None)
                for i, (ci, yi) in enumerate(zip(c, y, strict=True))])
    workers = [Refitter(store), Refitter(store)]
    counts = [0, 0]

    def work(i: int) -> None:
        counts[i] = workers[i].run_once()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sum(counts) == 6 + 3
    for g in range(3):
        history = store.group_fit_history("p", f"g{g}", "val_pass_rate")
        assert len(history) == 1 and history[0]["n_points"] == 80


def test_a_group_refit_pools_its_seeds_stored_fits(api) -> None:  # noqa: ANN001
    """Seeds whose own fits are current and made with the group's options are pooled from
    those fits, not fitted a second time; a seed whose points moved on since its fit, or
    whose settings differ from the group's, is fitted again with the group's options."""
    from scalewatch.server.refit.groups import reusable_run_fit
    from scalewatch.server.services.groups import group_options

    ids = _seeds(api, "p", "reuse", n=3)
    store = api.app.state.store
    refitter = Refitter(store)
    refitter.run_once()  # the three series, then the group
    assert refitter.groups.member_fits_reused == 3
    fit = api.get("/api/v1/groups/fit", params={"project": "p", "group": "reuse"}).json()
    for rid, member in zip(ids, fit["members"], strict=True):
        own = api.get(f"/api/v1/runs/{rid}/fit").json()
        assert member["A"] == own["A"] and member["ci"] == own["ci"], (member, own)

    # New points on one seed, its own fit not caught up yet: only the others are reusable.
    c, y = synthetic(n=90, seed=7)
    post_series(api, ids[2], c[80:], y[80:])
    dirty = store.claim_dirty_groups("probe", 60.0, limit=1)
    _, members = store.group_snapshot(dirty[0].group_series_id)
    options = group_options(members)
    assert [reusable_run_fit(m, options) is not None for m in members] == [True, True, False]
    store.finish_group_refit(dirty[0].group_series_id, "probe", 0, None, False)

    # One seed gets a warm-up: the group's window starts at the latest warm-up, which is that
    # seed's own window only, so the other two are fitted again with the group's options.
    api.patch(f"/api/v1/runs/{ids[0]}", json={"fit_settings": {"warmup": 1500}})
    refitter.groups.member_fits_reused = 0
    refitter.run_once()
    assert refitter.groups.member_fits_reused == 1
    fit = api.get("/api/v1/groups/fit", params={"project": "p", "group": "reuse"}).json()
    assert fit["status"] != "pending" and fit["n_points"] < 250

    # A seed's run fit made with a noise prior is not what the group's fit of that seed uses
    # (the group gives its seeds none): it is fitted again rather than pooled as it is, so the
    # group's result never depends on which path ran.
    post_series(api, ids[2], c[80:], y[80:], start=80)  # the group is dirty again
    dirty = store.claim_dirty_groups("probe", 60.0, limit=1)
    _, members = store.group_snapshot(dirty[0].group_series_id)
    options = group_options(members)
    first = next(m for m in members if reusable_run_fit(m, options) is not None)
    with_prior = {**first, "run_fit": {**first["run_fit"],
                                       "prior": {"rho": {"mean": 0.6, "sd": 0.05}}}}
    assert reusable_run_fit(with_prior, options) is None
    store.finish_group_refit(dirty[0].group_series_id, "probe", 0, None, False)
