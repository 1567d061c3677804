"""point_chunks level 7: chunks of 128 consecutive steps

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

The Compare page draws each run from its rollups alone (`PointsMixin._downsample_rollup`): it
needs a level with a few chunks per screen bucket. Level 4 (16 steps) has too many rows for a
100k-point run (6,250: tens of ms to read), level 10 (1,024 steps) too few to draw; level 7 has
781. The upgrade fills it from the level 4 chunks (exact: first/last/lowest/highest of the
finer chunks), about 8 times fewer rows than the points the level 4 fill read in 0006.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_COLUMNS = (
    "series_id", "level", "chunk", "n", "min_step", "max_step", "min_compute", "max_compute",
    "first_compute", "first_value", "last_compute", "last_value",
    "lo_step", "lo_compute", "lo_value", "hi_step", "hi_compute", "hi_value",
)  # fmt: skip
_FINE, _LEVEL = 4, 7


def upgrade() -> None:
    bind = op.get_bind()
    # Written out here, not imported (same rules as server/store/chunks.py rollup_rows), so this
    # revision keeps doing what it did whatever the store's code becomes.
    insert = sa.text(
        f"INSERT INTO point_chunks ({', '.join(_COLUMNS)}) "
        f"VALUES ({', '.join(':' + c for c in _COLUMNS)})"
    )
    series_ids = [r[0] for r in bind.execute(
        sa.text("SELECT DISTINCT series_id FROM point_chunks WHERE level = :l ORDER BY 1"),
        {"l": _FINE},
    )]  # fmt: skip
    cols = ", ".join(_COLUMNS)
    for sid in series_ids:
        fine = bind.execute(
            sa.text(f"SELECT {cols} FROM point_chunks WHERE series_id = :s AND level = :l "
                    "ORDER BY chunk"),
            {"s": sid, "l": _FINE},
        ).mappings().all()  # fmt: skip
        groups: dict[int, list[Any]] = {}
        for r in fine:
            groups.setdefault(r["min_step"] >> _LEVEL, []).append(r)
        rows = []
        for chunk, g in groups.items():  # g is in step order
            lo = min(g, key=lambda r: (r["lo_value"], r["lo_step"]))
            hi = max(g, key=lambda r: (r["hi_value"], r["hi_step"]))
            rows.append(dict(zip(_COLUMNS, (
                sid, _LEVEL, chunk, sum(r["n"] for r in g), g[0]["min_step"], g[-1]["max_step"],
                min(r["min_compute"] for r in g), max(r["max_compute"] for r in g),
                g[0]["first_compute"], g[0]["first_value"], g[-1]["last_compute"],
                g[-1]["last_value"], lo["lo_step"], lo["lo_compute"], lo["lo_value"],
                hi["hi_step"], hi["hi_compute"], hi["hi_value"],
            ), strict=True)))  # fmt: skip
        if rows:
            bind.execute(insert, rows)


def downgrade() -> None:
    op.execute(sa.text(f"DELETE FROM point_chunks WHERE level = {_LEVEL}"))
