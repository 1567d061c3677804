"""metric names up to 250 characters (MLflow's metric keys): every column holding one widened

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

MLflow allows metric keys of 250 characters; ours were 200, so an MLflow log-batch holding a
longer key was refused whole (and with MLflow's async logging the short keys logged with it were
lost). The columns holding a metric name go from VARCHAR(200) to VARCHAR(250): series.name,
runs.fit_metric, projects.fit_metric, group_series.metric and group_fits.metric. Project, run
and token names stay at 200 (`limits.MAX_NAME_LENGTH`); alert rules hold no metric name.

Cost, for operators: on PostgreSQL widening a VARCHAR is a catalog-only ALTER (no table rewrite,
no index rebuild; a brief ACCESS EXCLUSIVE lock on each table). On SQLite, which does not
enforce VARCHAR lengths, batch mode rebuilds the five tables (copy, drop, rename) to keep the
declared type in step with the models; they hold one row per project, run or metric, never the
points, so this takes well under a second even for large databases. The rebuild runs with
SQLite's foreign keys off (`migrations/env.py`): dropping a table with them on deletes its
children's rows.

Downgrade refuses (before changing anything) while any of these columns holds a name longer
than 200 characters: PostgreSQL could not narrow the column, and cutting names short could
merge two series of one run. Rename or delete those first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

OLD, NEW = 200, 250
# (table, column, nullable): every column that holds a metric name.
COLUMNS = (
    ("series", "name", False),
    ("runs", "fit_metric", True),
    ("projects", "fit_metric", True),
    ("group_series", "metric", False),
    ("group_fits", "metric", False),
)


def _resize(old: int, new: int) -> None:
    for table, column, nullable in COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, type_=sa.String(new), existing_type=sa.String(old),
                               existing_nullable=nullable)


def upgrade() -> None:
    _resize(OLD, NEW)


def downgrade() -> None:
    bind = op.get_bind()
    longer = {
        f"{table}.{column}": n
        for table, column, _ in COLUMNS
        if (n := bind.execute(sa.text(
            f"SELECT count(*) FROM {table} WHERE length({column}) > {OLD}")).scalar_one())
    }
    if longer:
        raise RuntimeError(
            f"cannot downgrade below 0015: metric names longer than {OLD} characters are stored "
            f"({', '.join(f'{where}: {n} rows' for where, n in sorted(longer.items()))}); "
            "rename or delete them first"
        )
    _resize(NEW, OLD)
