"""Migrations, the out-of-date schema refusal, readiness, and the CLI around them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text

from scalewatch.server.db.migrate import current_revision, head_revision, upgrade
from scalewatch.server.services.runs import update_run
from tests.conftest import make_app


def run_cli(*args: str, env: dict | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "trainer_client.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_upgrade_from_empty_creates_every_table(empty_database_url):
    engine = create_engine(empty_database_url)
    assert current_revision(engine) is None
    out = run_cli("db", "upgrade", "--database-url", empty_database_url)
    assert out.returncode == 0, out.stderr
    assert current_revision(engine) == head_revision(engine)
    tables = set(inspect(engine).get_table_names())
    assert {"projects", "runs", "run_tags", "series", "points", "fits", "api_tokens"} <= tables
    # Points are keyed (series, step): the primary key is the per-metric, by-step index.
    assert inspect(engine).get_pk_constraint("points")["constrained_columns"] == [
        "series_id",
        "step",
    ]
    engine.dispose()


def test_server_refuses_an_out_of_date_postgres_schema(postgres, tmp_path):
    """PostgreSQL only: a server database is upgraded deliberately (SQLite upgrades itself,
    see test_sqlite_is_upgraded_automatically)."""
    from tests.support.databases import require_postgres

    require_postgres(postgres)
    url = postgres.new_database(migrated=False)
    engine = create_engine(url)
    upgrade(engine, "0001")  # an older deployment
    assert head_revision(engine) != "0001"
    out = run_cli(
        "serve",
        "--database-url",
        url,
        "--port",
        "1",
        env={"SCALEWATCH_HOME": str(tmp_path)},
        timeout=60,
    )
    assert out.returncode == 2
    assert "scalewatch db upgrade" in out.stderr
    engine.dispose()
    postgres.drop(url)


def test_sqlite_is_upgraded_automatically(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    app = make_app(url)
    with TestClient(app) as client:
        assert client.get("/readyz").json()["status"] == "ready"
    assert current_revision(app.state.store.engine) == head_revision(app.state.store.engine)


def test_token_create_prints_a_working_token(database_url, tmp_path):
    out = run_cli(
        "token", "create", "--scope", "read", "--name", "ci-reader", "--database-url", database_url
    )
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert token.startswith("sw_") and "shown only once" in out.stderr
    app = make_app(database_url, auth=True)
    with TestClient(app) as client:
        ok = client.get("/api/v1/runs", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        denied = client.post(
            "/api/v1/runs",
            json={"project": "p", "name": "n"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert denied.status_code == 403
    listed = run_cli("token", "list", "--database-url", database_url)
    assert "ci-reader" in listed.stdout and token not in listed.stdout


def test_server_commands_without_the_server_extra_say_how_to_install():
    code = (
        "import sys; sys.modules['fastapi'] = None; sys.modules['uvicorn'] = None;"
        "from trainer_client.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    for cmd in (["serve"], ["fit", "x.csv"], ["token", "create", "--name", "x"]):
        out = subprocess.run(
            [sys.executable, "-c", code, *cmd], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2, out
        assert "pip install 'scalewatch[server]'" in out.stderr
        assert "Traceback" not in out.stderr


def test_data_migrations_keep_data(empty_database_url):
    """0003 fills fits.summary for each series' latest fit; 0004 drops the points FK."""
    import json as _json

    engine = create_engine(empty_database_url)
    upgrade(engine, "0002")
    result = {
        "status": "ok",
        "A": 0.61,
        "B": 1.9,
        "C_mid": 2500.0,
        "n_points": 40,
        "internal": {"draws": [[0.6, 1.9, 2500.0, 0.1]] * 50},
    }
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO projects (id, name, created_at) VALUES (1, 'p', '2026-01-01')")
        )
        conn.execute(
            text(
                "INSERT INTO runs (id, project_id, name, config, tags, notes, status, compute_unit,"
                " fit_settings, created_at, last_seen_at) VALUES (1, 1, 'r', '{}', '[]', '',"
                " 'running', 'gpu_hours', '{}', '2026-01-01', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO series (id, run_id, name, n_points, updated_at, refit_requested,"
                " refit_done, latest_fit_id)"
                " VALUES (1, 1, 'val_pass_rate', 40, '2026-01-01', 1, 1, 2)"
            )
        )
        for fit_id in (1, 2):
            conn.execute(
                text(
                    "INSERT INTO fits (id, series_id, created_at, status, n_points, has_intervals,"
                    " result) VALUES (:id, 1, '2026-01-01', 'ok', 40, true, :result)"
                ),
                {"id": fit_id, "result": _json.dumps(result)},
            )
        conn.execute(text("INSERT INTO points VALUES (1, 5, 10.0, 0.25, NULL)"))
    upgrade(engine)  # 0003 backfills summaries; 0004 rebuilds points on SQLite: data survives
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT id, summary FROM fits ORDER BY id")).all())
        assert conn.execute(text("SELECT step, value FROM points")).all() == [(5, 0.25)]
    assert rows[1] is None
    summary = rows[2] if isinstance(rows[2], dict) else _json.loads(rows[2])
    assert summary["A"] == 0.61 and "internal" not in summary
    engine.dispose()


def test_0008_groups_upgrade_keeps_data(empty_database_url):
    """0008 on a database with runs, points, fits, rules and alerts: everything survives (SQLite
    rebuilds `alerts` to make run_id nullable), runs have no group, one-open-alert still holds,
    and groups work on the upgraded data."""
    from sqlalchemy.exc import IntegrityError

    from scalewatch.server.store import SqlStore

    engine = create_engine(empty_database_url)
    upgrade(engine, "0007")
    now = "2026-01-01 00:00:00"
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO projects (id, name, created_at) VALUES (1, 'p', '{now}')"))
        conn.execute(text(
            "INSERT INTO runs (id, project_id, name, config, tags, notes, status, compute_unit,"
            f" fit_settings, created_at, last_seen_at) VALUES (1, 1, 'r', '{{}}', '[]', '',"
            f" 'running', 'gpu_hours', '{{}}', '{now}', '{now}')"))
        conn.execute(text(
            "INSERT INTO series (id, run_id, name, n_points, updated_at, refit_requested,"
            f" refit_done) VALUES (1, 1, 'val_pass_rate', 1, '{now}', 1, 1)"))
        conn.execute(text("INSERT INTO points VALUES (1, 5, 10.0, 0.25, NULL)"))
        conn.execute(text(
            "INSERT INTO alert_rules (id, project, run_id, kind, params, enabled, created_at,"
            f" updated_at) VALUES (1, 'p', 1, 'stalled', '{{\"minutes\": 5}}', true, '{now}',"
            f" '{now}')"))
        conn.execute(text(
            "INSERT INTO alerts (id, rule_id, run_id, project, kind, state, open_key, message,"
            f" details, created_at) VALUES (1, 1, 1, 'p', 'stalled', 'open', '1:1', 'm', '{{}}',"
            f" '{now}')"))
    upgrade(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id, name, group_name FROM runs")).all() == [(1, "r", None)]
        assert conn.execute(text("SELECT step, value FROM points")).all() == [(5, 0.25)]
        assert conn.execute(text("SELECT id, run_id, open_key, group_name FROM alerts")).all() == [
            (1, 1, "1:1", None)]
        assert conn.execute(text("SELECT group_name FROM alert_rules")).all() == [(None,)]
    with pytest.raises(IntegrityError), engine.begin() as conn:  # still one open per key
        conn.execute(text(
            "INSERT INTO alerts (rule_id, run_id, project, kind, state, open_key, message,"
            f" details, created_at) VALUES (1, 1, 'p', 'stalled', 'open', '1:1', 'm', '{{}}',"
            f" '{now}')"))
    with engine.begin() as conn:  # an alert on a group's pooled fit has no run
        conn.execute(text(
            "INSERT INTO alerts (rule_id, run_id, group_name, project, kind, state, message,"
            f" details, created_at) VALUES (1, NULL, 'g', 'p', 'stalled', 'resolved', 'm', '{{}}',"
            f" '{now}')"))
    store = SqlStore(engine)
    update_run(store, 1, {"group": "g"})
    assert [g.model_dump() for g in store.list_groups("p")] == [
        {"name": "g", "n_runs": 1, "runs": [1], "metric": "val_pass_rate", "fit": None}]
    assert store.claim_dirty_groups("test")[0].group == "g"
    engine.dispose()
