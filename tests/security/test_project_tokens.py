"""Issue 35: project-scoped tokens on the MLflow-compatible API, in dashboard sessions and from
the CLI (the REST routes are in tests/server/test_auth.py's matrix). A token limited to P reads
and writes P; Q's experiments, runs and alerts do not exist for it, and Q's data stays as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.api.routes import mlflow
from scalewatch.server.scopes import AUTH_COOKIE
from tests.conftest import make_app
from tests.support.projects import World, two_projects

ML = "/api/2.0/mlflow"
Setup = tuple[Any, TestClient, World, World, dict[str, dict[str, str]]]


@pytest.fixture
def setup(database_url: str) -> Iterator[Setup]:
    # P-new: a project the token may create as an experiment
    yield from two_projects(database_url, ("P", "P-new"))


def _experiment(client: TestClient, w: World) -> str:
    r = client.get(f"{ML}/experiments/get-by-name", params={"experiment_name": w.project},
                   headers=w.admin)
    assert r.status_code == 200, r.text
    return str(r.json()["experiment"]["experiment_id"])


def _mlflow_cases(client: TestClient) -> dict[str, tuple[Callable[[World, bool], dict], int]]:
    """MLflow path -> (world, is_own -> payload), and the status another project's call gets."""

    def run(w: World, _own: bool) -> dict:
        return {"run_id": str(w.run)}

    metric = {"key": "m", "value": 0.5, "timestamp": 0, "step": 50}
    return {
        "/experiments/get-by-name": (lambda w, o: {"experiment_name": w.project}, 404),
        "/experiments/create": (lambda w, o: {"name": "P-new" if o else "Q-new"}, 403),
        "/experiments/get": (lambda w, o: {"experiment_id": _experiment(client, w)}, 404),
        "/runs/create": (lambda w, o: {"experiment_id": _experiment(client, w),
                                       "run_name": "ml"}, 404),
        "/runs/get": (run, 404),
        "/runs/update": (lambda w, o: {**run(w, o), "status": "RUNNING"}, 404),
        "/runs/log-batch": (lambda w, o: {**run(w, o), "metrics": [metric],
                                          "params": [{"key": "lr", "value": "1"}]}, 404),
        "/runs/log-metric": (lambda w, o: {**run(w, o), **metric}, 404),
        "/runs/log-parameter": (lambda w, o: {**run(w, o), "key": "k", "value": "v"}, 404),
        "/runs/set-tag": (lambda w, o: {**run(w, o), "key": "k", "value": "v"}, 404),
        "/runs/search": (lambda w, o: {"experiment_ids": [_experiment(client, w)]}, 200),
        "/metrics/get-history": (lambda w, o: {**run(w, o), "metric_key": "m"}, 404),
    }


def test_every_mlflow_call_keeps_a_scoped_token_to_its_projects(setup: Setup) -> None:
    _, client, own, other, scoped = setup
    cases = _mlflow_cases(client)
    for method, path, scope, _handler in mlflow._ROUTES:
        assert path in cases, f"no project case for MLflow {path}: add one"
        build, refused = cases[path]
        h = scoped[scope]

        def call(w: World, is_own: bool, method: str = method, path: str = path,
                 build: Callable = build, h: dict = h) -> Any:
            payload = build(w, is_own)
            if method == "GET":
                return client.get(ML + path, params=payload, headers=h)
            return client.post(ML + path, json=payload, headers=h)

        before = other.snapshot()
        r = call(other, False)
        assert r.status_code == refused, (path, r.status_code, r.text)
        if refused == 404:
            assert r.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST", (path, r.text)
        elif refused == 403:
            assert r.json()["error_code"] == "PERMISSION_DENIED", (path, r.text)
        else:  # a search: answered, without the other project's runs
            assert r.json()["runs"] == [], (path, r.text)
        assert other.snapshot() == before, (path, "changed another project's data")
        r = call(own, True)
        assert r.status_code == 200, (path, r.status_code, r.text)
    # the Default experiment ("0") is a project too: not one of this token's
    r = client.post(f"{ML}/runs/create", json={"experiment_id": "0"}, headers=scoped["write"])
    assert r.status_code == 403 and r.json()["error_code"] == "PERMISSION_DENIED", r.text
    both = [_experiment(client, own), _experiment(client, other), "0"]
    r = client.post(f"{ML}/runs/search", json={"experiment_ids": both}, headers=scoped["read"])
    found = {int(x["info"]["run_id"]) for x in r.json()["runs"]}
    assert own.run in found and other.run not in found, r.text


def _login(client: TestClient, headers: dict[str, str]) -> None:
    client.cookies.clear()
    token = headers["Authorization"].split(" ", 1)[1]
    r = client.post("/login", data={"token": token, "next": "/dashboard/"},
                    follow_redirects=False)
    assert r.status_code == 303 and client.cookies.get(AUTH_COOKIE), r.text


def _out(r: Any) -> str:
    assert r.status_code in (200, 204), r.text
    return json.dumps(r.json()["response"]) if r.status_code == 200 else ""


def test_a_scoped_dashboard_session_sees_only_its_projects(setup: Setup) -> None:
    app, client, own, other, scoped = setup
    _login(client, scoped["read"])
    assert client.get(f"/dashboard/run/{other.run}").status_code == 200  # the page shell
    # Runs page: the table and the project list hold P only, even when Q is asked for.
    runs = _out(dash_call(client, "runs-table", {"runs-view.value": "runs"}))
    assert f"/dashboard/run/{own.run}" in runs and f"/dashboard/run/{other.run}" not in runs
    assert '"value": "P"' in runs and '"value": "Q"' not in runs
    asked_q = _out(dash_call(client, "runs-table", {"runs-project.value": "Q",
                                                    "runs-view.value": "runs"}))
    assert f"/dashboard/run/{other.run}" not in asked_q
    # Run page: Q's run does not exist for this session; P's renders.
    seen = _out(dash_call(client, "run-graph", {"run-id.data": other.run}))
    assert "does not exist" in seen
    assert "does not exist" not in _out(dash_call(client, "run-graph", {"run-id.data": own.run}))
    # Group page of Q: not there.
    def members(project: str) -> list:
        got = _out(dash_call(client, "grp-members", {
            "grp-key.data": {"project": project, "group": "g", "metric": None}}))
        return list(json.loads(got)["grp-members"]["data"])

    assert members("Q") == [] and len(members("P")) == 1
    # Alerts page and the rules panel: P's only.
    alerts = _out(dash_call(client, "alerts-table", {"alerts-state.value": "active"}))
    ids = [row["id"] for row in json.loads(alerts)["alerts-table"]["data"]]
    assert ids == [own.alert], alerts
    rules = _out(dash_call(client, "rules-table", {}))
    assert [r["id"] for r in json.loads(rules)["rules-table"]["data"]] == [own.rule], rules
    # Compare: another project's run is missing; the project's settings panel stays hidden.
    cmp_other = _out(dash_call(client, "cmp-graph", {"cmp-ids.data": [other.run]}))
    assert f"run {other.run} not found" in cmp_other or "not exist" in cmp_other, cmp_other
    cmp_own = json.loads(_out(dash_call(client, "cmp-graph", {"cmp-ids.data": [own.run]})))
    assert cmp_own["cmp-graph"]["figure"]["data"], cmp_own
    for project, shown in (("Q", False), ("P", True)):
        panel = json.loads(_out(dash_call(client, "runs-settings",
                                          {"runs-project.value": project})))
        assert (panel["runs-settings"]["style"] != {"display": "none"}) is shown, panel
    deliveries = _out(dash_call(client, "alerts-deliveries", {
        "alerts-table.selected_row_ids": [other.alert], "alerts-acked.data": 0}))
    assert "not found" in deliveries or "No delivery" in deliveries


def test_a_scoped_dashboard_session_cannot_acknowledge_another_projects_alert(
    setup: Setup,
) -> None:
    app, client, own, other, scoped = setup
    _login(client, scoped["write"])

    def ack(alert_id: int) -> str:
        return _out(dash_call(client, "alerts-msg", {
            "alerts-table.selected_row_ids": [alert_id], "alerts-acked.data": 0},
            changed=["alerts-ack.n_clicks"]))

    assert "not found" in ack(other.alert)
    assert app.state.store.get_alert(other.alert).state == "open"
    assert "acknowledged" in ack(own.alert)
    assert app.state.store.get_alert(own.alert).state == "acknowledged"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer_client.cli", *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ})


def test_cli_token_create_with_projects(database_url: str) -> None:
    out = run_cli("token", "create", "--scope", "write", "--name", "team-p", "--project", "P",
                  "--project", "P2", "--database-url", database_url)
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert "projects P, P2" in out.stderr
    app = make_app(database_url, auth=True)
    h = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as client:
        for project, status in (("P", 201), ("P2", 201), ("Q", 403)):
            r = client.post("/api/v1/runs", json={"project": project, "name": "r"}, headers=h)
            assert r.status_code == status, (project, r.text)
    app.state.store.engine.dispose()
    listed = run_cli("token", "list", "--database-url", database_url)
    assert "team-p, projects P, P2" in listed.stdout, listed.stdout
    bad = run_cli("token", "create", "--name", "x", "--project", "a\x01" * 200,
                  "--database-url", database_url)
    assert bad.returncode == 2 and "not a project name" in bad.stderr, bad.stderr


def _create_rule(client: TestClient, project: str) -> str:
    """The New rule form's Create button (asymptote_drop over every run of `project`)."""
    deps = client.get("/dashboard/_dash-dependencies").json()
    dep = next(d for d in deps if "rule-create-msg.children" in d["output"])
    values = {"rule-project": project, "rule-watches": "every", "rule-kind": "asymptote_drop",
              "rule-create": 1, "rules-changed": 0}

    def item(i: dict) -> Any:
        if str(i["id"]).startswith("{"):  # the params' pattern-matching states: none here
            return []
        return {**i, "value": values.get(i["id"])}

    body = {"output": dep["output"],
            "outputs": [{"id": "rule-create-msg", "property": "children"},
                        {"id": "rules-changed", "property": "data"}],
            "inputs": [item(i) for i in dep["inputs"]], "state": [item(i) for i in dep["state"]],
            "changedPropIds": ["rule-create.n_clicks"]}
    r = client.post("/dashboard/_dash-update-component", json=body)
    return _out(r)


def test_a_scoped_dashboard_session_cannot_make_rules_for_another_project(setup: Setup) -> None:
    app, client, own, other, scoped = setup
    _login(client, scoped["write"])
    before = app.state.store.list_alert_rules(project="Q")
    said = _create_rule(client, "Q")
    assert "rule-create-bad" in said and "not one of them" in said, said
    assert app.state.store.list_alert_rules(project="Q") == before
    assert "rule-create-ok" in _create_rule(client, "P")
    options = _out(dash_call(client, "rule-watches", {"rule-project.value": "Q"}))
    assert f"run:{other.run}" not in options and "group:g" not in options, options
    projects = json.loads(_out(dash_call(client, "rule-project", {"rules-new.open": True})))
    assert projects["rule-project"]["options"] == ["P"], projects


def test_0013_keeps_existing_tokens_unlimited(empty_database_url: str) -> None:
    """Upgrading a database with tokens (0012 -> head): they keep reaching every project, and
    the column round-trips a list on both databases; downgrading drops it again."""
    from sqlalchemy import create_engine, inspect, text

    from scalewatch.server.db.migrate import upgrade
    from scalewatch.server.store import SqlStore
    from scalewatch.server.store.tokens_sql import hash_token

    engine = create_engine(empty_database_url)
    upgrade(engine, "0012")
    assert "projects" not in {c["name"] for c in inspect(engine).get_columns("api_tokens")}
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO api_tokens (name, scope, token_hash, prefix, created_at, revoked)"
            " VALUES ('old', 'write', :h, 'sw_old', '2026-01-01 00:00:00', false)"),
            {"h": hash_token("sw_old-token")})
    upgrade(engine)
    store = SqlStore(engine)
    old = store.lookup_token("sw_old-token")
    assert old is not None and old.projects is None
    info, token = store.create_token("team", "read", ["P", "Q", "P"])
    found = store.lookup_token(token)
    assert info.projects == ["P", "Q"] and found is not None and found.projects == ["P", "Q"]
    from alembic import command

    from scalewatch.server.db.migrate import alembic_config

    command.downgrade(alembic_config(engine), "0012")
    assert "projects" not in {c["name"] for c in inspect(engine).get_columns("api_tokens")}
    engine.dispose()


def test_the_scoped_store_closes_what_it_has_no_rule_for(store: Any) -> None:
    """A store method without a project rule (tokens, the refit queue, ...) is refused, not
    passed through: a method added later stays closed until it is given its rule."""
    from scalewatch.server.store.scoped import ProjectDenied, ScopedStore

    limited = ScopedStore(store, ["P"])
    for name in ("create_token", "list_tokens", "claim_dirty_series", "session", "new_method"):
        with pytest.raises(ProjectDenied):
            getattr(limited, name)
    assert limited.dialect == store.dialect and not hasattr(limited, "__deepcopy__")
