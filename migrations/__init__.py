"""Alembic environment and revisions (run through `scalewatch db upgrade`)."""
