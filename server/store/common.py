"""What the SqlStore mixins share: the `SqlBase` they all extend, and small helpers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session, sessionmaker


class SqlBase:
    """The engine and transaction scope every mixin uses (one per `SqlStore`).

    The mixins in `*_sql.py` extend this so `self.session()` is declared for each of them, and
    hooks one mixin calls on another (`_delete_run_dependents`) are declared once, here.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions: sessionmaker[Session] = sessionmaker(bind=engine, expire_on_commit=False)
        self.dialect: str = engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self.sessions() as s, s.begin():
            yield s

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def check_writable(self) -> None:
        """Raises when the database cannot write: a committed write that changes nothing (the
        schema version set to itself). Committed, not rolled back: SQLite writes nothing to
        disk before a commit, so a read-only file or a full disk shows only there."""
        with self.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = version_num"))

    def _delete_run_dependents(self, s: Session, run_id: int) -> None:
        """Hook: delete rows of other concerns (alerts) that reference a run being deleted.

        Mixins that own such rows override it and call `super()` so every one runs.
        """


def as_utc(dt: datetime | None) -> datetime | None:
    """An aware UTC datetime (SQLite hands back naive ones; everything is stored in UTC)."""
    if dt is None or dt.tzinfo is not None:
        return dt
    return dt.replace(tzinfo=timezone.utc)


def iso(dt: datetime | None) -> str | None:
    dt = as_utc(dt)
    return None if dt is None else dt.isoformat()


def dialect_insert(session: Session | Connection) -> Any:
    """`insert` with ON CONFLICT support for the session's (or connection's) database (a
    dialect-specific type)."""
    name = (session.get_bind() if isinstance(session, Session) else session).dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    raise RuntimeError(f"unsupported database {name}")  # only SQLite and PostgreSQL
