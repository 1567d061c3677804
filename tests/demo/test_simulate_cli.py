"""`scalewatch simulate` against a live server: every point arrives exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scalewatch.server.demo.presets import PRESETS
from scalewatch.server.demo.simulator import generate
from tests.support.live_server import LiveServer
from tests.support.points import all_points
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _default_sigint() -> None:
    # A command started in the background by a non-interactive shell (as CI scripts often
    # start the suite) ignores SIGINT, and children inherit an ignored signal: the simulator
    # would then never see the Ctrl-C this module sends. A user's Ctrl-C reaches a foreground
    # command, whose SIGINT is the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _simulate(server: LiveServer, home: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "SCALEWATCH_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "trainer_client.cli", "simulate", "--url", server.url,
         "--project", "sim", *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_default_sigint,
    )


def _run(server: LiveServer, name: str) -> dict | None:
    with server.client() as c:
        runs = c.get("/api/v1/runs", params={"project": "sim"}).json()["runs"]
    return next((r for r in runs if r["name"] == name), None)


def _check_complete(server: LiveServer, name: str, key: str = "baseline") -> None:
    recipe, traj = PRESETS[key], generate(PRESETS[key], 0)
    with server.client() as c:
        runs = c.get("/api/v1/runs", params={"project": "sim"}).json()["runs"]
        run = next(r for r in runs if r["name"] == name)
        assert run["status"] == "finished"
        assert run["target_compute"] == recipe.target and run["last_step"] == recipe.n_steps
        val = all_points(c, run["id"], "val_pass_rate")
        assert [p["step"] for p in val] == traj.eval_steps.tolist()
        assert np.allclose([p["value"] for p in val], traj.val_pass_rate)
        assert np.allclose([p["compute"] for p in val], traj.eval_compute)
        reward = all_points(c, run["id"], "reward")
        steps = [p["step"] for p in reward]
        assert steps == list(range(1, recipe.n_steps + 1))  # every step, exactly once
        assert np.allclose([p["value"] for p in reward], traj.reward[1:])


@pytest.mark.timeout(180)
def test_simulate_baseline_posts_every_point_once(live_server: LiveServer, tmp_path: Path) -> None:
    proc = _simulate(live_server, tmp_path, "--preset", "baseline", "--speed", "400")
    out, _ = proc.communicate(timeout=150)
    assert proc.returncode == 0, out
    assert "evaluation 108/108" in out and "done: 1 run(s) finished" in out
    _check_complete(live_server, PRESETS["baseline"].name)
    # Again: the finished run is skipped, nothing is re-posted.
    proc = _simulate(live_server, tmp_path, "--preset", "baseline", "--speed", "400")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "already finished" in out, out


@pytest.mark.timeout(180)
def test_simulate_ctrl_c_then_resume(live_server: LiveServer, tmp_path: Path) -> None:
    args = ("--preset", "baseline", "--name", "resumed")
    # Slow enough (about 80 s for the rest) that it cannot finish before the SIGINT; the SIGINT
    # comes once this run's points are known to be on the server (the project also holds the
    # finished run of the test before).
    proc = _simulate(live_server, tmp_path, *args, "--speed", "1", "--burst", "0.2")

    def mid_run() -> bool:
        assert proc.poll() is None, proc.communicate()[0]  # finished or failed before SIGINT
        run = _run(live_server, "resumed")
        return run is not None and (run["last_step"] or 0) > 0

    wait_for(mid_run, timeout=120, interval=0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "re-run the same command to resume" in out
    run = _run(live_server, "resumed")
    assert run is not None and run["status"] == "running"
    assert 0 < run["last_step"] < PRESETS["baseline"].n_steps
    proc = _simulate(live_server, tmp_path, *args, "--speed", "400")
    out, _ = proc.communicate(timeout=150)
    assert proc.returncode == 0, out
    _check_complete(live_server, "resumed")
