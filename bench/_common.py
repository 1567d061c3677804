"""Helpers shared by the benches: temporary databases and a server subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get(
    "SCALEWATCH_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN.replace("+psycopg", ""), connect_timeout=3):
            return True
    except Exception:  # noqa: BLE001
        return False


class TempDatabase:
    """A throwaway SQLite file or PostgreSQL database."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "sqlite":
            self.dir = tempfile.mkdtemp(prefix="sw-bench-")
            self.url = f"sqlite:///{self.dir}/bench.db"
            self.name = None
        else:
            import psycopg

            self.name = f"sw_bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(PG_ADMIN.replace("+psycopg", ""), autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{self.name}"')
            self.url = PG_ADMIN.rsplit("/", 1)[0] + f"/{self.name}"

    @property
    def libpq_url(self) -> str:
        return self.url.replace("+psycopg", "")

    def drop(self) -> None:
        if self.kind == "postgresql":
            import psycopg

            with psycopg.connect(PG_ADMIN.replace("+psycopg", ""), autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def tree_pythonpath(root: Path) -> str:
    """PYTHONPATH that makes Python import `root`'s code: its `trainer_client`, and the
    `scalewatch` namespace from a folder of symlinks to its `server/`, `dashboard/` and
    `migrations/` (the names the editable install maps; `root` alone on PYTHONPATH would still
    import this checkout's `scalewatch.*` through the install's import hook, so a "baseline"
    would silently run the current code)."""
    ns = root / "_ns" / "scalewatch"
    ns.mkdir(parents=True, exist_ok=True)
    for name in ("server", "dashboard", "migrations"):
        link = ns / name
        if not link.exists():
            link.symlink_to(root / name, target_is_directory=True)
    return f"{root / '_ns'}{os.pathsep}{root}"


class Server:
    """`scalewatch serve --no-auth` in a subprocess."""

    def __init__(
        self,
        database_url: str,
        extra_env: dict[str, str] | None = None,
        root: Path = ROOT,
        extra_args: list[str] | None = None,
    ) -> None:
        """`root`: the source tree to run (another checkout, for a baseline in the same run)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        home = tempfile.mkdtemp(prefix="sw-home-")
        env = {**os.environ, "SCALEWATCH_HOME": home, **(extra_env or {})}
        if root != ROOT:  # ahead of the editable install of this checkout
            env["PYTHONPATH"] = tree_pythonpath(root)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer_client.cli",
                "db",
                "upgrade",
                "--database-url",
                database_url,
            ],
            env=env,
            check=True,
            capture_output=True,
            cwd=root,
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainer_client.cli",
                "serve",
                "--no-auth",
                "--port",
                str(self.port),
                "--database-url",
                database_url,
                "--log-level",
                "warning",
                *(extra_args or []),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=root,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# MLflow (its server) is a bench-only dependency, in a venv of its own: the project's venv has
# only the client (mlflow-skinny, for the MLflow-compatible endpoint's tests).
MLFLOW_VENV = ROOT / ".bench" / "mlflow-venv"
MLFLOW_PIN = "mlflow==3.17.2"


def ensure_mlflow() -> Path | None:
    py = MLFLOW_VENV / "bin" / "python"
    if not py.exists():
        print(f"installing {MLFLOW_PIN} into .bench/mlflow-venv (bench-only dependency)...",
              flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(MLFLOW_VENV)], check=True)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", MLFLOW_PIN, "psycopg[binary]"])
        if r.returncode != 0:
            return None
    return py
