"""Shared fixtures: databases (SQLite and PostgreSQL), in-process apps, live servers."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import Postgres, migrated_sqlite, require_postgres
from tests.support.live_server import LiveServer

warnings.filterwarnings("ignore", message=".*httpx2.*")

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    pg = Postgres()
    yield pg
    if pg.reachable() is None:
        pg.close()


def _database_url(backend: str, postgres: Postgres, tmp_path: Path, migrated: bool) -> str:
    if backend == "sqlite":
        if migrated:
            return migrated_sqlite(tmp_path)
        return f"sqlite:///{tmp_path / 'scalewatch.db'}"
    require_postgres(postgres)
    return postgres.new_database(migrated=migrated)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def database_url(backend: str, postgres: Postgres, tmp_path: Path) -> Iterator[str]:
    """A fresh, migrated database of each kind."""
    url = _database_url(backend, postgres, tmp_path, migrated=True)
    yield url
    if backend == "postgresql":
        postgres.drop(url)


@pytest.fixture
def empty_database_url(backend: str, postgres: Postgres, tmp_path: Path) -> Iterator[str]:
    """A fresh database with no schema at all."""
    url = _database_url(backend, postgres, tmp_path, migrated=False)
    yield url
    if backend == "postgresql":
        postgres.drop(url)


@pytest.fixture
def sqlite_url(tmp_path: Path, postgres: Postgres) -> str:
    return _database_url("sqlite", postgres, tmp_path, migrated=True)


@pytest.fixture
def store(database_url: str):  # noqa: ANN201
    from scalewatch.server.config import load_settings
    from scalewatch.server.db.engine import make_engine
    from scalewatch.server.store import SqlStore

    s = SqlStore(make_engine(load_settings(database_url=database_url)))
    yield s
    s.engine.dispose()


def make_app(database_url: str, auth: bool = False, workers: bool = False, **extra: object):  # noqa: ANN201
    from scalewatch.server.api.app import create_app
    from scalewatch.server.config import load_settings

    settings = load_settings(database_url=database_url, auth=auth, workers_enabled=workers, **extra)
    return create_app(settings)


@pytest.fixture
def api(database_url: str) -> Iterator:
    """In-process TestClient with auth off and no background workers."""
    from fastapi.testclient import TestClient

    app = make_app(database_url)
    with TestClient(app) as client:
        yield client
    app.state.store.engine.dispose()


@pytest.fixture
def live_app(database_url: str) -> Iterator[tuple]:
    """(app, TestClient) with the refitter, alert timer and webhook sender running, all fast."""
    from fastapi.testclient import TestClient

    app = make_app(
        database_url,
        workers=True,
        refit_interval=0.05,
        alert_interval=0.2,
        webhook_backoff=0.2,
        webhook_allow_private=True,  # the tests' webhook receivers listen on loopback
    )
    with TestClient(app) as client:
        yield app, client
    app.state.store.engine.dispose()


@pytest.fixture
def live_server(tmp_path: Path, sqlite_url: str) -> Iterator[LiveServer]:
    """A real server process on a loopback port, SQLite, auth off."""
    server = LiveServer(sqlite_url, home=tmp_path / "home")
    server.start()
    yield server
    server.stop()


# --- `slow`: what `scripts/test -m "not slow"` (the fast loop) leaves out -----------------------
# A test is slow when it starts processes (a live server, a browser, the CLI, trainers) or runs
# a fuzzer or a long detection scenario. Marked here from what the test does, so a new live-server
# test cannot silently land in the fast loop.
SLOW_FIXTURES = frozenset({"live_server", "seeded", "browser", "page", "server"})
SLOW_CALLS = ("LiveServer(", "subprocess.", "run_cli(", "Popen(", "_simulate(", "trainer_proc")
SLOW_MODULES = frozenset({
    "tests/server/test_schemathesis.py",  # a fuzzer: hundreds of requests per backend
    "tests/security/test_dash_fuzz.py",  # a fuzzer: 2,000 callback requests per backend
    "tests/alerts/test_detection.py",  # whole runs refitted evaluation by evaluation
    "tests/deploy/test_scale_out.py",  # two server processes
})


def _starts_processes(fn: object) -> bool:
    import inspect

    try:
        source = inspect.getsource(fn) if fn is not None else ""  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False
    return any(call in source for call in SLOW_CALLS)


def _is_slow(item: pytest.Item) -> bool:
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    rel = Path(str(item.fspath)).resolve().relative_to(Path(__file__).resolve().parents[1])
    if rel.as_posix() in SLOW_MODULES:
        return True
    # Fixtures of the test's own module that start a server (e.g. `authed_server`) count too.
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        if defs and _starts_processes(defs[-1].func):
            return True
    return _starts_processes(getattr(item, "function", None))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "slow" not in item.keywords and _is_slow(item):
            item.add_marker(pytest.mark.slow)
