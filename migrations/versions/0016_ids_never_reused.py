"""ids of runs, alert rules and alerts are never reused on SQLite (AUTOINCREMENT)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06

Without AUTOINCREMENT SQLite gives a new row the highest id in use plus one, so deleting the
newest run handed its id to the next run created: an MLflow client resuming with MLFLOW_RUN_ID,
a script or a follower still holding the old id then wrote its points, params and tags into
another run (with a 200). PostgreSQL's sequences never hand an id out twice, so this revision
changes nothing there.

Cost, for operators: on SQLite batch mode rebuilds `runs`, `alert_rules` and `alerts` (copy,
drop, rename) with AUTOINCREMENT; they hold one row per run, rule or alert, never the points,
so this takes well under a second even for large databases. The rebuild runs with SQLite's
foreign keys off (`migrations/env.py`): dropping a table with them on deletes its children's
rows. Ids deleted before the upgrade may still be reused once (SQLite starts the sequence at
the highest id present); none deleted after it.

Downgrade rebuilds the three tables without AUTOINCREMENT (ids may be reused again).
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("runs", "alert_rules", "alerts")


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always",
                                  table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass


def upgrade() -> None:
    _rebuild(True)


def downgrade() -> None:
    _rebuild(False)
