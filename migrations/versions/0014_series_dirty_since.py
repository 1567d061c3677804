"""series.dirty_since: when a series last went from fitted to dirty

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03

Ingest sets it when it queues a refit of a series that had none queued; the refitter clears it
(or moves it to the time of its snapshot, when points arrived during the fit). The refit lag,
from a point's arrival to the fit that includes it, is read from it (/metrics, the Run page).
Nullable, no fill: a series already dirty at upgrade has an unknown lag until its next fit.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("series") as batch:
        batch.add_column(sa.Column("dirty_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("series") as batch:
        batch.drop_column("dirty_since")
