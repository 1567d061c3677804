"""point_chunks without its foreign key to series

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

Like `points` (0004): every chunk row an ingest writes (tens a batch) cost a foreign key check,
on PostgreSQL a share lock on the series row, ~1.5 ms of a 1,000-value batch. Chunks are only
written for a series the same transaction has just read or created, and `delete_run` deletes
them explicitly. SQLite rebuilds the table (its foreign keys have no name to drop), keeping its
rows; PostgreSQL drops the constraint. Fast on any database of chunks.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _table(with_fk: bool) -> sa.Table:
    series_id = (sa.Column("series_id", sa.Integer(), sa.ForeignKey("series.id",
                                                                     ondelete="CASCADE"),
                           nullable=False) if with_fk
                 else sa.Column("series_id", sa.Integer(), nullable=False))  # fmt: skip
    meta = sa.MetaData()
    if with_fk:
        sa.Table("series", meta, sa.Column("id", sa.Integer(), primary_key=True))
    return sa.Table(
        "point_chunks", meta, series_id,
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("chunk", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("min_step", sa.BigInteger(), nullable=False),
        sa.Column("max_step", sa.BigInteger(), nullable=False),
        sa.Column("min_compute", sa.Float(), nullable=False),
        sa.Column("max_compute", sa.Float(), nullable=False),
        sa.Column("first_compute", sa.Float(), nullable=False),
        sa.Column("first_value", sa.Float(), nullable=False),
        sa.Column("last_compute", sa.Float(), nullable=False),
        sa.Column("last_value", sa.Float(), nullable=False),
        sa.Column("lo_step", sa.BigInteger(), nullable=False),
        sa.Column("lo_compute", sa.Float(), nullable=False),
        sa.Column("lo_value", sa.Float(), nullable=False),
        sa.Column("hi_step", sa.BigInteger(), nullable=False),
        sa.Column("hi_compute", sa.Float(), nullable=False),
        sa.Column("hi_value", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("series_id", "level", "chunk"),
    )  # fmt: skip


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        for fk in sa.inspect(bind).get_foreign_keys("point_chunks"):
            op.drop_constraint(str(fk["name"]), "point_chunks", type_="foreignkey")
        return
    with op.batch_alter_table("point_chunks", recreate="always", copy_from=_table(False)):
        pass


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.create_foreign_key("point_chunks_series_id_fkey", "point_chunks", "series",
                              ["series_id"], ["id"], ondelete="CASCADE")  # fmt: skip
        return
    with op.batch_alter_table("point_chunks", recreate="always", copy_from=_table(True)):
        pass
