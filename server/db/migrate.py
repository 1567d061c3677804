"""Schema upgrades and the "is the schema current?" check, through Alembic."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from scalewatch import migrations

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


class SchemaOutOfDate(RuntimeError):
    pass


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # The engine travels in attributes, not as a URL option: configparser interpolation would
    # mangle a '%' in a password.
    cfg.attributes["engine"] = engine
    return cfg


def head_revision(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(engine), revision)


def schema_is_current(engine: Engine) -> bool:
    return current_revision(engine) == head_revision(engine)


def ensure_schema(engine: Engine, auto_upgrade: bool) -> None:
    """Upgrade the embedded SQLite database; refuse to run on an out-of-date server database."""
    if schema_is_current(engine):
        return
    if auto_upgrade:
        upgrade(engine)
        return
    raise SchemaOutOfDate(
        f"database schema is at revision {current_revision(engine) or 'none'}, "
        f"this scalewatch needs {head_revision(engine)}: run `scalewatch db upgrade` "
        "(with the same --database-url / SCALEWATCH_DATABASE_URL) and start again"
    )
