"""Followers against the ways log files really change under them, with real files and a real
server: a file rotated by rename (logrotate ``create``) or by copy and truncation
(``copytruncate``), and a file truncated and written again past the follower's offset (a
trainer relaunched that opens its log with ``"w"``). Every line written arrives exactly once
(checked through a running sum, ``--compute sum:tokens``: a line read twice counts twice), and
no line is turned into a bad line by being read from the middle."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from trainer_client import init, lines
from trainer_client.lines import LineFollower
from trainer_client.pipelinerl import TRAINER_LOG, Sidecar

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

METRIC = "acc"


def _line(step: int) -> str:
    return json.dumps({"step": step, "data": {METRIC: step / 100, "tokens": 10 * step}}) + "\n"


def _lines(steps: range | list[int]) -> str:
    return "".join(_line(s) for s in steps)


def _append(path: Path, text: str) -> None:
    with path.open("a") as out:
        out.write(text)


def _points(server: LiveServer, name: str, metric: str = METRIC) -> list[dict]:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": "adv"}).json()["runs"]
        run = next(r for r in runs if r["name"] == name)
        return api.get(f"/api/v1/runs/{run['id']}/points", params={"metric": metric}).json()[
            "points"]


def _follower(server: LiveServer, home: Path, name: str, log: Path) -> LineFollower:
    run = init("adv", name, url=server.url, home=home, compute_unit="tokens")
    return LineFollower("verl", log, run, compute="sum:tokens")


def _assert_each_once(server: LiveServer, name: str, steps: list[int]) -> None:
    pts = _points(server, name)
    assert [p["step"] for p in pts] == steps
    total, sums = 0.0, []
    for s in steps:
        total += 10 * s
        sums.append(total)
    assert [p["compute"] for p in pts] == sums  # no line counted twice, none skipped


def _stop_and_check(f: LineFollower, server: LiveServer, name: str, steps: list[int]) -> None:
    """The follower stops with every point delivered, no line was bad, each step came once."""
    assert f.run.finish(status="") == 0
    assert f.bad.count == 0
    _assert_each_once(server, name, steps)


def test_lines_written_before_a_rename_rotation_are_read_from_the_rotated_file(
        live_server: LiveServer, tmp_path: Path) -> None:
    """logrotate ``create``: the file is renamed to train.jsonl.1 and a new one created. The
    lines the trainer wrote after the follower's last pass are in train.jsonl.1 only: read
    there, while following and when the rotation happened while the follower was stopped."""
    log, home = tmp_path / "train.jsonl", tmp_path / "spool"
    log.write_text(_lines(range(1, 6)))
    f = _follower(live_server, home, "rename", log)
    f.poll_once()
    _append(log, _lines([6, 7]))  # after the last pass
    log.rename(tmp_path / "train.jsonl.1")
    log.write_text(_lines([8]))
    f.poll_once()
    _append(log, _lines([9]))
    f.poll_once()
    _append(log, _lines([10, 11]))
    assert f.run.finish(status="") == 0  # the follower stops; the file rotates meanwhile
    os.replace(log, tmp_path / "train.jsonl.1")
    log.write_text(_lines([12]))
    f = _follower(live_server, home, "rename", log)
    f.poll_once()
    _stop_and_check(f, live_server, "rename", list(range(1, 13)))


def test_copytruncate_keeps_the_lines_written_since_the_last_pass(
        live_server: LiveServer, tmp_path: Path) -> None:
    """logrotate ``copytruncate``: train.jsonl is copied to train.jsonl.1, then truncated in
    place; the lines written since the follower's last pass are read from the copy. Then the
    same with the trainer writing past the old offset before the follower looks again."""
    log, home = tmp_path / "train.jsonl", tmp_path / "spool"
    log.write_text(_lines(range(1, 11)))
    f = _follower(live_server, home, "copytruncate", log)
    f.poll_once()
    _append(log, _lines([11]))
    shutil.copyfile(log, tmp_path / "train.jsonl.1")
    os.truncate(log, 0)
    _append(log, _lines([12]))
    f.poll_once()
    _append(log, _lines([13]))
    shutil.copyfile(log, tmp_path / "train.jsonl.1")
    os.truncate(log, 0)
    _append(log, _lines(range(14, 20)))  # the file is longer than the old offset again
    f.poll_once()
    _stop_and_check(f, live_server, "copytruncate", list(range(1, 20)))


def _compress(src: Path, suffix: str) -> Path:
    """logrotate ``compress`` without ``delaycompress``: ``src`` compressed next to itself
    with ``suffix``'s tool, then removed."""
    out = src.with_name(src.name + suffix)
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
    with src.open("rb") as f, opener(out, "wb") as z:
        shutil.copyfileobj(f, z)
    src.unlink()
    return out


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_rotation_compressed_at_once_keeps_the_lines_written_since_the_last_pass(
        live_server: LiveServer, tmp_path: Path, suffix: str) -> None:
    """logrotate ``copytruncate`` + ``compress`` (no ``delaycompress``): the copy holding the
    lines written since the follower's last pass exists only compressed by the time it looks;
    they are read through the decompressor.  Then ``create`` + ``compress`` while the follower
    is stopped (the renamed file is gone, only train.jsonl.1<suffix> has its last lines), with
    an older compressed rotation beside it that must not be read again."""
    log, home = tmp_path / "train.jsonl", tmp_path / "spool"
    name = f"compressed{suffix.replace('.', '-')}"
    log.write_text(_lines(range(1, 11)))
    f = _follower(live_server, home, name, log)
    f.poll_once()
    _append(log, _lines([11, 12]))  # after the last pass
    shutil.copyfile(log, tmp_path / "train.jsonl.1")
    os.truncate(log, 0)
    _compress(tmp_path / "train.jsonl.1", suffix)
    _append(log, _lines([13]))
    f.poll_once()
    _append(log, _lines([14, 15]))
    assert f.run.finish(status="") == 0  # stopped; the file rotates meanwhile
    os.replace(tmp_path / f"train.jsonl.1{suffix}", tmp_path / f"train.jsonl.2{suffix}")
    os.replace(log, tmp_path / "train.jsonl.1")
    log.write_text(_lines([16]))
    _compress(tmp_path / "train.jsonl.1", suffix)
    f = _follower(live_server, home, name, log)
    f.poll_once()
    _stop_and_check(f, live_server, name, list(range(1, 17)))


def test_a_compressed_rotation_still_being_written_is_read_once_it_is_whole(
        live_server: LiveServer, tmp_path: Path) -> None:
    """The follower looks while logrotate is still writing train.jsonl.1.gz next to the plain
    copy it compresses: the plain copy is read (a compressed file cut short is never trusted
    for more than it holds), and nothing is read twice once the .gz is whole and the copy
    gone."""
    log, home = tmp_path / "train.jsonl", tmp_path / "spool"
    log.write_text(_lines(range(1, 6)))
    f = _follower(live_server, home, "partial-gz", log)
    f.poll_once()
    _append(log, _lines(range(6, 40)))
    copy = tmp_path / "train.jsonl.1"
    shutil.copyfile(log, copy)
    os.truncate(log, 0)
    whole = gzip.compress(copy.read_bytes())
    (tmp_path / "train.jsonl.1.gz").write_bytes(whole[: len(whole) // 2])  # cut short
    _append(log, _lines([40]))
    f.poll_once()
    copy.unlink()
    (tmp_path / "train.jsonl.1.gz").write_bytes(whole)
    _append(log, _lines([41]))
    f.poll_once()
    _stop_and_check(f, live_server, "partial-gz", list(range(1, 42)))


def test_a_file_rewritten_past_the_offset_is_read_from_its_start(
        live_server: LiveServer, tmp_path: Path) -> None:
    """The trainer is relaunched while the follower is stopped and opens its log with "w"
    (verl's file logger does): by the time the follower is back, the new file is longer than
    the saved offset. It is read from its start, not from the middle of a line."""
    log, home = tmp_path / "train.jsonl", tmp_path / "spool"
    log.write_text(_lines(range(1, 4)))
    f = _follower(live_server, home, "rewrite", log)
    f.poll_once()
    assert f.run.finish(status="") == 0
    with log.open("w") as out:  # same inode, truncated, then written again
        out.write(_lines(range(100, 110)))
    f = _follower(live_server, home, "rewrite", log)
    f.poll_once()
    _stop_and_check(f, live_server, "rewrite", [1, 2, 3, *range(100, 110)])


def _trainer_line(step: int) -> str:
    return (f"12/04/2026 10:00:{step % 60:02d} - INFO - Completed steps {step}: "
            f"{{'rl/reward': {step / 100}, 'stats/samples': {64 * step}}}\n")


def test_the_pipelinerl_sidecar_survives_rotation_rewrites_and_an_over_long_line(
        live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidecar's trainer log: lines written before a rename rotation, a log rewritten past
    the offset, and a line longer than a read (the lines after it used to wait for a newline
    that the read never reached, forever)."""
    monkeypatch.setattr(lines, "MAX_READ", 4096)
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 4096)
    exp = tmp_path / "exp"
    log = exp / TRAINER_LOG
    log.parent.mkdir(parents=True)
    sc = Sidecar(exp, project="adv", name="sidecar", url=live_server.url,
                 home=tmp_path / "spool", gpus=1)
    log.write_text("".join(_trainer_line(s) for s in range(1, 6)))
    sc.poll_once()
    _append(log, _trainer_line(6) + _trainer_line(7))
    log.rename(log.with_name(log.name + ".1"))
    log.write_text(_trainer_line(8))
    sc.poll_once()
    with log.open("w") as out:  # rewritten in place, longer than before
        out.write("".join(_trainer_line(s) for s in range(20, 30)))
    sc.poll_once()
    _append(log, "x" * 10_000 + "\n" + _trainer_line(30))
    sc.poll_once()
    assert sc.close(timeout=60) == 0
    got = [p["step"] for p in _points(live_server, "sidecar", "reward")]
    assert got == [*range(1, 9), *range(20, 31)]
