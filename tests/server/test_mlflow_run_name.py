"""Renaming a run through MLflow (SQLite and PostgreSQL): `runs/update` with `run_name` (what
`MlflowClient.update_run(name=...)` and `mlflow.start_run(run_id=..., run_name=...)` send) and the
`mlflow.runName` tag set after creation rename the run through the store's rename, under its name
checks; a name another run of the project has is a 400 RESOURCE_ALREADY_EXISTS that writes nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

M = "/api/2.0/mlflow"


def _run(api: TestClient, name: str) -> str:
    got = api.post(f"{M}/runs/create", json={"experiment_id": "0", "run_name": name})
    assert got.status_code == 200, got.text
    return str(got.json()["run"]["info"]["run_id"])


def _name(api: TestClient, run_id: str) -> str:
    return str(api.get(f"/api/v1/runs/{run_id}").json()["name"])


def _error(response: Any, code: str) -> str:
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == code, response.text
    assert set(response.json()) == {"error_code", "message"}
    return str(response.json()["message"])


def test_runs_update_run_name_renames_the_run(api: TestClient) -> None:
    run_id = _run(api, "first")
    r = api.post(f"{M}/runs/update",
                 json={"run_id": run_id, "run_name": "renamed", "status": "FINISHED"})
    assert r.status_code == 200, r.text
    assert (r.json()["run_info"]["run_name"], r.json()["run_info"]["status"]) == (
        "renamed", "FINISHED")
    assert _name(api, run_id) == "renamed"
    got = api.get(f"{M}/runs/get", params={"run_id": run_id}).json()["run"]
    assert got["info"]["run_name"] == "renamed"
    assert {"key": "mlflow.runName", "value": "renamed"} in got["data"]["tags"]
    found = api.post(f"{M}/runs/search", json={
        "experiment_ids": ["0"], "filter": "attributes.run_name = 'renamed'"}).json()["runs"]
    assert [r["info"]["run_id"] for r in found] == [run_id]
    # The same name again, or none (an empty run_name), changes nothing.
    for body in ({"run_name": "renamed"}, {"run_name": ""}, {"status": "RUNNING"}):
        r = api.post(f"{M}/runs/update", json={"run_id": run_id, **body})
        assert r.status_code == 200, r.text
        assert _name(api, run_id) == "renamed"


def test_the_run_name_tag_after_creation_renames_the_run(api: TestClient) -> None:
    run_id = _run(api, "first")
    r = api.post(f"{M}/runs/set-tag",
                 json={"run_id": run_id, "key": "mlflow.runName", "value": "by-tag"})
    assert r.status_code == 200, r.text
    assert _name(api, run_id) == "by-tag"
    r = api.post(f"{M}/runs/log-batch", json={
        "run_id": run_id, "tags": [{"key": "mlflow.runName", "value": "by-batch"},
                                   {"key": "team", "value": "rl"}],
        "metrics": [{"key": "acc", "value": 0.5, "timestamp": 1, "step": 1}]})
    assert r.status_code == 200, r.text
    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert (run["name"], run["tags"], set(run["latest"])) == ("by-batch", ["team=rl"], {"acc"})
    # An empty value is not a name: nothing changes (as MLflow's tag would be ignored here).
    r = api.post(f"{M}/runs/set-tag", json={"run_id": run_id, "key": "mlflow.runName",
                                            "value": ""})
    assert r.status_code == 200, r.text
    assert _name(api, run_id) == "by-batch"


def test_a_taken_name_is_a_400_and_nothing_is_written(api: TestClient) -> None:
    _run(api, "taken")
    run_id = _run(api, "mine")
    message = _error(api.post(f"{M}/runs/update", json={
        "run_id": run_id, "run_name": "taken", "status": "FINISHED"}), "RESOURCE_ALREADY_EXISTS")
    assert "'taken'" in message, message
    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert (run["name"], run["status"]) == ("mine", "running")  # not even the status
    _error(api.post(f"{M}/runs/set-tag", json={
        "run_id": run_id, "key": "mlflow.runName", "value": "taken"}), "RESOURCE_ALREADY_EXISTS")
    _error(api.post(f"{M}/runs/log-batch", json={
        "run_id": run_id, "tags": [{"key": "mlflow.runName", "value": "taken"}],
        "params": [{"key": "lr", "value": "1"}],
        "metrics": [{"key": "acc", "value": 0.5, "timestamp": 1, "step": 1}]}),
        "RESOURCE_ALREADY_EXISTS")
    run = api.get(f"/api/v1/runs/{run_id}").json()
    assert (run["name"], run["config"], run["latest"]) == ("mine", {}, {})
    # Another project's run of that name is no conflict.
    exp = api.post(f"{M}/experiments/create", json={"name": "other"}).json()["experiment_id"]
    other = api.post(f"{M}/runs/create", json={"experiment_id": exp, "run_name": "x"}).json()
    other_id = other["run"]["info"]["run_id"]
    r = api.post(f"{M}/runs/update", json={"run_id": other_id, "run_name": "taken"})
    assert r.status_code == 200 and _name(api, other_id) == "taken", r.text


def test_resuming_a_suffixed_run_under_its_asked_name_keeps_it(api: TestClient) -> None:
    """`mlflow.start_run(run_id=..., run_name="grpo")` sends run_name on resume: a run that was
    created as "grpo (2)" (another run had "grpo") keeps its name instead of failing the resume."""
    first, second = _run(api, "grpo"), _run(api, "grpo")
    assert _name(api, second) == "grpo (2)"
    r = api.post(f"{M}/runs/update", json={"run_id": second, "run_name": "grpo",
                                           "status": "RUNNING"})
    assert r.status_code == 200, r.text
    assert (_name(api, first), _name(api, second)) == ("grpo", "grpo (2)")
    r = api.post(f"{M}/runs/set-tag", json={"run_id": second, "key": "mlflow.runName",
                                            "value": "grpo"})
    assert r.status_code == 200 and _name(api, second) == "grpo (2)", r.text


def test_bad_names_are_refused_with_the_run_name_checks(api: TestClient) -> None:
    run_id = _run(api, "keep")
    for bad in ("r" * 201, "a\x00b", "   "):
        _error(api.post(f"{M}/runs/update", json={"run_id": run_id, "run_name": bad}),
               "INVALID_PARAMETER_VALUE")
        _error(api.post(f"{M}/runs/set-tag", json={"run_id": run_id, "key": "mlflow.runName",
                                                   "value": bad}), "INVALID_PARAMETER_VALUE")
    assert _name(api, run_id) == "keep"
    r = api.post(f"{M}/runs/update", json={"run_id": run_id, "run_name": "r" * 200})
    assert r.status_code == 200 and _name(api, run_id) == "r" * 200, r.text
