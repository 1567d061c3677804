"""Every command the README shows is run here against a real server (or by .ci/run itself)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.alerts.helpers import Receiver
from tests.support.live_server import LiveServer
from tests.support.net import free_port
from tests.support.polling import wait_for

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def shell_commands(prefix: str) -> list[str]:
    """Commands starting with `prefix`, with backslash continuations joined."""
    out = []
    for block in code_blocks("bash"):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(prefix):
                out.append(line)
    return out


@pytest.fixture
def server(sqlite_url, tmp_path):
    # The Slack URL becomes a loopback receiver, which webhooks refuse unless allowed.
    s = LiveServer(sqlite_url, auth=True, home=tmp_path / "home",
                   extra_env={"SCALEWATCH_WEBHOOK_ALLOW_PRIVATE": "1"})
    s.start()
    yield s
    s.stop()


def test_readme_curl_examples_work(server, tmp_path):
    curls = shell_commands("curl")
    assert len(curls) >= 6
    env = {**os.environ, "SW": server.url, "TOKEN": server.admin_token}
    with Receiver() as hook:
        for cmd in curls:
            if "compare" in cmd:  # the example compares runs 1 and 2: make run 2 exist, on
                # the same metric as run 1 (Compare never mixes metrics)
                with server.client() as http:
                    rid = http.post("/api/v1/runs",
                                    json={"project": "math-rl", "name": "run-b"}).json()["id"]
                    http.post(f"/api/v1/runs/{rid}/points", json={"points": [
                        {"step": 100, "compute": 150.0, "metrics": {"val_pass_rate": 0.3}}]})
            # Never send anything off this machine: the Slack URL becomes a loopback receiver.
            cmd = re.sub(r"https://hooks\.slack\.com/\S*?\"", hook.url + '"', cmd)
            out = subprocess.run(
                ["bash", "-c", cmd + " -w '\\n%{http_code}'"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            status = out.stdout.strip().splitlines()[-1]
            assert status.startswith("2"), (cmd, out.stdout, out.stderr)
    with server.client() as http:
        assert http.get("/api/v1/runs/1/points").json()["points"][0]["value"] == 0.31
        assert http.get("/api/v1/alert-rules").json()["total"] == 1
    # The token command that asks the running server, with the same $SW and $TOKEN.
    [token_cmd] = [c for c in shell_commands(".venv/bin/scalewatch token") if "--url" in c]
    bin_dir = Path(sys.executable).parent
    out = subprocess.run(
        ["bash", "-c", token_cmd.replace(".venv/bin/scalewatch", f"{bin_dir}/scalewatch")],
        env={**env, "SCALEWATCH_HOME": str(tmp_path / "no-database-here")},
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0 and out.stdout.startswith("sw_"), out.stderr
    assert not (tmp_path / "no-database-here").exists()


def test_readme_server_commands_say_where_scalewatch_is():
    """`scripts/run` does not put `scalewatch` on PATH: server-side commands say `.venv/bin/`.

    Bare `scalewatch` is right only for the client commands a trainer's environment has."""
    bare = [c for c in shell_commands("scalewatch ")]
    client_commands = ("sync", "pipelinerl-sidecar", "follow", "import", "fit-metric")
    assert all(c.split()[1] in client_commands for c in bare), bare
    assert len(shell_commands(".venv/bin/scalewatch ")) >= 8
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    for cmd in ("serve", "fit", "token", "simulate", "db"):
        assert not re.search(rf"(?<![/\w])`scalewatch {cmd}\b", prose), cmd


def test_readme_python_snippets_run(server, tmp_path):
    blocks = code_blocks("python")
    client_snippet = next(b for b in blocks if "sw.init" in b)
    api_snippet = next(b for b in blocks if "httpx.Client" in b)
    script = tmp_path / "trainer.py"
    script.write_text(
        "steps = 30\n"
        "import math\n"
        + client_snippet.replace(
            "    ...\n",
            "    gpu_hours = 100.0 * (step + 1)\n"
            "    val = 0.1 + 0.5 / (1 + (1500 / gpu_hours) ** 1.9)\n"
            "    reward = val + 0.05\n",
        )
    )
    env = {
        **os.environ,
        "SCALEWATCH_URL": server.url,
        "SCALEWATCH_TOKEN": server.admin_token,
        "SCALEWATCH_HOME": str(tmp_path / "client"),
    }
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    token = server.admin_token
    namespace: dict = {"token": token}
    api_snippet = api_snippet.replace("http://127.0.0.1:8765", server.url)
    with server.client() as http:
        rid = http.get("/api/v1/runs", params={"project": "math-rl"}).json()["runs"][0]["id"]
        assert http.get(f"/api/v1/runs/{rid}/points").json()["total"] == 30
        # The refitter works in the background: the snippet reads the fit it has stored.
        wait_for(lambda: http.get(f"/api/v1/runs/{rid}/fit").json()["status"] != "pending")
    exec(api_snippet.replace("/runs/1/", f"/runs/{rid}/"), namespace)  # noqa: S102
    assert namespace["fit"]["status"] in ("ok", "unidentified", "insufficient_data")


def test_readme_cli_commands(tmp_path, sqlite_url):
    rng = np.random.default_rng(0)
    c = np.linspace(200, 8000, 60)
    y = 0.1 + 0.5 / (1 + (2542 / c) ** 1.9) + rng.normal(0, 0.008, c.size)
    csv = tmp_path / "curve.csv"
    csv.write_text("compute,value\n" + "\n".join(f"{a},{b}" for a, b in zip(c, y, strict=True)))
    env = {
        **os.environ,
        "SCALEWATCH_HOME": str(tmp_path / "h"),
        "SCALEWATCH_DATABASE_URL": sqlite_url,
    }
    bin_dir = Path(sys.executable).parent
    commands = [
        cmd
        for cmd in (
            shell_commands(".venv/bin/scalewatch fit")
            + shell_commands(".venv/bin/scalewatch token")
            + shell_commands(".venv/bin/scalewatch db upgrade")
        )
        if "--url" not in cmd  # the one asking a running server: test_readme_curl_examples_work
    ]
    assert len(commands) >= 4
    for cmd in commands:
        cmd = cmd.replace("ID", "1").replace(".venv/bin/scalewatch", f"{bin_dir}/scalewatch")
        out = subprocess.run(
            ["bash", "-c", cmd],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, (cmd, out.stderr)
    assert (tmp_path / "curve.png").stat().st_size > 1000


@pytest.mark.timeout(300)
def test_scripts_run_serves_the_embedded_default(tmp_path):
    """`scripts/run` (the README's first command) installs and serves on SQLite."""
    port = free_port()
    env = {**os.environ, "SCALEWATCH_HOME": str(tmp_path / "home"), "SCALEWATCH_PORT": str(port)}
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "run"), "--no-auth"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        import time

        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            pytest.fail("scripts/run did not serve within 240 s")
        assert (tmp_path / "home" / "scalewatch.db").exists()
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


@pytest.mark.timeout(180)
def test_readme_simulate_command(server, tmp_path):
    [cmd] = shell_commands(".venv/bin/scalewatch simulate")
    bin_dir = Path(sys.executable).parent
    cmd = cmd.replace("http://127.0.0.1:8765", server.url)
    cmd = cmd.replace(".venv/bin/scalewatch", f"{bin_dir}/scalewatch")
    env = {k: v for k, v in os.environ.items() if k != "SCALEWATCH_TOKEN"}
    # The server has authentication on: the README's command must carry the token itself.
    env.update({"TOKEN": str(server.admin_token), "SCALEWATCH_HOME": str(tmp_path / "sim")})
    out = subprocess.run(
        ["bash", "-c", cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    with server.client() as http:
        runs = http.get("/api/v1/runs", params={"project": "scalerl-sim"}).json()["runs"]
        assert len(runs) == 1 and runs[0]["status"] == "finished"
        assert runs[0]["fit"] is not None
