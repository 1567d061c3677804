"""The MLflow-compatible endpoint in process (SQLite and PostgreSQL): error shapes, limits, auth
and the mapping. The real client runs against a live server in test_mlflow_live.py."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from scalewatch.server.domain.fit_metric import explain_fit_metric
from tests.conftest import make_app

M = "/api/2.0/mlflow"


@pytest.fixture
def authed(database_url: str) -> Iterator[tuple[TestClient, dict[str, str]]]:
    app = make_app(database_url, auth=True)
    tokens = {scope: app.state.store.create_token(f"t-{scope}", scope)[1]
              for scope in ("read", "write")}
    with TestClient(app) as client:
        yield client, tokens
    app.state.store.engine.dispose()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _basic(token: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"user:{token}".encode()).decode()}


def _new_run(client: TestClient, h: dict[str, str], name: str = "r", **extra: object) -> str:
    exp = client.post(f"{M}/experiments/create", json={"name": "proj"}, headers=h)
    exp_id = exp.json().get("experiment_id") or client.get(
        f"{M}/experiments/get-by-name", params={"experiment_name": "proj"}, headers=h
    ).json()["experiment"]["experiment_id"]
    got = client.post(f"{M}/runs/create", json={"experiment_id": exp_id, "run_name": name,
                                                **extra}, headers=h)
    assert got.status_code == 200, got.text
    return got.json()["run"]["info"]["run_id"]


def test_auth_bearer_and_basic_with_mlflow_error_shape(authed: tuple) -> None:
    client, tokens = authed
    url = f"{M}/experiments/get-by-name"
    missing = client.get(url, params={"experiment_name": "nope"})
    assert missing.status_code == 401
    assert missing.json()["error_code"] == "UNAUTHENTICATED"
    bad = client.get(url, params={"experiment_name": "nope"}, headers=_basic("sw_wrong"))
    assert (bad.status_code, bad.json()["error_code"]) == (401, "UNAUTHENTICATED")
    for headers in (_bearer(tokens["read"]), _basic(tokens["read"])):
        got = client.get(url, params={"experiment_name": "nope"}, headers=headers)
        assert got.status_code == 404
        assert got.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
        assert set(got.json()) == {"error_code", "message"}
    denied = client.post(f"{M}/experiments/create", json={"name": "x"},
                         headers=_basic(tokens["read"]))
    assert (denied.status_code, denied.json()["error_code"]) == (403, "PERMISSION_DENIED")
    # Basic auth stays an MLflow-route thing: the REST API takes bearer tokens only.
    assert client.get("/api/v1/runs", headers=_basic(tokens["read"])).status_code == 401


def test_default_experiment_and_unserved_calls(authed: tuple) -> None:
    client, tokens = authed
    h = _bearer(tokens["write"])
    got = client.get(f"{M}/experiments/get", params={"experiment_id": "0"}, headers=h)
    assert got.json()["experiment"]["name"] == "Default"
    for method, path in (("POST", f"{M}/logged-models"), ("GET", f"{M}/artifacts/list"),
                         ("POST", "/api/2.0/mlflow-artifacts/mpu/complete/x/y.bin"),
                         ("GET", f"{M}/runs/log-batch")):
        r = client.request(method, path, headers=h)
        assert (r.status_code, r.json()["error_code"]) == (404, "ENDPOINT_NOT_FOUND"), path


def test_log_batch_limits_nan_duplicates_and_tags(authed: tuple) -> None:
    client, tokens = authed
    h = _bearer(tokens["write"])
    run_id = _new_run(client, h, tags=[{"key": "mlflow.user", "value": "me"},
                                       {"key": "scalewatch.fit_metric", "value": "acc"}])
    too_many = [{"key": "m", "value": 1.0, "timestamp": 0, "step": i} for i in range(1001)]
    r = client.post(f"{M}/runs/log-batch", json={"run_id": run_id, "metrics": too_many}, headers=h)
    assert (r.status_code, r.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    params = [{"key": f"p{i}", "value": "1"} for i in range(101)]
    r = client.post(f"{M}/runs/log-batch", json={"run_id": run_id, "params": params}, headers=h)
    assert r.status_code == 400
    batch = {
        "run_id": run_id,
        "metrics": [
            {"key": "acc", "value": 0.1, "timestamp": 1, "step": 1},
            {"key": "acc", "value": 0.2, "timestamp": 2, "step": 1},  # same step: last wins
            {"key": "acc", "value": "NaN", "timestamp": 2, "step": 2},  # skipped, not an error
            {"key": "acc", "value": 0.3, "timestamp": 3, "step": 3},
        ],
        "params": [{"key": "lr", "value": "1e-6"}],
        "tags": [{"key": "team", "value": "rl"}, {"key": "mlflow.source.name", "value": "x"}],
    }
    r = client.post(f"{M}/runs/log-batch", json=batch, headers=h)
    assert r.status_code == 200, r.text
    run = client.get(f"/api/v1/runs/{run_id}", headers=h).json()
    assert run["config"] == {"lr": "1e-6"}
    assert run["tags"] == ["team=rl"]
    assert (run["fit_metric"], run["fit_metric_reason"]) == ("acc", "set for this run")
    hist = client.get(f"{M}/metrics/get-history", params={"run_id": run_id, "metric_key": "acc"},
                      headers=h).json()["metrics"]
    assert [(m["step"], m["value"]) for m in hist] == [(1, 0.2), (3, 0.3)]
    r = client.post(f"{M}/runs/update", json={"run_id": run_id, "status": "KILLED"}, headers=h)
    assert r.json()["run_info"]["status"] == "FAILED"
    missing = client.get(f"{M}/runs/get", params={"run_id": "999999"}, headers=h)
    assert (missing.status_code, missing.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")


def test_same_name_is_a_new_run_and_search_finds_it(authed: tuple) -> None:
    client, tokens = authed
    h = _bearer(tokens["write"])
    first, second = _new_run(client, h, "grpo"), _new_run(client, h, "grpo")
    assert first != second
    names = {client.get(f"/api/v1/runs/{i}", headers=h).json()["name"] for i in (first, second)}
    assert names == {"grpo", "grpo (2)"}
    exp_id = client.get(f"{M}/experiments/get-by-name", params={"experiment_name": "proj"},
                        headers=h).json()["experiment"]["experiment_id"]
    found = client.post(f"{M}/runs/search", headers=h, json={
        "experiment_ids": [exp_id], "filter": "attributes.run_name = 'grpo'"}).json()["runs"]
    assert [r["info"]["run_id"] for r in found] == [first]
    bad = client.post(f"{M}/runs/search", headers=h,
                      json={"experiment_ids": [exp_id], "filter": "metrics.acc > 1"})
    assert bad.json()["error_code"] == "INVALID_PARAMETER_VALUE"


@pytest.mark.parametrize(
    ("names", "chosen", "why"),
    [
        (["critic/score/mean", "val-core/gsm8k/acc/mean@8", "val-core/math/acc/mean@8"],
         "val-core/gsm8k/acc/mean@8", "verl validation accuracy"),
        (["critic/score/mean", "val-core/gsm8k/acc/mean_at_1"],
         "val-core/gsm8k/acc/mean_at_1", "verl validation accuracy"),
        (["reward", "eval_reward", "num_tokens"], "eval_reward", "TRL / HF eval reward"),
        (["train/reward", "validation/accuracy"], "validation/accuracy", "NeMo-RL"),
        (["reward/avg_raw_reward", "eval/gsm8k/avg_score"], "eval/gsm8k/avg_score", "SkyRL"),
        (["train/rollout/reward_mean", "eval/eval_math_pass1"], "eval/eval_math_pass1", "OpenRLHF"),
        (["progress/total_tokens", "eval/gsm8k/default/agent/avg@4"],
         "eval/gsm8k/default/agent/avg@4", "prime-rl"),
        (["reward_mean", "test_success_mean"], "test_success_mean", "PipelineRL"),
        (["critic/score/mean", "perf/total_num_tokens"], "critic/score/mean", "verl training"),
        (["loss"], "reward", "default"),
    ],
)
def test_fit_metric_recognised(names: list[str], chosen: str, why: str) -> None:
    metric, reason = explain_fit_metric(None, names)
    assert metric == chosen
    assert why in reason


def test_artifact_uploads_are_accepted_and_discarded_with_auth(authed: tuple) -> None:
    """`mlflow-artifacts:` URIs on runs; uploads need a write token, are not held to the JSON
    rule or the body cap (streamed and discarded), and nothing is listed or downloadable."""
    from scalewatch.server import limits

    client, tokens = authed
    run_id = _new_run(client, _bearer(tokens["write"]))
    info = client.get(f"{M}/runs/get", params={"run_id": run_id},
                      headers=_bearer(tokens["read"])).json()["run"]["info"]
    assert info["artifact_uri"].startswith("mlflow-artifacts:/")
    url = f"/api/2.0/mlflow-artifacts/artifacts/{info['artifact_uri'].split(':/', 1)[1]}/a.bin"
    body = b"\0" * (limits.MAX_BODY_BYTES + 1)
    octets = {"Content-Type": "application/octet-stream"}
    assert client.put(url, content=body, headers=octets).status_code == 401
    denied = client.put(url, content=b"x", headers=octets | _basic(tokens["read"]))
    assert (denied.status_code, denied.json()["error_code"]) == (403, "PERMISSION_DENIED")
    for headers in (_bearer(tokens["write"]), _basic(tokens["write"])):
        assert client.put(url, content=body, headers=octets | headers).status_code == 200
    read = _bearer(tokens["read"])
    listed = client.get("/api/2.0/mlflow-artifacts/artifacts", params={"path": "x"}, headers=read)
    assert listed.json() == {"files": []}
    got = client.get(url, headers=read)
    assert (got.status_code, got.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    assert "discards" in got.json()["message"]
    # Multipart uploads: "not supported", the answer that makes the client send one PUT.
    mpu = client.post("/api/2.0/mlflow-artifacts/mpu/create/x/y.bin", json={"path": "y.bin"},
                      headers=_bearer(tokens["write"]))
    assert mpu.status_code == 501 and mpu.json()["message"].startswith("Multipart upload is not")
    # The JSON-only rule still holds for every other MLflow call.
    other = client.post(f"{M}/runs/log-batch", content=b"x", headers=octets | read)
    assert other.status_code == 415
