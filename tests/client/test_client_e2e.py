"""End-to-end: the real client against a real `scalewatch serve` subprocess on loopback.

1. server down when the trainer starts, up 10 s later      -> every point exactly once
2. server SIGKILLed and restarted mid-run (SQLite and PostgreSQL) -> exactly once
3. trainer process SIGKILLed mid-run, restarted from its checkpoint -> every point it had
   logged before the kill is on the server; and restarted *after* its last step with no
   checkpoint flush at all -> still every point (the write-ahead journal)
4. fault-injecting proxy (500s before/after commit, resets, stalls) -> exactly once
5. 422 -> that batch is dropped (kept in rejected/), no retry storm, later batches arrive
6. (server that accepts and never answers: tests/client/test_client_unit.py::
   test_silent_server_never_blocks_log)

No timing assertions: the tests wait (bounded by pytest-timeout) for outcomes only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trainer_client as sw
from tests.client.fault_proxy import FaultProxy
from tests.support.live_server import LiveServer
from tests.support.net import free_port
from trainer_client.spool import Spool

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bounded_backoff")]
REPO = Path(__file__).resolve().parents[2]


def server_points(server: LiveServer, run_id: int, metric: str) -> list[dict]:
    with server.client() as c:
        r = c.get(f"/api/v1/runs/{run_id}/points", params={"metric": metric})
        r.raise_for_status()
        return r.json()["points"]


def assert_exactly(server: LiveServer, run_id: int, metric: str, steps: list[int], value):
    pts = server_points(server, run_id, metric)
    got = [p["step"] for p in pts]
    assert len(got) == len(set(got)), "a step is stored twice"
    assert got == sorted(steps), f"missing {sorted(set(steps) - set(got))[:20]}"
    for p in pts:
        assert p["value"] == pytest.approx(value(p["step"])), p


def run_id_of(server: LiveServer, project: str, name: str) -> int:
    with server.client() as c:
        runs = c.get("/api/v1/runs", params={"project": project}).json()["runs"]
    [rid] = [r["id"] for r in runs if r["name"] == name]
    return rid


# ------------------------------------------------------------------------------ 1
@pytest.mark.timeout(240)
def test_server_down_at_start_then_up(tmp_path, sqlite_url):
    server = LiveServer(sqlite_url, port=free_port(), home=tmp_path / "srv")
    run = sw.init("e2e", "down-then-up", url=server.url, home=tmp_path / "client")
    try:
        step, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 10:  # the server is down for the first 10 s
            run.log({"m": step / 10}, step=step, compute=step * 0.5)
            step += 1
            time.sleep(0.01)
        server.start()
        for _ in range(300):
            run.log({"m": step / 10}, step=step, compute=step * 0.5)
            step += 1
            time.sleep(0.002)
        assert run.finish(timeout=120) == 0
        assert_exactly(server, run.id, "m", list(range(step)), lambda s: s / 10)
    finally:
        server.stop()


# ------------------------------------------------------------------------------ 2
@pytest.mark.timeout(300)
def test_server_sigkilled_and_restarted(tmp_path, database_url):
    server = LiveServer(database_url, port=free_port(), home=tmp_path / "srv")
    server.start()
    run = sw.init("e2e", "server-kill", url=server.url, home=tmp_path / "client")
    try:
        n = 3000
        for step in range(n):
            run.log({"m": step * 2.0, "r": 1.0}, step=step, compute=float(step))
            if step == 1000:
                run.flush()
                time.sleep(1.5)  # let some batches go out, then kill mid-stream
                server.kill()
            if step == 2000:
                server.start()
            time.sleep(0.001)
        assert run.finish(timeout=120) == 0
        assert_exactly(server, run.id, "m", list(range(n)), lambda s: s * 2.0)
        assert_exactly(server, run.id, "r", list(range(n)), lambda s: 1.0)
    finally:
        server.stop()


# ------------------------------------------------------------------------------ 3
class KillableTrainer:
    """tests/client/trainer_proc.py in a subprocess: it appends each step to `logged` after
    log() returned and checkpoints (flush + `ckpt`) every `ckpt_every` steps."""

    def __init__(
        self,
        server: LiveServer,
        tmp_path: Path,
        ckpt_every: int,
        pause: float,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.server = server
        self.logged, self.ckpt = tmp_path / "logged.txt", tmp_path / "ckpt.txt"
        self.home = tmp_path / "client"
        self.args = [str(ckpt_every), str(pause)]
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SCALEWATCH_FSYNC": "0",
            **(extra_env or {}),
        }

    def start(self, start: int, end: int) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tests/client/trainer_proc.py"),
                self.server.url,
                str(self.home),
                str(start),
                str(end),
                str(self.logged),
                str(self.ckpt),
                *self.args,
            ],
            env=self.env,
            cwd=str(REPO),
        )

    def kill_after(self, proc: subprocess.Popen, n_logged: int) -> list[int]:
        """SIGKILL once `n_logged` steps were logged; returns the steps logged before it."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.logged.exists() and len(self.logged.read_text().split()) >= n_logged:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        return sorted({int(s) for s in self.logged.read_text().split()})


@pytest.mark.timeout(300)
def test_trainer_sigkilled_and_resumed(tmp_path, sqlite_url):
    server = LiveServer(sqlite_url, home=tmp_path / "srv")
    server.start()
    trainer = KillableTrainer(server, tmp_path, ckpt_every=50, pause=0.004)
    try:
        before_kill = trainer.kill_after(trainer.start(0, 100_000), 700)
        assert len(before_kill) >= 700
        # The restarted trainer resumes from its last checkpoint and redoes later steps.
        resume = int(trainer.ckpt.read_text()) + 1
        end = before_kill[-1] + 200
        proc = trainer.start(resume, end)
        assert proc.wait(240) == 0
        rid = run_id_of(server, "e2e", "sigkill-trainer")
        stored = {p["step"]: p["value"] for p in server_points(server, rid, "m")}
        missing = [s for s in before_kill if s not in stored]
        assert not missing, f"{len(missing)} logged points lost, e.g. {missing[:10]}"
        assert sorted(stored) == list(range(end))
        assert all(stored[s] == pytest.approx(s / 1000.0) for s in stored)
    finally:
        server.stop()


@pytest.mark.timeout(240)
def test_trainer_sigkilled_without_checkpoint_loses_nothing(tmp_path, sqlite_url):
    """No flush, no redo: a trainer killed right after log() returned, restarted *after* its
    last logged step, still has every point on the server (the write-ahead journal)."""
    server = LiveServer(sqlite_url, home=tmp_path / "srv")
    server.start()
    # A long spool interval: without the journal, seconds of points live only in memory.
    trainer = KillableTrainer(
        server,
        tmp_path,
        ckpt_every=10**9,
        pause=0.002,
        extra_env={"SCALEWATCH_SPOOL_INTERVAL": "5"},
    )
    try:
        before_kill = trainer.kill_after(trainer.start(0, 100_000), 500)
        assert len(before_kill) >= 500
        proc = trainer.start(before_kill[-1] + 1, before_kill[-1] + 51)  # no step is redone
        assert proc.wait(240) == 0
        rid = run_id_of(server, "e2e", "sigkill-trainer")
        stored = {p["step"] for p in server_points(server, rid, "m")}
        missing = [s for s in before_kill if s not in stored]
        assert not missing, f"{len(missing)} logged points lost, e.g. {missing[:10]}"
    finally:
        server.stop()


# ------------------------------------------------------------------------------ 4
@pytest.mark.timeout(300)
def test_fault_proxy_exactly_once(tmp_path, sqlite_url):
    server = LiveServer(sqlite_url, home=tmp_path / "srv")
    server.start()
    faults = {
        "500_before": 0.15,
        "500_after": 0.15,
        "reset_before": 0.1,
        "reset_after": 0.1,
        "stall": 0.08,
    }
    try:
        with FaultProxy(server.url, faults, seed=7, stall_seconds=2.5) as proxy:
            run = sw.init("e2e", "faults", url=proxy.url, home=tmp_path / "client", timeout=1.0)
            n = 6000
            for step in range(n):
                run.log({"m": step + 0.5}, step=step, compute=float(step))
                if step % 500 == 0:
                    time.sleep(0.3)  # spread the points over several requests
            assert run.finish(timeout=240) == 0
            for name in faults:
                assert proxy.counts[name] >= 1, proxy.counts
            rid = run.id
        assert_exactly(server, rid, "m", list(range(n)), lambda s: s + 0.5)
    finally:
        server.stop()


# ------------------------------------------------------------------------------ 5
@pytest.mark.timeout(180)
def test_422_dropped_no_retry_storm(tmp_path, sqlite_url):
    server = LiveServer(sqlite_url, home=tmp_path / "srv")
    server.start()
    home = tmp_path / "client"
    # A batch the server must refuse (e.g. written by a buggy older client): negative compute.
    bad = Spool(home, "e2e", "invalid")
    bad.write_meta({"project": "e2e", "name": "invalid", "compute_unit": "gpu_hours"})
    bad.write_batch([{"step": 1, "compute": -5.0, "metrics": {"m": 1.0}, "time": 0.0}])
    try:
        with FaultProxy(server.url, {}) as proxy:
            run = sw.init("e2e", "invalid", url=proxy.url, home=home)
            for step in range(10, 20):
                run.log({"m": 2.0}, step=step, compute=1.0)
            assert run.finish(timeout=60) == 0
            posts = [p for m, p in proxy.requests if m == "POST" and p.endswith("/points")]
            # the refused batch went out at most twice (merged, then alone), never retried
            assert len(posts) <= 6
            assert len(list((bad.dir / "rejected").glob("*.json"))) == 1
        assert_exactly(server, run.id, "m", list(range(10, 20)), lambda s: 2.0)
    finally:
        server.stop()
