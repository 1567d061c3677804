"""projects.b_prior: a project's default prior on B for its runs' fits

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

"project" (learn a Student-t prior on ln B from the project's finished runs) or
[centre, scale] of ln B; a run's own fit_settings.b_prior wins. Nullable JSON, no fill:
existing projects keep fitting without one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("b_prior", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("b_prior")
