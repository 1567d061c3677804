"""projects.noise_prior: a project's default noise prior for its runs' fits

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

"project" (learn rho from the project's finished runs) or [mean, sd]; a run's own
fit_settings.noise_prior wins. Nullable JSON, no fill: existing projects keep the flat prior.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("noise_prior", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("noise_prior")
