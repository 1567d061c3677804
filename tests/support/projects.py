"""Two projects' worth of data for the project-scoped token tests (REST, MLflow, dashboard)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class World:
    """One project's runs, alert rule and alert, made with an unscoped admin token."""

    def __init__(self, app: Any, client: Any, admin: dict[str, str], project: str) -> None:
        self.app, self.client, self.admin, self.project = app, client, admin, project
        self.run = self.new_run("r")
        pts = [{"step": s, "compute": float(s), "metrics": {"m": 0.1 + s / 100}}
               for s in range(1, 30)]
        r = client.post(f"/api/v1/runs/{self.run}/points", json={"points": pts}, headers=admin)
        assert r.status_code == 200, r.text
        self.rule = self.new_rule()
        rule = app.state.store.get_alert_rule(self.rule)
        opened = app.state.store.open_alert(rule, self.run, "m", {}, None)
        assert opened is not None
        self.alert = opened.id

    def new_run(self, name: str) -> int:
        r = self.client.post("/api/v1/runs", json={"project": self.project, "name": name,
                                                   "group": "g"}, headers=self.admin)
        assert r.status_code in (200, 201), r.text
        return int(r.json()["id"])

    def new_rule(self) -> int:
        r = self.client.post("/api/v1/alert-rules", json=self.rule_body(), headers=self.admin)
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def rule_body(self) -> dict:
        return {"project": self.project, "kind": "asymptote_drop", "run_id": self.run}

    def snapshot(self) -> list:
        """What a refused request must not change: the project's runs, rules, alerts."""
        got = []
        for url in ("/api/v1/runs", "/api/v1/alert-rules", "/api/v1/alerts"):
            r = self.client.get(url, params={"project": self.project}, headers=self.admin)
            got.append(r.json())
        got.append(self.client.get(f"/api/v1/projects/{self.project}", headers=self.admin).json())
        got.append(self.client.get(f"/api/v1/runs/{self.run}/points", params={"metric": "m"},
                                   headers=self.admin).json())
        return got


def two_projects(
    database_url: str, projects: tuple[str, ...] = ("P",)
) -> Iterator[tuple[Any, Any, World, World, dict[str, dict[str, str]]]]:
    """(app, client, P's world, Q's world, headers of a token of each scope limited to
    `projects`), auth on; P and Q are made with an unscoped admin token."""
    from fastapi.testclient import TestClient

    from tests.conftest import make_app

    app = make_app(database_url, auth=True)
    store = app.state.store
    admin = {"Authorization": f"Bearer {store.create_token('admin', 'admin')[1]}"}
    scoped = {
        scope: {"Authorization": "Bearer "
                + store.create_token(f"p-{scope}", scope, list(projects))[1]}
        for scope in ("read", "write", "admin")
    }
    with TestClient(app) as client:
        yield app, client, World(app, client, admin, "P"), World(app, client, admin, "Q"), scoped
    app.state.store.engine.dispose()
