"""projects.fit_metric: a project's default fit metric

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

A run fits, in order: its own fit_metric, else its project's default (this column), else the
metric recognised from the framework's names (server/store/fit_metric.py). Nullable, no fill.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("fit_metric", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("fit_metric")
