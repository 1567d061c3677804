"""Fresh, migrated databases for tests: a SQLite file, or a PostgreSQL database of our own.

PostgreSQL: a migrated template database is built once per session and each test gets a
`CREATE DATABASE ... TEMPLATE` copy (tens of milliseconds). With CI=true an unreachable server
fails the run instead of skipping, so the PostgreSQL half of the suite can never silently vanish.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ADMIN_URL = os.environ.get(
    "SCALEWATCH_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
TEMPLATE = f"sw_tmpl_{os.getpid()}"


def migrated_sqlite(directory: Path, filename: str = "scalewatch.db") -> str:
    """The URL of a new SQLite database in ``directory``, upgraded to the latest schema."""
    from scalewatch.server.db.migrate import upgrade

    url = f"sqlite:///{Path(directory) / filename}"
    engine = create_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


class Postgres:
    def __init__(self) -> None:
        self.admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", pool_size=1)
        self.template_ready = False
        self.created: list[str] = []

    def reachable(self) -> str | None:
        try:
            with self.admin.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:  # noqa: BLE001
            return (
                f"PostgreSQL at {make_url(ADMIN_URL).render_as_string(hide_password=True)} "
                f"unreachable: {str(exc).splitlines()[0]}"
            )
        return None

    def url_for(self, name: str) -> str:
        return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    def _build_template(self) -> None:
        from scalewatch.server.db.migrate import upgrade

        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{TEMPLATE}"'))
        engine = create_engine(self.url_for(TEMPLATE))
        upgrade(engine)
        engine.dispose()
        self.template_ready = True

    def new_database(self, migrated: bool = True) -> str:
        if migrated and not self.template_ready:
            self._build_template()
        name = f"sw_test_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as conn:
            if migrated:
                conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"'))
            else:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        self.created.append(name)
        return self.url_for(name)

    def drop(self, url: str) -> None:
        name = make_url(url).database
        with self.admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def close(self) -> None:
        with self.admin.connect() as conn:
            for name in [*self.created, TEMPLATE]:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()


def require_postgres(pg: Postgres) -> None:
    problem = pg.reachable()
    if problem is None:
        return
    if in_ci():
        pytest.fail(f"{problem} (CI=true: the PostgreSQL run must not be skipped)")
    pytest.skip(problem)
