"""points: drop the foreign key to series (ingest speed)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Note for operators: on PostgreSQL this is a catalog-only change (instant). On SQLite the points
table is rebuilt (SQLite cannot drop a constraint in place): it takes roughly a second per
million points and needs that much free disk temporarily. Integrity is kept by the store, which
writes points only for series it has just read or created and deletes them with their run.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _points_table(with_fk: bool) -> sa.Table:
    series_id = (
        sa.Column(
            "series_id",
            sa.Integer(),
            sa.ForeignKey("series.id", ondelete="CASCADE"),
            nullable=False,
        )
        if with_fk
        else sa.Column("series_id", sa.Integer(), nullable=False)
    )
    return sa.Table(
        "points",
        sa.MetaData(),
        series_id,
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("compute", sa.Float(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("wall_time", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("series_id", "step"),
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE points DROP CONSTRAINT IF EXISTS points_series_id_fkey")
        return
    with op.batch_alter_table("points", copy_from=_points_table(False), recreate="always"):
        pass


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_foreign_key(
            "points_series_id_fkey", "points", "series", ["series_id"], ["id"], ondelete="CASCADE"
        )
        return
    with op.batch_alter_table("points", copy_from=_points_table(True), recreate="always"):
        pass
