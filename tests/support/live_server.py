"""A real `scalewatch serve` (uvicorn) in a subprocess on a loopback port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.net import free_port


class LiveServer:
    def __init__(
        self,
        database_url: str,
        port: int | None = None,
        auth: bool = False,
        home: Path | None = None,
        extra_env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.port = port or free_port()
        self.auth = auth
        self.url = f"http://127.0.0.1:{self.port}"
        self.home = home
        self.extra_env = extra_env or {}
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen | None = None
        self.admin_token: str | None = None
        self.log_path: Path | None = None
        if auth:
            self.admin_token = self._make_token("admin")

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.home is not None:
            env["SCALEWATCH_HOME"] = str(self.home)
        env.setdefault("SCALEWATCH_REFIT_INTERVAL", "0.2")
        env.update(self.extra_env)
        return env

    def _make_token(self, scope: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer_client.cli",
                "token",
                "create",
                "--scope",
                scope,
                "--name",
                f"test-{scope}",
                "--database-url",
                self.database_url,
            ],
            env=self._env(),
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return out.stdout.strip().splitlines()[-1]

    def make_token(self, scope: str) -> str:
        return self._make_token(scope)

    def start(self, wait: bool = True) -> None:
        args = [
            sys.executable,
            "-m",
            "trainer_client.cli",
            "serve",
            "--port",
            str(self.port),
            "--database-url",
            self.database_url,
            "--log-level",
            "warning",
            *self.extra_args,
        ]
        if not self.auth:
            args.append("--no-auth")
        log_dir = Path(self.home or "/tmp")
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"server-{self.port}.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            args, env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.logs()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server not ready after {timeout}s: {self.logs()}")

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path else ""

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, like a crashed or OOM-killed server."""
        self._signal(signal.SIGKILL)

    def headers(self, token: str | None = None) -> dict[str, str]:
        tok = token or self.admin_token
        return {"Authorization": f"Bearer {tok}"} if tok else {}

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers(token), timeout=30)
