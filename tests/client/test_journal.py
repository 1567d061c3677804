"""The write-ahead journal: what a killed process logged comes back; a clean finish leaves none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trainer_client as sw
from trainer_client import journal
from trainer_client.spool import Spool, _pid_alive

REPO = Path(__file__).resolve().parents[2]


def journals(spool_dir: Path) -> list[Path]:
    return sorted(spool_dir.glob(f"{journal.PREFIX}*.log"))


def test_killed_process_journal_is_recovered_torn_line_skipped(tmp_path):
    # A child logs 50 points offline with a 1-hour spool interval, then dies by SIGKILL.
    code = (
        "import os, signal, trainer_client as sw\n"
        f"run = sw.init('p', 'n', mode='offline', home={str(tmp_path)!r})\n"
        "for s in range(50):\n"
        "    run.log({'m': s / 7}, step=s, compute=s * 1.5)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "SCALEWATCH_SPOOL_INTERVAL": "3600", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert proc.returncode == -9
    spool = Spool(tmp_path, "p", "n")
    assert spool.batches() == []  # nothing reached a batch file...
    [jf] = journals(spool.dir)  # ...but all of it is in the journal
    with open(jf, "ab") as f:
        f.write(b"(51, 76.5, {'m': 0.")  # a write torn by the kill
    assert journal.recover_into(spool, _pid_alive) == 50
    assert journals(spool.dir) == []
    points = [p for b in spool.batches() for p in Spool.read_batch(b)]
    assert [p["step"] for p in points] == list(range(50))
    assert points[7]["metrics"]["m"] == 7 / 7 and points[3]["compute"] == 4.5


def test_clean_finish_leaves_no_journal_and_live_journals_are_left_alone(tmp_path):
    run = sw.init("p", "clean", mode="offline", home=tmp_path)
    for s in range(10):
        run.log({"m": 0.5}, step=s, compute=float(s))
    spool_dir = Path(run.spool_dir)
    assert journals(spool_dir)  # journaling while running
    # Another init of the same run while this process lives must not steal its journal.
    assert journal.recover_into(Spool(tmp_path, "p", "clean"), _pid_alive) == 0
    run.finish()
    assert journals(spool_dir) == []
    assert sum(Spool.batch_size(b) for b in Spool(tmp_path, "p", "clean").batches()) == 10


def test_journal_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEWATCH_JOURNAL", "0")
    run = sw.init("p", "off", mode="offline", home=tmp_path)
    run.log({"m": 0.5}, step=0, compute=0.0)
    assert journals(Path(run.spool_dir)) == []
    run.finish()
