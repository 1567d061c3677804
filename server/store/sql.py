"""SqlStore: the SQLAlchemy implementation of the Store interface (SQLite and PostgreSQL).

Split by concern into mixins so each module stays small; they share `self.sessions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from server.store.alerts_sql import AlertsMixin
from server.store.fits_sql import FitsMixin
from server.store.points_sql import PointsMixin
from server.store.runs_sql import RunsMixin
from server.store.tokens_sql import TokensMixin


# AlertsMixin first: its `_delete_run_dependents` extends the RunsMixin hook.
class SqlStore(AlertsMixin, RunsMixin, PointsMixin, FitsMixin, TokensMixin):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions: sessionmaker[Session] = sessionmaker(bind=engine, expire_on_commit=False)
        self.dialect = engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions() as s, s.begin():
            yield s

    def ping(self) -> None:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
