"""The MLflow endpoint's `scalewatch.group` tag sets a run's group (SQLite and PostgreSQL); a
plain `group` tag stays a label."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import make_app

M = "/api/2.0/mlflow"


def test_scalewatch_group_tag(database_url: str) -> None:
    app = make_app(database_url)
    with TestClient(app) as client:
        exp_id = client.post(f"{M}/experiments/create", json={"name": "proj"}).json()[
            "experiment_id"]
        made = client.post(f"{M}/runs/create", json={
            "experiment_id": exp_id, "run_name": "seed0",
            "tags": [{"key": "scalewatch.group", "value": "cispo-768"}]})
        assert made.status_code == 200, made.text
        run_id = made.json()["run"]["info"]["run_id"]
        tags = {t["key"]: t["value"] for t in made.json()["run"]["data"]["tags"]}
        assert tags["scalewatch.group"] == "cispo-768"
        assert client.get(f"/api/v1/runs/{run_id}").json()["group"] == "cispo-768"

        r = client.post(f"{M}/runs/set-tag", json={"run_id": run_id, "key": "scalewatch.group",
                                                   "value": "grpo"})
        assert r.status_code == 200, r.text
        r = client.post(f"{M}/runs/set-tag", json={"run_id": run_id, "key": "group",
                                                   "value": "a-label"})
        run = client.get(f"/api/v1/runs/{run_id}").json()
        assert run["group"] == "grpo" and run["tags"] == ["group=a-label"]
        groups = client.get("/api/v1/groups", params={"project": "proj"}).json()["groups"]
        assert [(g["name"], g["runs"]) for g in groups] == [("grpo", [int(run_id)])]

        bad = client.post(f"{M}/runs/set-tag", json={"run_id": run_id, "key": "scalewatch.group",
                                                     "value": "x" * 101})
        assert (bad.status_code, bad.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
        assert "scalewatch.group" in bad.json()["message"]
        r = client.post(f"{M}/runs/set-tag", json={"run_id": run_id, "key": "scalewatch.group",
                                                   "value": ""})  # empty: out of its group
        assert r.status_code == 200 and client.get(f"/api/v1/runs/{run_id}").json()["group"] is None
    app.state.store.engine.dispose()
