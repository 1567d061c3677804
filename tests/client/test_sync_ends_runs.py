"""`scalewatch sync` against a real server: a run whose trainer finished while the server was
unreachable (or offline) is marked finished once its points are delivered (it stayed
"running" and raised `stalled` alerts); a corrupt spool batch set aside makes the command
exit 1 and say where it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trainer_client as sw
from tests.support.live_server import LiveServer
from tests.support.net import free_port
from trainer_client.spool import Spool


def _sync(url: str, home: Path) -> tuple[int, str]:
    """`scalewatch sync` in a process of its own: (exit code, what it printed)."""
    env = dict(os.environ, SCALEWATCH_HOME=str(home))
    env.pop("SCALEWATCH_URL", None)
    env.pop("SCALEWATCH_TOKEN", None)
    p = subprocess.run([sys.executable, "-m", "trainer_client.cli", "sync", "--url", url],
                       env=env, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def _run(server: LiveServer, project: str, name: str) -> dict:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
    return next(r for r in runs if r["name"] == name)


def test_sync_carries_the_end_of_a_run_finish_could_not_send(
        live_server: LiveServer, tmp_path: Path) -> None:
    home = tmp_path / "home"
    down = sw.init("p", "unreachable", url=f"http://127.0.0.1:{free_port()}", home=home)
    for i in range(50):
        down.log({"reward": i / 100}, step=i, compute=float(i + 1))
    assert down.finish(timeout=1) == 50  # nothing delivered: the spool keeps it all
    off = sw.init("p", "offline", mode="offline", home=home)
    off.log({"reward": 0.5}, step=1, compute=1.0)
    off.finish(status="failed")
    resumed = sw.init("p", "resumed", mode="offline", home=home)
    resumed.log({"reward": 0.1}, step=1, compute=1.0)
    resumed.finish()
    again = sw.init("p", "resumed", mode="offline", home=home)  # the trainer goes on
    again.log({"reward": 0.2}, step=2, compute=2.0)
    again.flush()

    code, err = _sync(live_server.url, home)
    assert code == 0, err
    assert _run(live_server, "p", "unreachable")["status"] == "finished"
    assert _run(live_server, "p", "offline")["status"] == "failed"
    assert _run(live_server, "p", "resumed")["status"] == "running"  # init() took it back


def test_a_corrupt_batch_set_aside_fails_the_sync_and_says_where(
        live_server: LiveServer, tmp_path: Path) -> None:
    home = tmp_path / "home"
    off = sw.init("p", "corrupt", mode="offline", home=home)
    for i in range(30):
        off.log({"reward": i / 100}, step=i, compute=float(i + 1))
    off.finish()
    spool = Spool(home, "p", "corrupt")
    first = spool.batches()[0]
    first.write_bytes(first.read_bytes()[:20])  # cut short
    code, out = _sync(live_server.url, home)
    assert code == 1, out
    assert "1 batch(es) set aside in" in out and str(spool.dir / "rejected") in out
