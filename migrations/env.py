"""Alembic environment: runs against the engine handed over by scalewatch.server.db.migrate."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection, create_engine

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
        sqlite = connection.dialect.name == "sqlite"
        # Batch mode rebuilds a SQLite table (copy, drop, rename), and with foreign keys on
        # (the server's engine turns them on) DROP TABLE first deletes every row, cascading into
        # the children: rebuilding `alerts` emptied `alert_deliveries`. SQLite only changes the
        # setting outside a transaction: here, before the migrations' one begins.
        foreign_keys = sqlite and _sqlite_foreign_keys(connection, on=False)
        try:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=sqlite,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if foreign_keys:  # the pooled connection goes back as it came
                connection.rollback()
                _sqlite_foreign_keys(connection, on=True)


def _sqlite_foreign_keys(connection: Connection, on: bool) -> bool:
    """Set SQLite's foreign_keys pragma; whether it was on before."""
    was = bool(connection.exec_driver_sql("PRAGMA foreign_keys").scalar())
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    connection.commit()
    if bool(connection.exec_driver_sql("PRAGMA foreign_keys").scalar()) != on:
        raise RuntimeError("could not change SQLite's foreign_keys setting (in a transaction?)")
    connection.commit()
    return was


run_migrations_online()
