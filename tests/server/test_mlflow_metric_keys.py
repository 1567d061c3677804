"""Metric names may be as long as MLflow's metric keys (250 characters); project and run names
stay at 200 (SQLite and PostgreSQL).

A key of 201-250 characters used to get the whole MLflow log-batch refused, and with MLflow's
async logging the short keys logged in the same call were lost with it. Each test here goes
through the API and reads back what was stored, so a column still at 200 characters fails on
PostgreSQL even where the request checks pass.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from scalewatch.server import limits

M = "/api/2.0/mlflow"
LONG = ("eval/" + "x" * 300)[:250]  # a metric key as long as MLflow allows
TOO_LONG = LONG + "y"  # 251 characters


def _mlflow_run(api: TestClient, name: str = "r") -> str:
    exp = api.post(f"{M}/experiments/create", json={"name": "proj"})
    assert exp.status_code == 200, exp.text
    got = api.post(f"{M}/runs/create",
                   json={"experiment_id": exp.json()["experiment_id"], "run_name": name})
    assert got.status_code == 200, got.text
    return str(got.json()["run"]["info"]["run_id"])


def _points(api: TestClient, run_id: str | int, metric: str) -> list[tuple[int, float]]:
    got = api.get(f"/api/v1/runs/{run_id}/points", params={"metric": metric})
    assert got.status_code == 200, got.text
    return [(p["step"], p["value"]) for p in got.json()["points"]]


def _refused_naming(response: Any, where: str) -> None:
    """A 400 in MLflow's error shape that says which key and the limit."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "INVALID_PARAMETER_VALUE", body
    assert where in body["message"] and "250" in body["message"], body["message"]


def test_limits_metric_names_250_project_and_run_names_200() -> None:
    assert limits.MAX_METRIC_NAME_LENGTH == 250 == limits.MAX_MLFLOW_KEY_LENGTH
    assert limits.MAX_NAME_LENGTH == 200


def test_mlflow_log_batch_with_a_250_character_key_stores_every_metric(api: TestClient) -> None:
    run_id = _mlflow_run(api)
    batch = {"run_id": run_id, "metrics": [
        {"key": "loss", "value": 0.5, "timestamp": 1_000, "step": 1},
        {"key": LONG, "value": 0.25, "timestamp": 1_000, "step": 1},
        {"key": LONG, "value": 0.5, "timestamp": 2_000, "step": 2},
        {"key": "reward", "value": 1.5, "timestamp": 2_000, "step": 2},
    ]}
    r = api.post(f"{M}/runs/log-batch", json=batch)
    assert r.status_code == 200, r.text
    single = api.post(f"{M}/runs/log-metric", json={
        "run_id": run_id, "key": LONG, "value": 0.75, "timestamp": 3_000, "step": 3})
    assert single.status_code == 200, single.text
    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert set(run["latest"]) == {"loss", LONG, "reward"}
    assert _points(api, run_id, LONG) == [(1, 0.25), (2, 0.5), (3, 0.75)]
    assert _points(api, run_id, "loss") == [(1, 0.5)]
    assert _points(api, run_id, "reward") == [(2, 1.5)]
    history = api.get(f"{M}/metrics/get-history", params={"run_id": run_id, "metric_key": LONG})
    assert history.status_code == 200, history.text
    assert [(m["step"], m["value"]) for m in history.json()["metrics"]] == [
        (1, 0.25), (2, 0.5), (3, 0.75)]
    got = api.get(f"{M}/runs/get", params={"run_id": run_id}).json()["run"]["data"]["metrics"]
    assert LONG in {m["key"] for m in got}
    fit = api.get(f"/api/v1/runs/{run_id}/fit", params={"metric": LONG})
    assert fit.status_code == 200, fit.text
    assert api.get(f"/api/v1/runs/{run_id}/fits", params={"metric": LONG}).status_code == 200


def test_mlflow_a_251_character_key_is_a_400_naming_it_and_nothing_is_stored(
        api: TestClient) -> None:
    run_id = _mlflow_run(api)
    batch = {"run_id": run_id, "metrics": [
        {"key": "loss", "value": 0.5, "timestamp": 1_000, "step": 1},
        {"key": TOO_LONG, "value": 0.25, "timestamp": 1_000, "step": 1},
    ], "params": [{"key": "lr", "value": "1e-6"}]}
    _refused_naming(api.post(f"{M}/runs/log-batch", json=batch), "metrics[1].key")
    _refused_naming(api.post(f"{M}/runs/log-metric", json={
        "run_id": run_id, "key": TOO_LONG, "value": 1.0, "timestamp": 1, "step": 1}),
        "metrics[0].key")
    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert (run["latest"], run["config"]) == ({}, {})


def test_mlflow_fit_metric_tag_takes_a_250_character_key(api: TestClient) -> None:
    run_id = _mlflow_run(api)
    r = api.post(f"{M}/runs/set-tag",
                 json={"run_id": run_id, "key": "scalewatch.fit_metric", "value": LONG})
    assert r.status_code == 200, r.text
    assert api.get(f"/api/v1/runs/{run_id}").json()["fit_metric"] == LONG
    r = api.post(f"{M}/runs/set-tag",
                 json={"run_id": run_id, "key": "scalewatch.fit_metric", "value": TOO_LONG})
    assert r.status_code == 400, r.text


def test_points_api_takes_a_250_character_metric_name(api: TestClient) -> None:
    run_id = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    body = {"points": [
        {"step": 1, "compute": 1.0, "metrics": {"loss": 0.5, LONG: 0.25}},
        {"step": 2, "compute": 2.0, "metrics": {LONG: 0.5}},
    ]}
    r = api.post(f"/api/v1/runs/{run_id}/points", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 3
    assert _points(api, run_id, LONG) == [(1, 0.25), (2, 0.5)]
    assert set(api.get(f"/api/v1/runs/{run_id}").json()["latest"]) == {"loss", LONG}
    # The slow path (a point the fast decoder leaves to the careful checks) takes it too.
    odd = {"points": [{"step": 3.0, "compute": 3, "metrics": {LONG: 1}}]}
    assert api.post(f"/api/v1/runs/{run_id}/points", json=odd).status_code == 200
    assert _points(api, run_id, LONG)[-1] == (3, 1.0)


def test_points_api_refuses_a_251_character_name_saying_which_and_stores_nothing(
        api: TestClient) -> None:
    run_id = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    body = {"points": [
        {"step": 1, "compute": 1.0, "metrics": {"loss": 0.5}},
        {"step": 2, "compute": 2.0, "metrics": {"loss": 0.4, TOO_LONG: 0.25}},
    ]}
    r = api.post(f"/api/v1/runs/{run_id}/points", json=body)
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    assert error["loc"] == "points[1].metrics", error
    assert "250" in error["msg"] and TOO_LONG[:20] in error["msg"], error
    assert api.get(f"/api/v1/runs/{run_id}").json()["latest"] == {}


def test_fit_metric_of_250_characters_on_runs_projects_and_groups(api: TestClient) -> None:
    """runs.fit_metric, projects.fit_metric and a group's metric (group_series, written in the
    ingest transaction) hold a 250-character name; 251 is refused."""
    made = api.post("/api/v1/runs", json={"project": "p", "name": "r", "group": "g",
                                          "fit_metric": LONG})
    assert made.status_code in (200, 201), made.text
    run_id = made.json()["id"]
    assert made.json()["fit_metric"] == LONG
    points = {"points": [{"step": s, "compute": float(s), "metrics": {LONG: 0.1 * s}}
                         for s in range(1, 4)]}
    assert api.post(f"/api/v1/runs/{run_id}/points", json=points).status_code == 200
    groups = api.get("/api/v1/groups", params={"project": "p"})
    assert groups.status_code == 200, groups.text
    assert [(g["name"], g["metric"]) for g in groups.json()["groups"]] == [("g", LONG)]
    fit = api.get("/api/v1/groups/fit", params={"project": "p", "group": "g", "metric": LONG})
    assert fit.status_code == 200, fit.text
    patched = api.patch(f"/api/v1/runs/{run_id}", json={"fit_metric": "loss"})
    assert patched.status_code == 200, patched.text
    patched = api.patch(f"/api/v1/runs/{run_id}", json={"fit_metric": LONG})
    assert patched.status_code == 200 and patched.json()["fit_metric"] == LONG, patched.text
    project = api.patch("/api/v1/projects/p", json={"fit_metric": LONG})
    assert project.status_code == 200 and project.json()["fit_metric"] == LONG, project.text
    for url, body in ((f"/api/v1/runs/{run_id}", {"fit_metric": TOO_LONG}),
                      ("/api/v1/projects/p", {"fit_metric": TOO_LONG})):
        assert api.patch(url, json=body).status_code == 422, url
    assert api.get(f"/api/v1/runs/{run_id}/points",
                   params={"metric": TOO_LONG}).status_code == 422


def test_project_and_run_names_stay_at_200(api: TestClient) -> None:
    for body in ({"project": "p" * 201, "name": "r"}, {"project": "p", "name": "r" * 201}):
        assert api.post("/api/v1/runs", json=body).status_code == 422, body
    assert api.post("/api/v1/runs", json={"project": "p" * 200, "name": "r" * 200}
                    ).status_code in (200, 201)
    r = api.post(f"{M}/experiments/create", json={"name": "e" * 201})
    assert (r.status_code, r.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    r = api.post(f"{M}/runs/create", json={"experiment_id": "0", "run_name": "r" * 201})
    assert (r.status_code, r.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
