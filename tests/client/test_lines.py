"""LineTail: each line's number, an offset that moves only past consumed lines, over-long lines
skipped up to their newline, and states saved before line numbers were kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_client import lines
from trainer_client.lines import LineTail


def _read(tail: LineTail) -> list[tuple[int, bytes | None]]:
    return list(tail.lines())


def test_offset_moves_only_past_consumed_lines(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b"one\ntwo\nthree\npartial")
    tail = LineTail(f)
    it = tail.lines()
    assert next(it) == (1, b"one")
    assert next(it) == (2, b"two")
    it.close()  # the consumer stopped (an error) while handling line 2: it is read again
    assert tail.state()["offset"] == len(b"one\n") and tail.state()["line"] == 1
    assert _read(tail) == [(2, b"two"), (3, b"three")]  # the partial line waits
    with f.open("ab") as out:
        out.write(b" line\n")
    assert _read(tail) == [(4, b"partial line")]
    assert _read(tail) == []


def test_over_long_line_is_skipped_up_to_its_newline(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "MAX_READ", 16)
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 16)
    f = tmp_path / "a.jsonl"
    f.write_bytes(b"short\n" + b"x" * 50 + b"\nafter\n")
    tail = LineTail(f)
    assert _read(tail) == [(1, b"short"), (2, None), (3, b"after")]
    assert tail.state()["offset"] == f.stat().st_size and not tail.state()["skipping"]


def test_a_state_without_line_numbers_counts_them(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b"a\nb\nc\nd\n")
    inode = f.stat().st_ino
    tail = LineTail(f, {"inode": inode, "offset": 4})  # saved by an earlier version
    assert _read(tail) == [(3, b"c"), (4, b"d")]


def test_truncation_and_replacement_restart_the_numbering(tmp_path: Path) -> None:
    f = tmp_path / "a.jsonl"
    f.write_bytes(b"a\nb\nc\n")
    tail = LineTail(f)
    assert [n for n, _ in _read(tail)] == [1, 2, 3]
    f.write_bytes(b"x\n")  # truncated in place
    assert _read(tail) == [(1, b"x")]
    new = tmp_path / "b.jsonl"
    new.write_bytes(b"y\nz\n")
    new.replace(f)
    assert _read(tail) == [(1, b"y"), (2, b"z")]


def test_pipelinerl_trainer_lines_with_out_of_range_numbers_do_not_raise() -> None:
    from trainer_client.pipelinerl import parse_trainer_line

    huge = "1" + "0" * 400
    got = parse_trainer_line(f"Completed steps 3: {{'rl/reward': {huge}, 'stats/samples': 64}}")
    assert got is not None and got[0] == 3 and got[1] == {"stats/samples": 64.0}
    assert parse_trainer_line(f"Completed steps {huge}: {{'rl/reward': 0.5}}") is None


def test_import_skips_an_over_long_line_without_reading_it_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines, "MAX_READ", 16)
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 32)
    f = tmp_path / "a.jsonl"
    f.write_bytes(b'{"step": 1, "a": 1}\n{"step": 2, "a": ' + b"1" * 100
                  + b'}\n{"step": 3, "a": 3}')
    bad = lines.BadLines()
    assert list(lines.file_records("jsonl", f, "step", bad)) == [(1, {"a": 1.0}), (3, {"a": 3.0})]
    assert bad.count == 1


def _lines(n0: int, n1: int) -> bytes:
    return b"".join(b'{"step": %d}\n' % i for i in range(n0, n1))


def _stamp(path: Path, t: float) -> None:
    """A modification time of its own (a rename keeps it; writes a second apart set it)."""
    import os

    os.utime(path, (t, t))


@pytest.mark.parametrize("how", ["create", "copytruncate"])
def test_two_rotations_between_reads_lose_no_generation(tmp_path: Path, how: str) -> None:
    """Rotated twice while the follower was stopped (or within one poll): the file read so far
    is train.jsonl.2 now, the next generation train.jsonl.1, the newest train.jsonl. Only the
    first and the last were read, and steps 30-39 were lost without a word. A newer file that
    is no generation of it (train_eval.jsonl) is never read."""
    f = tmp_path / "train.jsonl"
    f.write_bytes(_lines(0, 20))
    tail = LineTail(f)
    assert len(_read(tail)) == 20
    state = tail.state()
    with f.open("ab") as out:
        out.write(_lines(20, 30))
    _stamp(f, 1_000)
    one, two = tmp_path / "train.jsonl.1", tmp_path / "train.jsonl.2"

    def rotate(t: float) -> None:
        if one.exists():
            one.rename(two)
        if how == "create":
            f.rename(one)
        else:  # copy, then empty the file in place (its inode stays)
            one.write_bytes(f.read_bytes())
            _stamp(one, t)
            with f.open("r+b") as live:
                live.truncate(0)

    rotate(1_001)
    with f.open("ab") as out:
        out.write(_lines(30, 40))
    _stamp(f, 1_002)
    rotate(1_003)
    f.write_bytes(_lines(40, 50))
    _stamp(f, 1_004)
    decoy = tmp_path / "train_eval.jsonl"
    decoy.write_bytes(b'{"step": 999}\n')
    _stamp(decoy, 1_003)
    got = [line for _, line in _read(LineTail(f, state))]
    assert got == [b'{"step": %d}' % i for i in range(20, 50)]


def test_a_byte_order_mark_does_not_cost_the_first_line() -> None:
    assert lines.parse_record(b'\xef\xbb\xbf{"step": 0, "loss": 0.5}', "jsonl") == (
        0, {"loss": 0.5})


def test_a_nested_step_key_is_named_as_its_metric_would_be() -> None:
    line = b'{"trainer": {"global_step": 7, "lr": 0.1}, "loss": 1.5}'
    assert lines.parse_record(line, "jsonl", "trainer/global_step") == (
        7, {"trainer/lr": 0.1, "loss": 1.5})
    assert lines.parse_record(b'{"trainer/global_step": 3, "loss": 1}', "jsonl",
                              "trainer/global_step") == (3, {"loss": 1.0})
    with pytest.raises(lines.BadLine, match="no 'trainer/step'"):
        lines.parse_record(line, "jsonl", "trainer/step")
