"""Migration 0016 (ids never reused) and what it is for: a deleted run's, alert rule's or
alert's id is never handed to a new one, on SQLite (AUTOINCREMENT, rebuilt tables that keep
every row) and on PostgreSQL (sequences)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import Engine, text

from scalewatch.server.config import load_settings
from scalewatch.server.db.engine import make_engine
from scalewatch.server.db.migrate import alembic_config, current_revision, upgrade
from tests.server.test_migration_0015 import _counts, _schema_diff, _seed

NOW = "2026-01-01 00:00:00"


@pytest.fixture
def engine(empty_database_url: str) -> Iterator[Engine]:
    e = make_engine(load_settings(database_url=empty_database_url))
    yield e
    e.dispose()


def _new_run(engine: Engine, name: str) -> int:
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO runs (project_id, name, config, tags, notes, status, compute_unit,"
            " fit_settings, created_at, last_seen_at) VALUES (1, :n, '{}', '[]', '', 'running',"
            f" 'gpu_hours', '{{}}', '{NOW}', '{NOW}')"), {"n": name})
        return int(conn.execute(text("SELECT max(id) FROM runs")).scalar_one())


def test_0016_keeps_every_row_and_then_never_reuses_a_deleted_id(engine: Engine) -> None:
    upgrade(engine, "0015")
    _seed(engine)
    if engine.dialect.name == "postgresql":  # the seed wrote its ids past the sequence
        with engine.begin() as conn:
            conn.execute(text("SELECT setval('runs_id_seq', (SELECT max(id) FROM runs))"))
    before = _counts(engine)
    upgrade(engine)
    assert current_revision(engine) == "0016"
    assert _counts(engine) == before
    assert _schema_diff(engine) == []
    newest = _new_run(engine, "r2")
    assert newest == 2
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM runs WHERE id = :i"), {"i": newest})
        if engine.dialect.name == "sqlite":
            assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1
    assert _new_run(engine, "r3") == newest + 1  # before 0016, SQLite handed out 2 again


def test_0016_downgrades_and_upgrades_again(engine: Engine) -> None:
    upgrade(engine, "0015")
    _seed(engine)
    upgrade(engine)
    before = _counts(engine)
    command.downgrade(alembic_config(engine), "0015")
    assert current_revision(engine) == "0015" and _counts(engine) == before
    upgrade(engine)
    assert _counts(engine) == before and _schema_diff(engine) == []


def test_a_deleted_runs_rules_and_alerts_ids_go_to_no_one_else(api) -> None:  # noqa: ANN001
    """Through the API: the newest run deleted, the next run gets a new id, and the old one
    answers 404 on the REST API and on the MLflow surface (a client resuming it with
    MLFLOW_RUN_ID), instead of writing into the new run."""
    first = api.post("/api/v1/runs", json={"project": "p", "name": "a"}).json()["id"]
    rule = api.post("/api/v1/alert-rules", json={
        "project": "p", "kind": "stalled", "params": {"minutes": 5}})
    assert rule.status_code in (200, 201), rule.text
    assert api.delete(f"/api/v1/runs/{first}").status_code in (200, 204)
    assert api.delete(f"/api/v1/alert-rules/{rule.json()['id']}").status_code in (200, 204)
    second = api.post("/api/v1/runs", json={"project": "p", "name": "b"}).json()["id"]
    assert second != first
    again = api.post("/api/v1/alert-rules", json={
        "project": "p", "kind": "stalled", "params": {"minutes": 5}}).json()
    assert again["id"] != rule.json()["id"]
    old = api.post("/api/2.0/mlflow/runs/log-batch", json={
        "run_id": str(first), "metrics": [{"key": "loss", "value": 1.0, "step": 1,
                                           "timestamp": 0}]})
    assert old.status_code == 404 and old.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    assert api.get(f"/api/v1/runs/{first}").status_code == 404
    assert api.get(f"/api/v1/runs/{second}").json()["latest"] == {}
