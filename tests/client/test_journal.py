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


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_uncommitted_record_ends_the_journal_and_text_journals_still_read(tmp_path):
    # A record whose commit byte was never stored (killed between the two stores) is skipped,
    # and so is everything after it; a line-format journal of an earlier version still reads.
    spool = Spool(tmp_path, "p", "torn")
    j = journal.Journal(spool.dir)
    assert j.open()
    for s in range(5):
        assert j.append(s, s * 1.5, {"m": s / 7, "é": -0.0}, 1e9 + s)
    pos = j._pos
    assert j.append(5, 7.5, {"m": 5 / 7, "é": 1.0}, 1e9 + 5)
    [live] = journals(spool.dir)
    dead = _dead_pid()
    data = bytearray(live.read_bytes())
    data[pos] = 0  # the last record's commit byte, as a kill before it would leave it
    (spool.dir / f"{journal.PREFIX}{dead}-000001.log").write_bytes(bytes(data))
    (spool.dir / f"{journal.PREFIX}{dead}-000002.log").write_bytes(
        b"(9, 13.5, {'m': 0.25}, 1000000009.0)\n(10, 15.0, {'m': 0."
    )
    j.close_and_remove()
    assert journal.recover_into(spool, _pid_alive) == 6
    points = [p for b in spool.batches() for p in Spool.read_batch(b)]
    assert [p["step"] for p in points] == [0, 1, 2, 3, 4, 9]
    assert points[3] == {"step": 3, "compute": 4.5, "metrics": {"m": 3 / 7, "é": -0.0},
                         "time": 1e9 + 3}
    assert points[5]["metrics"] == {"m": 0.25}
    assert journals(spool.dir) == []


def test_full_generation_rolls_over_and_retired_ones_are_kept_two_rotations(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(journal, "SEGMENT_BYTES", 4096)
    spool = Spool(tmp_path, "p", "roll")
    j = journal.Journal(spool.dir)
    assert j.open()
    names = {f"metric_{i}": float(i) for i in range(60)}  # a record bigger than a segment
    for s in range(40):
        assert j.append(s, float(s), {"m": 0.5} if s % 2 else names, 0.0)
    files = journals(spool.dir)
    assert len(files) > 2  # rolled over while appending, none deleted before a rotation
    dead = _dead_pid()
    for i, f in enumerate(files):  # as if the process had died: all of it comes back
        f.rename(f.with_name(f"{journal.PREFIX}{dead}-{i:06d}.log"))
    assert journal.recover_into(spool, _pid_alive) == 40
    points = [p for b in spool.batches() for p in Spool.read_batch(b)]
    assert [p["step"] for p in points] == list(range(40))
    assert points[0]["metrics"] == names
    j2 = journal.Journal(spool.dir)
    assert j2.open()
    first = journals(spool.dir)
    assert j2.rotate() and j2.rotate()
    assert set(first) <= set(journals(spool.dir))  # retired by rotation 1, kept through 2
    assert j2.rotate()
    assert not set(first) & set(journals(spool.dir))
    j2.close_and_remove()
    assert journals(spool.dir) == []
