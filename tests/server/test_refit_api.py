"""The refitter end to end through the API, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from scalewatch.server.refit import Refitter
from tests.conftest import make_app
from tests.support.curves import noisy_sigmoid
from tests.support.polling import wait_for

TRUE = {"A": 0.61, "B": 1.92, "C_mid": 2542.0, "R0": 0.30}


def synthetic(n=80, c_max=8000.0, seed=0, **params):
    return noisy_sigmoid(**{**TRUE, **params}, n=n, c_max=c_max, seed=seed, sd=0.008)


def post_series(client, rid, c, y, start=0, metric="val_pass_rate"):
    pts = [
        {"step": start + i, "compute": float(ci), "metrics": {metric: float(yi)}}
        for i, (ci, yi) in enumerate(zip(c, y, strict=True))
    ]
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": pts})
    assert r.status_code == 200, r.text


def test_ingest_triggers_fits_and_history(live_app):
    app, client = live_app
    rid = client.post(
        "/api/v1/runs", json={"project": "p", "name": "r", "target_compute": 16000}
    ).json()["id"]
    c, y = synthetic()
    post_series(client, rid, c[:40], y[:40])
    first = wait_for(lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["fit_id"] and f)
    post_series(client, rid, c[40:], y[40:], start=40)
    latest = wait_for(
        lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["n_points"] == 80 and f
    )
    assert latest["fit_id"] != first["fit_id"]
    assert latest["status"] == "ok" and abs(latest["A"] - TRUE["A"]) < 0.03
    lo, hi = latest["ci"]["A"]
    assert lo <= latest["A"] <= hi
    history = client.get(f"/api/v1/runs/{rid}/fits").json()["fits"]
    assert len(history) >= 2 and history[-1]["id"] == latest["fit_id"]
    assert history[0]["n_points"] <= history[-1]["n_points"]
    run = client.get("/api/v1/runs").json()["runs"][0]
    assert run["fit"]["A"] == latest["A"] and run["fit"]["status"] == "ok"


def test_patching_fit_settings_refits(live_app):
    _, client = live_app
    rid = client.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    c, y = synthetic()
    post_series(client, rid, c, y)
    before = wait_for(lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["fit_id"] and f)
    client.patch(
        f"/api/v1/runs/{rid}", json={"fit_settings": {"warmup": 1500}, "target_compute": 20000}
    )
    after = wait_for(
        lambda: (
            (f := client.get(f"/api/v1/runs/{rid}/fit").json())["fit_id"] != before["fit_id"] and f
        )
    )
    assert after["fit_range"][0] >= 1500 and after["target_compute"] == 20000
    assert after["n_points"] < before["n_points"]


def test_too_few_points_explain_themselves(api):
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    post_series(api, rid, [1.0, 2.0, 3.0], [0.1, 0.2, 0.25], metric="reward")
    # The GET never fits: until the refitter has run, the answer is "pending".
    pending = api.get(f"/api/v1/runs/{rid}/fit").json()
    assert pending["status"] == "pending" and pending["fit_id"] is None
    assert pending["metric"] == "reward" and "queued" in pending["message"]
    Refitter(api.app.state.store).run_once()
    fit = api.get(f"/api/v1/runs/{rid}/fit").json()
    assert fit["status"] == "insufficient_data" and fit["fit_id"] is not None
    assert "3" in fit["message"] and fit["A"] is None


def test_reading_an_unfitted_metric_queues_a_fit(api):
    """A metric nobody refits (not the run's fit metric) is fitted by the refitter on request,
    and again once it has newer points, never inside the GET."""
    store = api.app.state.store
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    c, y = synthetic()
    post_series(api, rid, c[:60], y[:60])
    post_series(api, rid, c[:60], y[:60] * 0.9, metric="reward")
    Refitter(store).run_once()  # fits val_pass_rate, the fit metric, only

    url = f"/api/v1/runs/{rid}/fit"
    first = api.get(url, params={"metric": "reward"}).json()
    assert first["status"] == "pending" and first["fit_id"] is None
    assert first["metric"] == "reward"
    none = api.get(url, params={"metric": "nothing"}).json()
    assert none["status"] == "insufficient_data" and "no points" in none["message"]

    assert Refitter(store).run_once() == 1  # the queued reward fit, nothing else
    fitted = api.get(url, params={"metric": "reward"}).json()
    assert fitted["status"] in ("ok", "unidentified") and fitted["fit_id"] is not None
    assert api.get(url).json()["metric"] == "val_pass_rate"  # the run's fit metric is unchanged

    post_series(api, rid, c[60:], y[60:] * 0.9, start=60, metric="reward")
    # Newer points: the stored fit is still answered, and a refit is queued by the read.
    assert api.get(url, params={"metric": "reward"}).json()["fit_id"] == fitted["fit_id"]
    assert Refitter(store).run_once() == 1
    newer = api.get(url, params={"metric": "reward"}).json()
    assert newer["fit_id"] != fitted["fit_id"] and newer["n_points"] > fitted["n_points"]
    assert Refitter(store).run_once() == 0  # a current fit queues nothing


def test_stateless_fit_and_compare(api):
    c, y = synthetic()
    r = api.post(
        "/api/v1/fit", json={"compute": c.tolist(), "values": y.tolist(), "target_compute": 16000}
    )
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert set(r.json()) >= {
        "status",
        "A",
        "B",
        "C_mid",
        "R0",
        "r0_source",
        "ci",
        "A_lower_bound",
        "n_points",
        "fit_range",
        "target_compute",
        "predicted_at_target",
        "predicted_interval",
        "rmse",
        "method",
    }
    bad = api.post("/api/v1/fit", json={"compute": [1, 2], "values": [0.1]})
    assert bad.status_code == 422 and "pair up" in str(bad.json())

    high = api.post("/api/v1/runs", json={"project": "p", "name": "high"}).json()["id"]
    low = api.post("/api/v1/runs", json={"project": "p", "name": "low"}).json()["id"]
    post_series(api, high, c, y)
    c2, y2 = synthetic(seed=1, A=0.52)
    post_series(api, low, c2, y2)
    Refitter(api.app.state.store).run_once()  # compare reads stored fits
    cmp = api.get("/api/v1/compare", params={"run": [high, low], "budget": 16000}).json()
    assert [r["name"] for r in cmp["runs"]] == ["high", "low"]
    pair = cmp["comparison"]["pairs"][0]
    assert pair["decision"]["rule"] == "different_asymptote"
    assert pair["decision"]["higher_asymptote"] == "high"
    assert pair["winner_at_budget"]["run"] == "high"
    assert api.get("/api/v1/compare", params={"run": [high, 999999]}).status_code == 404


def test_failing_fit_never_affects_ingestion(database_url, monkeypatch):
    import scalewatch.server.refit.worker as worker

    def boom(*_a, **_k):
        raise RuntimeError("fit exploded")

    monkeypatch.setattr(worker, "fit_curve", boom)
    app = make_app(database_url, workers=True, refit_interval=0.1)
    with TestClient(app) as client:
        rid = client.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
        c, y = synthetic()
        post_series(client, rid, c, y)
        wait_for(lambda: "scalewatch_fit_failures_total 1" in client.get("/metrics").text)
        post_series(client, rid, c, y)  # still accepted
        assert client.get(f"/api/v1/runs/{rid}").json()["last_step"] == 79


def test_two_refitters_never_fit_one_series_at_once(database_url):
    """Leases in the database: concurrent workers fit each dirty series exactly once."""
    app = make_app(database_url)
    store = app.state.store
    ids = []
    for i in range(6):
        run, _ = store.get_or_create_run("p", f"r{i}")
        ids.append(run.id)
        c, y = synthetic(seed=i)
        from scalewatch.server.ingest import PointRow

        store.ingest_points(
            run.id,
            [
                PointRow("val_pass_rate", k, float(ci), float(yi), None)
                for k, (ci, yi) in enumerate(zip(c, y, strict=True))
            ],
        )
    workers = [Refitter(store), Refitter(store)]
    counts = [0, 0]

    def run(i):
        counts[i] = workers[i].run_once()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(counts) == 6
    for rid in ids:
        _, history = store.fit_history(rid)
        # one fit each (the 80 points arrived at once: the fits before it are backfilled)
        assert [h["backfilled"] for h in history].count(False) == 1


def test_a_percentage_metric_is_told_its_range_and_fitted_once_it_is_set(live_app):
    """A run logging its pass rate in percent: under the default value range [0, 1] the fit
    says the values lie outside it and how to set it (it used to read "flat"); with
    fit_settings.value_range [0, 100] the same run is fitted and A claimed in percent."""
    _, client = live_app
    rid = client.post("/api/v1/runs", json={"project": "p", "name": "pct",
                                            "target_compute": 16000}).json()["id"]
    c, y = synthetic()
    post_series(client, rid, c, 100.0 * y)
    told = wait_for(lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["fit_id"] and f)
    assert told["status"] == "insufficient_data"
    why = told["withheld"]["reasons"][0]["detail"]
    assert "outside the value range [0, 1]" in why and "[0, 100]" in why
    r = client.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"value_range": [0, 100]}})
    assert r.status_code == 200, r.text
    fit = wait_for(lambda: ((f := client.get(f"/api/v1/runs/{rid}/fit").json())["fit_id"]
                            != told["fit_id"] and f))
    assert fit["status"] == "ok", fit["withheld"]
    lo, hi = fit["ci"]["A"]
    assert lo <= 100.0 * TRUE["A"] <= hi and hi - lo < 10.0
