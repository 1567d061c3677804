"""groups: runs.group_name, the group refit queue and fit history, group alert rules

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

A run may belong to a group (its recipe; the API's `group`). `group_series` is one metric of one
group with refit counters and a lease, exactly like `series`; `group_fits` its fit history.
Alert rules and alerts may name a group; an alert on a group's pooled fit has no run, so
`alerts.run_id` becomes nullable (SQLite rebuilds the table in batch mode, keeping its rows).
No data is filled in: existing runs have no group. Fast on any database.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("group_name", sa.String(100), nullable=True))
        batch.create_index("ix_runs_project_group", ["project_id", "group_name"], unique=False)

    op.create_table(
        "group_series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("group_name", sa.String(100), nullable=False),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("refit_requested", sa.BigInteger(), nullable=False),
        sa.Column("refit_done", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("latest_fit_id", sa.Integer(), nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("project_id", "group_name", "metric", name="uq_group_series"),
    )
    op.create_index(
        "ix_group_series_refit", "group_series", ["refit_requested", "refit_done"], unique=False
    )
    op.create_table(
        "group_fits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_series_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("group_name", sa.String(100), nullable=False),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("n_points", sa.Integer(), nullable=False),
        sa.Column("n_members", sa.Integer(), nullable=False),
        sa.Column("max_compute", sa.Float(), nullable=True),
        sa.Column("A", sa.Float(), nullable=True),
        sa.Column("A_lo", sa.Float(), nullable=True),
        sa.Column("A_hi", sa.Float(), nullable=True),
        sa.Column("has_intervals", sa.Boolean(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["group_series_id"], ["group_series.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_group_fits_series", "group_fits", ["group_series_id", "id"], unique=False
    )

    with op.batch_alter_table("alert_rules") as batch:
        batch.add_column(sa.Column("group_name", sa.String(100), nullable=True))
    with op.batch_alter_table("alerts") as batch:
        batch.add_column(sa.Column("group_name", sa.String(100), nullable=True))
        batch.alter_column("run_id", existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM alerts WHERE run_id IS NULL")
    with op.batch_alter_table("alerts") as batch:
        batch.alter_column("run_id", existing_type=sa.Integer(), nullable=False)
        batch.drop_column("group_name")
    op.execute("DELETE FROM alert_rules WHERE group_name IS NOT NULL")
    with op.batch_alter_table("alert_rules") as batch:
        batch.drop_column("group_name")
    op.drop_index("ix_group_fits_series", table_name="group_fits")
    op.drop_table("group_fits")
    op.drop_index("ix_group_series_refit", table_name="group_series")
    op.drop_table("group_series")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_project_group")
        batch.drop_column("group_name")
