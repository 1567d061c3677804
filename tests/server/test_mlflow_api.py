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


def test_a_param_is_logged_once_and_a_changed_value_is_refused_whole(authed: tuple) -> None:
    """MLflow refuses a new value for a logged param (INVALID_PARAMETER_VALUE); here it was
    accepted and overwrote the old one, so a resumed run with a changed learning rate kept
    only the new value. Refused whole: the batch's metrics and tags are not written either."""
    client, tokens = authed
    h = _bearer(tokens["write"])
    run_id = _new_run(client, h)
    url = f"{M}/runs/log-batch"
    assert client.post(url, json={"run_id": run_id, "params": [
        {"key": "lr", "value": "0.1"}]}, headers=h).status_code == 200
    # The same value again (a resumed run, another rank) is fine.
    assert client.post(f"{M}/runs/log-parameter", json={
        "run_id": run_id, "key": "lr", "value": "0.1"}, headers=h).status_code == 200
    changed = client.post(url, json={
        "run_id": run_id, "params": [{"key": "lr", "value": "0.2"}],
        "tags": [{"key": "team", "value": "rl"}],
        "metrics": [{"key": "acc", "value": 0.5, "timestamp": 1, "step": 1}]}, headers=h)
    assert (changed.status_code, changed.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    assert "key='lr'" in changed.json()["message"] and "'0.2'" in changed.json()["message"]
    one = client.post(f"{M}/runs/log-parameter", json={
        "run_id": run_id, "key": "lr", "value": "0.3"}, headers=h)
    assert one.status_code == 400
    twice = client.post(url, json={"run_id": run_id, "params": [
        {"key": "bs", "value": "1"}, {"key": "bs", "value": "2"}]}, headers=h)
    assert twice.status_code == 400  # two values of one key in one batch
    run = client.get(f"/api/v1/runs/{run_id}", headers=h).json()
    assert run["config"] == {"lr": "0.1"} and run["tags"] == [] and run["latest"] == {}
    # A value stored as a number (the REST API's config) is the param of its str().
    rest = client.post("/api/v1/runs", json={"project": "proj", "name": "rest",
                                             "config": {"lr": 0.001}}, headers=h).json()
    assert client.post(url, json={"run_id": str(rest["id"]), "params": [
        {"key": "lr", "value": "0.001"}]}, headers=h).status_code == 200


def test_batch_limits_are_mlflows_100_params_and_100_tags_not_100_together(
        authed: tuple) -> None:
    """The official client pairs up to 100 params with up to 100 tags in one log-batch, and
    start_run(tags=...) sends its 4 system tags beside the user's: both were refused."""
    client, tokens = authed
    h = _bearer(tokens["write"])
    exp = client.post(f"{M}/experiments/create", json={"name": "proj"}, headers=h).json()
    tags = [{"key": f"t{i}", "value": "v"} for i in range(97)] + [
        {"key": f"mlflow.{k}", "value": "x"} for k in ("user", "source.name", "source.type",
                                                       "runName")]
    created = client.post(f"{M}/runs/create", json={"experiment_id": exp["experiment_id"],
                                                    "tags": tags}, headers=h)
    assert created.status_code == 200, created.text
    run_id = _new_run(client, h, name="batch")
    params = [{"key": f"p{i}", "value": "1"} for i in range(60)]
    some_tags = [{"key": f"t{i}", "value": "v"} for i in range(40)]
    got = client.post(f"{M}/runs/log-batch", json={"run_id": run_id, "params": params,
                                                   "tags": some_tags}, headers=h)
    assert got.status_code == 200, got.text
    over = client.post(f"{M}/runs/log-batch", json={"run_id": run_id, "tags": [
        {"key": f"x{i}", "value": "v"} for i in range(101)]}, headers=h)
    assert (over.status_code, over.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    total = client.post(f"{M}/runs/log-batch", json={"run_id": run_id, "metrics": [
        {"key": "m", "value": 1.0, "timestamp": 1, "step": i} for i in range(950)],
        "params": [{"key": f"q{i}", "value": "1"} for i in range(60)]}, headers=h)
    assert total.status_code == 400 and "in total" in total.json()["message"]


@pytest.mark.parametrize("step", [[], {}, "", False, "x", 1.5])
def test_a_malformed_step_is_refused_not_read_as_step_0(authed: tuple, step: object) -> None:
    client, tokens = authed
    h = _bearer(tokens["write"])
    run_id = _new_run(client, h)
    got = client.post(f"{M}/runs/log-metric", json={
        "run_id": run_id, "key": "acc", "value": 0.5, "step": step, "timestamp": 1}, headers=h)
    assert (got.status_code, got.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    assert "step" in got.json()["message"]
    flag = client.post(f"{M}/runs/log-metric", json={
        "run_id": run_id, "key": "acc", "value": True, "step": 1, "timestamp": 1}, headers=h)
    assert flag.status_code == 400 and "value" in flag.json()["message"]
    # Absent is MLflow's step 0.
    ok = client.post(f"{M}/runs/log-metric", json={
        "run_id": run_id, "key": "acc", "value": 0.5, "timestamp": 1}, headers=h)
    assert ok.status_code == 200
    points = client.get(f"/api/v1/runs/{run_id}/points", params={"metric": "acc"},
                        headers=h).json()["points"]
    assert [p["step"] for p in points] == [0]


def test_history_gives_each_value_the_time_it_was_logged(authed: tuple) -> None:
    client, tokens = authed
    h = _bearer(tokens["write"])
    run_id = _new_run(client, h)
    client.post(f"{M}/runs/log-batch", json={"run_id": run_id, "metrics": [
        {"key": "acc", "value": 0.1, "timestamp": 1_700_000_000_123, "step": 1},
        {"key": "acc", "value": 0.2, "step": 2}]}, headers=h)
    hist = client.get(f"{M}/metrics/get-history", params={"run_id": run_id, "metric_key": "acc"},
                      headers=h).json()["metrics"]
    assert [(m["step"], m["timestamp"]) for m in hist] == [(1, 1_700_000_000_123), (2, 0)]


def test_guard_refusals_on_the_mlflow_routes_speak_mlflows_error_shape(authed: tuple) -> None:
    """A body too deep, too many objects or too large is refused before any route runs; under
    /api/2.0/mlflow the refusal was the REST API's `{"detail", "code"}`, which MLflow's
    client cannot read."""
    client, tokens = authed
    h = {**_bearer(tokens["write"]), "Content-Type": "application/json"}
    deep = client.post(f"{M}/runs/log-batch", content="[" * 100_000, headers=h)
    big = client.post(f"{M}/runs/log-batch", content=b"{}", headers={
        **h, "Content-Length": str(17 * 2**20)})
    for got, status in ((deep, 400), (big, 413)):
        assert got.status_code == status
        assert set(got.json()) == {"error_code", "message"} and got.json()["message"], got.json()
    # The REST API keeps its own shape.
    rest = client.post("/api/v1/runs", content="[" * 100_000, headers=h)
    assert {"detail", "code", "errors"} <= set(rest.json())
