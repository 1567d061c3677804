"""api_tokens.projects: a token limited to a list of projects

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03

A JSON list of project names the token may read and write; NULL (every existing token) keeps
today's meaning: every project. No fill.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("projects", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("projects")
