"""The MLflow-compatible API takes the REST API's input rules (SQLite and PostgreSQL): every text
passes the same checks, list inputs are capped, numbers out of range and page tokens the server
never gave out are 400s in MLflow's error shape, and a refused request stores nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from scalewatch.server import limits
from scalewatch.server.db.models import Project
from tests.security.conftest import Authed

M = "/api/2.0/mlflow"
BAD_TEXTS = {
    "lone surrogate": "a\udfffb",
    "NUL": "a\x00b",
}


def _post(authed: Authed, path: str, body: dict[str, Any] | str) -> Any:
    """POST raw JSON: json.dumps keeps "\\udfff" as an escape, and `Infinity` as the token."""
    raw = body if isinstance(body, str) else json.dumps(body)
    return authed.client.post(
        f"{M}{path}", content=raw.encode(),
        headers={**authed.h("write"), "Content-Type": "application/json"},
    )


def _run(authed: Authed, name: str = "r") -> str:
    exp = authed.client.get(f"{M}/experiments/get-by-name", headers=authed.h("write"),
                            params={"experiment_name": "Default"}).json()["experiment"]
    got = _post(authed, "/runs/create", {"experiment_id": exp["experiment_id"], "run_name": name})
    assert got.status_code == 200, got.text
    return str(got.json()["run"]["info"]["run_id"])


def _refused(response: Any) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE", response.text
    assert set(response.json()) == {"error_code", "message"}


def _everything_still_reads(authed: Authed, run_id: str) -> dict[str, Any]:
    """The run list, the run, MLflow's runs/get and runs/search all answer (a stored lone
    surrogate made each of them a 500)."""
    h = authed.h("read")
    assert authed.client.get("/api/v1/runs", headers=h).status_code == 200
    run = authed.client.get(f"/api/v1/runs/{run_id}", headers=h)
    assert run.status_code == 200, run.text
    assert authed.client.get(f"{M}/runs/get", params={"run_id": run_id}, headers=h
                             ).status_code == 200
    found = authed.client.post(f"{M}/runs/search", json={"experiment_ids": ["0"]}, headers=h)
    assert found.status_code == 200, found.text
    return dict(run.json())


def _project_names(authed: Authed) -> set[str]:
    with authed.app.state.store.session() as s:
        return set(s.scalars(select(Project.name)).all())


def _text_requests(run_id: str, bad: str) -> dict[str, tuple[str, dict[str, Any]]]:
    kv = {"key": "k", "value": "v"}
    return {
        "param value": ("/runs/log-parameter", {"run_id": run_id, "key": "k", "value": bad}),
        "param key": ("/runs/log-parameter", {"run_id": run_id, "key": bad, "value": "v"}),
        "tag value": ("/runs/set-tag", {"run_id": run_id, "key": "k", "value": bad}),
        "tag key": ("/runs/set-tag", {"run_id": run_id, "key": bad, "value": "v"}),
        "batch param": ("/runs/log-batch", {"run_id": run_id, "params": [kv, {"key": bad}]}),
        "batch tag": ("/runs/log-batch", {"run_id": run_id, "tags": [kv, {"key": "t",
                                                                          "value": bad}]}),
        "group tag": ("/runs/set-tag", {"run_id": run_id, "key": "scalewatch.group",
                                        "value": bad}),
        "fit metric tag": ("/runs/set-tag", {"run_id": run_id, "key": "scalewatch.fit_metric",
                                             "value": bad}),
        "metric key": ("/runs/log-metric", {"run_id": run_id, "key": bad, "value": 1.0,
                                            "timestamp": 1, "step": 1}),
        "run name": ("/runs/create", {"experiment_id": "0", "run_name": bad}),
        "run name tag": ("/runs/create", {"experiment_id": "0",
                                          "tags": [{"key": "mlflow.runName", "value": bad}]}),
        "experiment name": ("/experiments/create", {"name": bad}),
        "search filter": ("/runs/search", {"experiment_ids": ["0"],
                                           "filter": f"attributes.run_name = '{bad}'"}),
        "search experiment id": ("/runs/search", {"experiment_ids": [bad]}),
    }


@pytest.mark.parametrize("kind", list(BAD_TEXTS))
def test_every_mlflow_text_passes_the_rest_text_checks(authed_db: Authed, kind: str) -> None:
    run_id = _run(authed_db)
    before = _everything_still_reads(authed_db, run_id)
    runs_before = authed_db.client.get("/api/v1/runs", headers=authed_db.h("read")).json()
    for what, (path, body) in _text_requests(run_id, BAD_TEXTS[kind]).items():
        response = _post(authed_db, path, body)
        _refused(response)
        assert response.status_code == 400, what
    after = _everything_still_reads(authed_db, run_id)
    assert (after["config"], after["tags"], after["group"], after["fit_metric"]) == (
        before["config"], before["tags"], before["group"], before["fit_metric"])
    runs_after = authed_db.client.get("/api/v1/runs", headers=authed_db.h("read")).json()
    assert runs_after["total"] == runs_before["total"]  # no run was created
    assert _project_names(authed_db) == {"Default"}


def test_texts_over_mlflow_limits_are_refused(authed_db: Authed) -> None:
    run_id = _run(authed_db)
    long_key = "k" * (limits.MAX_MLFLOW_KEY_LENGTH + 1)
    for path, body in [
        ("/runs/log-parameter", {"run_id": run_id, "key": long_key, "value": "v"}),
        ("/runs/log-parameter", {"run_id": run_id, "key": "k",
                                 "value": "v" * (limits.MAX_MLFLOW_PARAM_VALUE_LENGTH + 1)}),
        ("/runs/set-tag", {"run_id": run_id, "key": "k",
                           "value": "v" * (limits.MAX_MLFLOW_TAG_VALUE_LENGTH + 1)}),
        ("/runs/create", {"experiment_id": "0", "run_name": "r" * (limits.MAX_NAME_LENGTH + 1)}),
        ("/experiments/create", {"name": "e" * (limits.MAX_NAME_LENGTH + 1)}),
    ]:
        _refused(_post(authed_db, path, body))
    # At the limits: accepted (MLflow's own client never sends more).
    ok = _post(authed_db, "/runs/log-parameter", {
        "run_id": run_id, "key": "k" * limits.MAX_MLFLOW_KEY_LENGTH,
        "value": "v" * limits.MAX_MLFLOW_PARAM_VALUE_LENGTH})
    assert ok.status_code == 200, ok.text


def test_a_refused_batch_stores_none_of_its_parts(authed_db: Authed) -> None:
    run_id = _run(authed_db)
    body = {
        "run_id": run_id,
        "metrics": [{"key": "acc", "value": 0.5, "timestamp": 1, "step": 1}],
        "params": [{"key": "lr", "value": "1e-6"}],
        "tags": [{"key": "team", "value": "rl"}, {"key": "bad", "value": "\udfff"}],
    }
    _refused(_post(authed_db, "/runs/log-batch", body))
    run = _everything_still_reads(authed_db, run_id)
    assert (run["config"], run["tags"], run["latest"]) == ({}, [], {})


def test_nul_in_a_url_path_is_refused_everywhere(authed_db: Authed) -> None:
    c, h = authed_db.client, authed_db.h("admin")
    patched = c.patch("/api/v1/projects/nope%00x", json={"fit_metric": "acc"}, headers=h)
    assert patched.status_code == 422, patched.text
    assert "NUL" in patched.json()["detail"]
    assert not any("nope" in name for name in _project_names(authed_db))
    for path in ("/api/v1/runs/1%00", "/api/v1/projects/x%00y", "/dashboard/x%00"):
        assert c.get(path, headers=h).status_code == 422, path
    mlflow = c.get(f"{M}/experiments/get%00", params={"experiment_id": "0"}, headers=h)
    assert (mlflow.status_code, mlflow.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")
    query = c.get(f"{M}/experiments/get-by-name?experiment_name=a%00b", headers=h)
    assert (query.status_code, query.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")


@pytest.mark.parametrize(
    ("what", "metric"),
    [
        ("step Infinity", '{"key": "m", "value": 1, "timestamp": 1, "step": Infinity}'),
        ("step -Infinity", '{"key": "m", "value": 1, "timestamp": 1, "step": -Infinity}'),
        ("step 10**400", '{"key": "m", "value": 1, "timestamp": 1, "step": 1%s}' % ("0" * 400)),
        ("value 10**400", '{"key": "m", "value": 1%s, "timestamp": 1, "step": 1}' % ("0" * 400)),
        ("timestamp 10**400", '{"key": "m", "value": 1, "timestamp": 1%s, "step": 1}'
         % ("0" * 400)),
        ("timestamp Infinity", '{"key": "m", "value": 1, "timestamp": Infinity, "step": 1}'),
    ],
)
def test_numbers_out_of_range_are_400_not_500(authed_db: Authed, what: str, metric: str) -> None:
    run_id = _run(authed_db)
    for path, body in [
        ("/runs/log-batch", f'{{"run_id": "{run_id}", "metrics": [{metric}]}}'),
        ("/runs/log-metric", f'{{"run_id": "{run_id}", {metric[1:]}'),
    ]:
        _refused(_post(authed_db, path, body))
    assert _everything_still_reads(authed_db, run_id)["latest"] == {}, what


def test_page_tokens_and_max_results_out_of_range_are_400(authed_db: Authed) -> None:
    run_id = _run(authed_db)
    logged = _post(authed_db, "/runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "m", "value": 0.1 * s, "timestamp": 1, "step": s} for s in range(5)]})
    assert logged.status_code == 200, logged.text
    h = authed_db.h("read")
    history = f"{M}/metrics/get-history"
    for token in ("9" * 30, "9" * 400, "9" * 5000, "-1", "x", "1e3"):
        got = authed_db.client.get(history, headers=h, params={
            "run_id": run_id, "metric_key": "m", "page_token": token})
        _refused(got)
    for max_results in ("0", "-5", str(limits.MAX_MLFLOW_SEARCH_RESULTS + 1), "9" * 400):
        got = authed_db.client.get(history, headers=h, params={
            "run_id": run_id, "metric_key": "m", "max_results": max_results})
        _refused(got)
        searched = authed_db.client.post(f"{M}/runs/search", headers=h, json={
            "experiment_ids": ["0"], "max_results": max_results})
        _refused(searched)
    searched = authed_db.client.post(f"{M}/runs/search", headers=h, json={
        "experiment_ids": ["0"], "page_token": "9" * 400})
    _refused(searched)
    # The client's own paging still works: 2 points a page, every step once.
    steps: list[int] = []
    token = ""
    for _ in range(10):
        page = authed_db.client.get(history, headers=h, params={
            "run_id": run_id, "metric_key": "m", "max_results": "2", "page_token": token}).json()
        steps += [m["step"] for m in page["metrics"]]
        token = page.get("next_page_token", "")
        if not token:
            break
    assert steps == list(range(5))


def test_list_inputs_are_capped(authed_db: Authed) -> None:
    h = authed_db.h("read")
    too_many = [str(i) for i in range(limits.MAX_MLFLOW_SEARCH_EXPERIMENTS + 1)]
    searched = authed_db.client.post(f"{M}/runs/search", headers=h,
                                     json={"experiment_ids": too_many})
    _refused(searched)
    assert str(limits.MAX_MLFLOW_SEARCH_EXPERIMENTS) in searched.json()["message"]
    at_cap = authed_db.client.post(f"{M}/runs/search", headers=h,
                                   json={"experiment_ids": too_many[:-1]})
    assert at_cap.status_code == 200, at_cap.text
    long_filter = "attributes.run_name = '%s'" % ("x" * limits.MAX_MLFLOW_FILTER_LENGTH)
    _refused(authed_db.client.post(f"{M}/runs/search", headers=h,
                                   json={"experiment_ids": ["0"], "filter": long_filter}))
    tags = [{"key": f"t{i}", "value": "v"} for i in range(limits.MAX_MLFLOW_RUN_TAGS + 1)]
    _refused(_post(authed_db, "/runs/create", {"experiment_id": "0", "tags": tags}))
    assert authed_db.client.get("/api/v1/runs", headers=h).json()["total"] == 0


def test_search_pages_across_experiments_return_every_run_once(authed_db: Authed) -> None:
    """runs/search pages in SQL now (it read every run of every experiment per call): the
    pages, followed by their tokens, still hold each run exactly once."""
    c, h = authed_db.client, authed_db.h("write")
    exp_ids = []
    for name in ("e1", "e2", "e3"):
        exp_ids.append(_post(authed_db, "/experiments/create", {"name": name}).json()[
            "experiment_id"])
    made = set()
    for exp_id, n in zip(exp_ids, (3, 0, 4), strict=True):
        for i in range(n):
            got = _post(authed_db, "/runs/create", {"experiment_id": exp_id, "run_name": f"r{i}"})
            made.add(got.json()["run"]["info"]["run_id"])
    for page_size in (1, 2, 3, 7, 100):
        seen: list[str] = []
        token = None
        for _ in range(20):
            body: dict[str, Any] = {"experiment_ids": exp_ids + ["999999"],
                                    "max_results": page_size}
            if token:
                body["page_token"] = token
            page = c.post(f"{M}/runs/search", json=body, headers=h).json()
            assert len(page["runs"]) <= page_size
            seen += [r["info"]["run_id"] for r in page["runs"]]
            token = page.get("next_page_token")
            if not token:
                break
        assert sorted(seen) == sorted(made), page_size
    named = c.post(f"{M}/runs/search", headers=h, json={
        "experiment_ids": exp_ids, "filter": "tags.mlflow.runName = 'r3'"}).json()["runs"]
    assert [r["info"]["run_name"] for r in named] == ["r3"]


@pytest.mark.parametrize("odd", ["²", "١", "1²", "𝟏"])
def test_ids_of_non_ascii_digits_name_nothing(authed_db: Authed, odd: str) -> None:
    """"²".isdigit() is true and int("²") raises: a run or experiment id of such digits was a
    500; "١" (an Arabic-Indic one) was int 1, an alias of run 1 and experiment 1. Ids are ASCII
    digits: anything else names no run and no experiment."""
    run_id = _run(authed_db)
    assert run_id == "1"
    h = authed_db.h("write")
    got = authed_db.client.get(f"{M}/runs/get", params={"run_id": odd}, headers=h)
    assert (got.status_code, got.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    got = authed_db.client.get(f"{M}/experiments/get", params={"experiment_id": odd}, headers=h)
    assert (got.status_code, got.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    logged = _post(authed_db, "/runs/log-batch", {"run_id": odd, "metrics": [
        {"key": "m", "value": 0.5, "timestamp": 1, "step": 1}]})
    assert (logged.status_code, logged.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    created = _post(authed_db, "/runs/create", {"experiment_id": odd, "run_name": "x"})
    assert (created.status_code, created.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    found = authed_db.client.post(f"{M}/runs/search", json={"experiment_ids": [odd]}, headers=h)
    assert (found.status_code, found.json()) == (200, {"runs": []})
    assert _everything_still_reads(authed_db, run_id)["latest"] == {}


def test_a_fractional_step_is_refused_not_truncated(authed_db: Authed) -> None:
    """A step of 1.7 was stored at step 1 (int() truncates), overwriting what step 1 held.
    MLflow's own server refuses it (a step is an int64); so does the REST API. 2.0 is step 2."""
    run_id = _run(authed_db)
    first = _post(authed_db, "/runs/log-metric", {"run_id": run_id, "key": "m", "value": 0.1,
                                                  "timestamp": 1, "step": 1})
    assert first.status_code == 200, first.text
    for path, body in [
        ("/runs/log-batch", {"run_id": run_id, "metrics": [
            {"key": "m", "value": 0.9, "timestamp": 1, "step": 1.7}]}),
        ("/runs/log-metric", {"run_id": run_id, "key": "m", "value": 0.9, "timestamp": 1,
                              "step": 1.7}),
    ]:
        refused = _post(authed_db, path, body)
        _refused(refused)
        assert "step" in refused.json()["message"]
    whole = _post(authed_db, "/runs/log-metric", {"run_id": run_id, "key": "m", "value": 0.2,
                                                  "timestamp": 1, "step": 2.0})
    assert whole.status_code == 200, whole.text
    history = authed_db.client.get(f"{M}/metrics/get-history", headers=authed_db.h("read"),
                                   params={"run_id": run_id, "metric_key": "m"}).json()
    assert [(m["step"], m["value"]) for m in history["metrics"]] == [(1, 0.1), (2, 0.2)]
