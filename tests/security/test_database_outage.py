"""Issue 35, database gone: while the database is unreachable or refuses writes, the API
answers 503 with Retry-After (the trainer client retries those), /readyz says not ready, and
the log says so once per outage and once when it is over, never a traceback per request.
Real servers on loopback, real PostgreSQL, a real read-only SQLite file."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from tests.support.databases import Postgres, require_postgres
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for

POINT = {"points": [{"step": 1, "compute": 1.0, "metrics": {"reward": 0.5}}]}


@contextmanager
def _server(tmp_path: Path, url: str) -> Iterator[tuple[LiveServer, httpx.Client, int]]:
    server = LiveServer(url, auth=True, home=tmp_path / "home")
    server.start()
    try:
        with server.client() as client:
            run_id = client.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
            assert client.get("/readyz").status_code == 200
            yield server, client, run_id
    finally:
        server.stop()


def _assert_503(r: httpx.Response) -> None:
    assert r.status_code == 503, (r.request.url, r.status_code, r.text[:300])
    assert int(r.headers["Retry-After"]) >= 1


def _log_count(server: LiveServer, needle: str) -> int:
    """Lines of the server process saying `needle`. Its refit process (server/refit_process.py)
    logs its own outage once too, marked "(refit process)": at most once per outage."""
    lines = server.logs().splitlines()
    assert sum(needle in ln for ln in lines if "(refit process)" in ln) <= 1, server.logs()
    return sum(needle in ln for ln in lines if "(refit process)" not in ln)


def _requests(client: httpx.Client, run_id: int) -> list[httpx.Response]:
    """What trainers and readers send: a write, reads, the MLflow surface."""
    return [
        client.post(f"/api/v1/runs/{run_id}/points", json=POINT),
        client.get("/api/v1/runs"),
        client.get(f"/api/v1/runs/{run_id}"),
        client.get("/api/2.0/mlflow/runs/get", params={"run_id": str(run_id)}),
        client.post("/api/2.0/mlflow/runs/log-metric", json={
            "run_id": str(run_id), "key": "reward", "value": 0.5, "timestamp": 0, "step": 2,
        }),
    ]


def test_a_renamed_postgres_database_is_503_and_logged_once(
    tmp_path: Path, postgres: Postgres
) -> None:
    require_postgres(postgres)
    url = postgres.new_database()
    name = make_url(url).database
    try:
        with _server(tmp_path, url) as (server, client, run_id):
            with postgres.admin.connect() as conn:
                conn.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = '{name}'"
                ))
                conn.execute(text(f'ALTER DATABASE "{name}" RENAME TO "{name}_away"'))
            for _ in range(3):  # past the token cache: the guard's lookup fails too
                client.headers["Authorization"] = f"Bearer {server.admin_token}"
                for r in _requests(client, run_id):
                    _assert_503(r)
                _assert_503(client.get("/readyz"))
            with postgres.admin.connect() as conn:
                conn.execute(text(f'ALTER DATABASE "{name}_away" RENAME TO "{name}"'))
            assert client.post(f"/api/v1/runs/{run_id}/points", json=POINT).status_code == 200
            assert client.get("/readyz").status_code == 200
            wait_for(lambda: _log_count(server, "database available again") == 1)
            assert _log_count(server, "database unavailable") == 1, server.logs()
            assert "Traceback" not in server.logs()
    finally:
        postgres.drop(url)


@contextmanager
def _sqlite_read_only(db: Path) -> Iterator[None]:
    """The database file and its WAL made immutable (root can write anything else): the
    file stays readable, every write fails, as on a read-only mount or a full disk. Not the
    -shm file: SQLite maps it, and a mapping of an immutable file faults."""
    files = [str(db), f"{db}-wal"]
    subprocess.run(["chattr", "+i", *files], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *files], check=True, capture_output=True)


def _can_chattr(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.write_text("x")
    if shutil.which("chattr") is None:
        return False
    made = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
    if made:
        subprocess.run(["chattr", "-i", str(probe)], check=True)
    return made


@contextmanager
def _postgres_read_only(postgres: Postgres, url: str) -> Iterator[None]:
    """The database made read-only (as a standby is), its connections ended so new ones
    take the setting."""
    name = make_url(url).database

    def switch(on: bool) -> None:
        with postgres.admin.connect() as conn:
            value = "on" if on else "off"
            conn.execute(text(
                f'ALTER DATABASE "{name}" SET default_transaction_read_only = {value}'
            ))
            conn.execute(text(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
            ))

    switch(True)
    try:
        yield
    finally:
        switch(False)


def test_a_database_that_refuses_writes_is_not_ready_and_503(
    tmp_path: Path, backend: str, database_url: str, postgres: Postgres
) -> None:
    """/readyz said ready while every write failed; the writes answered 500 (PostgreSQL)."""
    if backend == "sqlite" and not _can_chattr(tmp_path):
        pytest.skip("needs root and chattr to make the SQLite file read-only")
    with _server(tmp_path, database_url) as (server, client, run_id):
        refuse = (
            _sqlite_read_only(Path(make_url(database_url).database or ""))
            if backend == "sqlite" else _postgres_read_only(postgres, database_url)
        )
        with refuse:
            # a write check that succeeded stands for a second (a flood of probes is no flood
            # of writes): not ready within it
            wait_for(lambda: client.get("/readyz").status_code == 503)
            for _ in range(3):
                r = client.get("/readyz")
                _assert_503(r)
                assert r.json()["detail"] == "database does not accept writes"
                _assert_503(client.post(f"/api/v1/runs/{run_id}/points", json=POINT))
                _assert_503(client.post("/api/v1/runs", json={"project": "p", "name": "x"}))
                assert client.get(f"/api/v1/runs/{run_id}").status_code == 200  # reads work
        # writable again: ready, the writes go through, and the log says so once
        wait_for(lambda: client.get("/readyz").status_code == 200)
        assert client.post(f"/api/v1/runs/{run_id}/points", json=POINT).status_code == 200
        wait_for(lambda: _log_count(server, "database available again") == 1)
        assert _log_count(server, "database unavailable") == 1, server.logs()
        assert "Traceback" not in server.logs()
