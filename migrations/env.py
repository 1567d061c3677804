"""Alembic environment: runs against the engine handed over by scalewatch.server.db.migrate."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine

from scalewatch.server.db import (
    alert_models,  # noqa: F401 - registers the alert tables on Base.metadata
    group_models,  # noqa: F401 - registers the group tables on Base.metadata
)
from scalewatch.server.db.models import Base

config = context.config
target_metadata = Base.metadata


def _engine():
    engine = config.attributes.get("engine")
    if engine is not None:
        return engine
    # Plain `alembic -c ...` use: the URL comes from the environment like the server's.
    from scalewatch.server.config import load_settings

    return create_engine(os.environ.get("SCALEWATCH_DATABASE_URL") or load_settings().database_url)


def run_migrations_online() -> None:
    engine = _engine()
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations_online()
