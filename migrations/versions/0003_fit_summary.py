"""fits.summary: the compact fit view run lists read

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Note for operators: adds a nullable column (instant on PostgreSQL and SQLite), then fills it for
the latest fit of each series only (one row per series, read and written in batches of 500).
Older fits keep a NULL summary: nothing reads it for them (histories use their own columns).
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# A frozen copy of scalewatch.server.store.common.SUMMARY_KEYS as of this revision: a migration must
# keep doing what it did when it was written, whatever the application's list becomes.
SUMMARY_KEYS = (
    "status",
    "A",
    "B",
    "C_mid",
    "R0",
    "ci",
    "A_lower_bound",
    "n_points",
    "target_compute",
    "predicted_at_target",
    "predicted_interval",
    "metric",
    "fitted_at",
    "message",
)


def upgrade() -> None:
    with op.batch_alter_table("fits") as batch:
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))
    conn = op.get_bind()
    fits = sa.table(
        "fits",
        sa.column("id", sa.Integer),
        sa.column("result", sa.JSON),
        sa.column("summary", sa.JSON),
    )
    latest = [
        r[0]
        for r in conn.execute(
            sa.text("SELECT latest_fit_id FROM series WHERE latest_fit_id IS NOT NULL")
        )
    ]
    for lo in range(0, len(latest), 500):
        ids = latest[lo : lo + 500]
        for fit_id, result in conn.execute(
            sa.select(fits.c.id, fits.c.result).where(fits.c.id.in_(ids))
        ):
            if isinstance(result, str):  # some drivers hand back JSON text
                result = json.loads(result)
            summary = {k: (result or {}).get(k) for k in SUMMARY_KEYS}
            conn.execute(fits.update().where(fits.c.id == fit_id).values(summary=summary))


def downgrade() -> None:
    with op.batch_alter_table("fits") as batch:
        batch.drop_column("summary")
