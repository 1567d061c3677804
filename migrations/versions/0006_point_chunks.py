"""point_chunks: per-series rollups of points (first, last, lowest, highest per step chunk)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

Downsampling a long series (Compare, the Run page's zoomed-out view) reads these instead of every
raw point: level 4 chunks hold 16 consecutive steps, level 10 chunks 1,024. The store keeps
them exact at every ingest. Note for operators: the upgrade fills them from the existing points
in one pass (roughly a second per few million points on PostgreSQL, slower on SQLite).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = (
    "series_id", "level", "chunk", "n", "min_step", "max_step", "min_compute", "max_compute",
    "first_compute", "first_value", "last_compute", "last_value",
    "lo_step", "lo_compute", "lo_value", "hi_step", "hi_compute", "hi_value",
)  # fmt: skip


def upgrade() -> None:
    op.create_table(
        "point_chunks",
        sa.Column("series_id", sa.Integer(), nullable=False),
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
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("series_id", "level", "chunk"),
    )
    bind = op.get_bind()
    # Filled from the stored points one series at a time (memory bounded by the largest
    # series). The builder is written out here, not imported, so this revision keeps doing what
    # it did whatever the store's code becomes (same rules as server/store/chunks.py).
    insert = sa.text(
        f"INSERT INTO point_chunks ({', '.join(_COLUMNS)}) "
        f"VALUES ({', '.join(':' + c for c in _COLUMNS)})"
    )
    series_ids = [r[0] for r in bind.execute(sa.text("SELECT id FROM series ORDER BY id"))]
    for sid in series_ids:
        pts = bind.execute(
            sa.text("SELECT step, compute, value FROM points WHERE series_id = :s ORDER BY step"),
            {"s": sid},
        ).all()
        rows = []
        for level in (4, 10):
            groups: dict[int, list[Any]] = {}
            for p in pts:
                groups.setdefault(p[0] >> level, []).append(p)
            for chunk, g in groups.items():  # g is in step order
                lo = min(g, key=lambda p: (p[2], p[0]))
                hi = max(g, key=lambda p: (p[2], p[0]))
                rows.append(dict(zip(_COLUMNS, (
                    sid, level, chunk, len(g), g[0][0], g[-1][0],
                    min(p[1] for p in g), max(p[1] for p in g), g[0][1], g[0][2], g[-1][1],
                    g[-1][2], lo[0], lo[1], lo[2], hi[0], hi[1], hi[2],
                ), strict=True)))  # fmt: skip
        if rows:
            bind.execute(insert, rows)


def downgrade() -> None:
    op.drop_table("point_chunks")
