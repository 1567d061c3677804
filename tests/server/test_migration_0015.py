"""Migration 0015 (metric-name columns 200 -> 250 characters) on SQLite and PostgreSQL: every row
survives (SQLite rebuilds the tables, through the server's own engine with foreign keys on), the
schema then matches the models exactly, and the downgrade refuses while a longer name is stored.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, String, inspect, text
from sqlalchemy.exc import DBAPIError

from scalewatch.server import limits
from scalewatch.server.config import load_settings
from scalewatch.server.db import alert_models, group_models  # noqa: F401 - the whole schema
from scalewatch.server.db.engine import make_engine
from scalewatch.server.db.migrate import alembic_config, current_revision, upgrade
from scalewatch.server.db.models import Base

NOW = "2026-01-01 00:00:00"
METRIC_COLUMNS = [("series", "name"), ("runs", "fit_metric"), ("projects", "fit_metric"),
                  ("group_series", "metric"), ("group_fits", "metric")]
# Every table a SQLite rebuild could empty through ON DELETE CASCADE, and what 0015 rebuilds.
COUNTED = ["projects", "runs", "run_tags", "series", "fits", "points", "point_chunks",
           "alert_rules", "alerts", "alert_deliveries", "alert_delivery_attempts",
           "group_series", "group_fits"]
LONG = "m" * 250


@pytest.fixture
def engine(empty_database_url: str) -> Iterator[Engine]:
    """The server's own engine (on SQLite: foreign keys on, as a server's auto-upgrade runs)."""
    e = make_engine(load_settings(database_url=empty_database_url))
    yield e
    e.dispose()


def _seed(engine: Engine, metric: str = "acc") -> None:
    statements = [
        f"INSERT INTO projects (id, name, created_at, fit_metric) VALUES (1, 'p', '{NOW}', "
        f"'{metric}')",
        "INSERT INTO runs (id, project_id, name, config, tags, notes, status, compute_unit,"
        f" fit_settings, group_name, fit_metric, created_at, last_seen_at) VALUES (1, 1, 'r',"
        f" '{{}}', '[\"t\"]', '', 'running', 'gpu_hours', '{{}}', 'g', '{metric}', '{NOW}',"
        f" '{NOW}')",
        "INSERT INTO run_tags (run_id, tag) VALUES (1, 't')",
        "INSERT INTO series (id, run_id, name, n_points, updated_at, refit_requested, refit_done,"
        f" latest_fit_id) VALUES (1, 1, '{metric}', 1, '{NOW}', 1, 1, 1)",
        "INSERT INTO fits (id, series_id, created_at, status, n_points, has_intervals, result)"
        f" VALUES (1, 1, '{NOW}', 'ok', 1, true, '{{}}')",
        "INSERT INTO points VALUES (1, 5, 10.0, 0.25, NULL)",
        "INSERT INTO point_chunks VALUES (1, 0, 0, 1, 5, 5, 10.0, 10.0, 10.0, 0.25, 10.0, 0.25,"
        " 5, 10.0, 0.25, 5, 10.0, 0.25)",
        "INSERT INTO alert_rules (id, project, run_id, kind, params, enabled, created_at,"
        f" updated_at) VALUES (1, 'p', 1, 'stalled', '{{}}', true, '{NOW}', '{NOW}')",
        "INSERT INTO alerts (id, rule_id, run_id, project, kind, state, open_key, message,"
        f" details, fit_id, created_at) VALUES (1, 1, 1, 'p', 'stalled', 'open', '1:1', 'm',"
        f" '{{}}', 1, '{NOW}')",
        "INSERT INTO alert_deliveries (id, alert_id, event, delivery_key, url, body, state,"
        " attempts, next_attempt_at, created_at) VALUES (1, 1, 'alert.opened', 'k',"
        f" 'http://x', '{{}}', 'pending', 1, '{NOW}', '{NOW}')",
        "INSERT INTO alert_delivery_attempts (delivery_id, attempt, started_at, duration_ms, ok)"
        f" VALUES (1, 1, '{NOW}', 1.0, false)",
        "INSERT INTO group_series (id, project_id, group_name, metric, refit_requested,"
        f" refit_done, updated_at) VALUES (1, 1, 'g', '{metric}', 1, 0, '{NOW}')",
        "INSERT INTO group_fits (group_series_id, project_id, group_name, metric, created_at,"
        f" requested, status, n_points, n_members, has_intervals, result) VALUES (1, 1, 'g',"
        f" '{metric}', '{NOW}', 1, 'ok', 1, 1, false, '{{}}')",
    ]
    with engine.begin() as conn:
        for sql in statements:
            conn.execute(text(sql))


def _counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in COUNTED}


def _lengths(engine: Engine) -> dict[tuple[str, str], int | None]:
    found = {}
    for table, column in METRIC_COLUMNS:
        [col] = [c for c in inspect(engine).get_columns(table) if c["name"] == column]
        found[(table, column)] = getattr(col["type"], "length", None)
    return found


def _schema_diff(engine: Engine) -> list:
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}),
                                Base.metadata)


def test_the_models_metric_columns_hold_the_longest_metric_name() -> None:
    for table, column in METRIC_COLUMNS:
        col_type = Base.metadata.tables[table].c[column].type
        assert isinstance(col_type, String) and col_type.length == limits.MAX_METRIC_NAME_LENGTH


def test_0015_widens_every_metric_column_and_keeps_every_row(engine: Engine) -> None:
    upgrade(engine, "0014")
    _seed(engine)
    before = _counts(engine)
    assert all(before.values()), before
    if engine.dialect.name == "postgresql":  # the defect: PostgreSQL enforced 200
        with pytest.raises(DBAPIError), engine.begin() as conn:
            conn.execute(text(f"UPDATE series SET name = '{LONG}'"))
    upgrade(engine, "0015")
    assert current_revision(engine) == "0015"
    assert _counts(engine) == before
    assert set(_lengths(engine).values()) == {250}
    assert _schema_diff(engine) == []
    with engine.begin() as conn:
        for table, column in METRIC_COLUMNS:
            conn.execute(text(f"UPDATE {table} SET {column} = '{LONG}'"))
        assert conn.execute(text("SELECT name FROM series")).scalar_one() == LONG
        if engine.dialect.name == "sqlite":  # the pooled connection got its foreign keys back
            assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1
    assert _counts(engine) == before


def test_0015_downgrade_refuses_longer_names_then_narrows_and_upgrades_again(
        engine: Engine) -> None:
    upgrade(engine, "0014")
    _seed(engine)
    upgrade(engine, "0015")
    before = _counts(engine)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE series SET name = '{LONG}'"))
        conn.execute(text(f"UPDATE group_fits SET metric = '{LONG}'"))
    with pytest.raises(RuntimeError, match=r"group_fits\.metric: 1 rows, series\.name: 1 rows"):
        command.downgrade(alembic_config(engine), "0014")
    assert current_revision(engine) == "0015" and set(_lengths(engine).values()) == {250}
    with engine.begin() as conn:
        conn.execute(text("UPDATE series SET name = 'acc'"))
        conn.execute(text("UPDATE group_fits SET metric = 'acc'"))
    command.downgrade(alembic_config(engine), "0014")
    assert current_revision(engine) == "0014"
    assert set(_lengths(engine).values()) == {200}
    assert _counts(engine) == before
    upgrade(engine)
    assert _counts(engine) == before
    assert _schema_diff(engine) == []
