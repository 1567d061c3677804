"""dashboard_sessions: the dashboard's sign-in sessions (the cookie no longer holds a token)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Note for operators: creates one empty table; fast on any database. Browsers signed in before
this revision carry the old token cookie, which is no longer accepted: they sign in again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["api_tokens.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_hash", name="uq_dashboard_sessions_hash"),
    )
    with op.batch_alter_table("dashboard_sessions", schema=None) as batch_op:
        batch_op.create_index("ix_dashboard_sessions_token", ["token_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dashboard_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_dashboard_sessions_token")
    op.drop_table("dashboard_sessions")
