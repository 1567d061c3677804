"""A bad line costs that line and nothing after it (issue 35): `scalewatch follow` and
`scalewatch import`, run as the real command against a real server, skip each kind of bad
line with a warning naming FILE:LINE and send every good line; a follower SIGKILLed just after
a bad line and restarted loses no step and counts none twice."""

from __future__ import annotations

import gzip
import json
import signal
from pathlib import Path

import pytest

from tests.client.cli_proc import CliProcess, run_cli, user_facing
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow

METRIC = "val-core/gsm8k/acc/mean@1"


def _good(step: int) -> bytes:
    return json.dumps({"step": step, "data": {METRIC: step / 100, "tokens": 10 * step}}
                      ).encode() + b"\n"


# One of each kind of bad line, each where step `s` would have been.
BAD_LINES = {
    "lone surrogate in a key": lambda s: b'{"step": %d, "data": {"\\udfff": 1.0, "%s": 0.5}}\n'
    % (s, METRIC.encode()),
    "invalid UTF-8": lambda s: b'{"step": %d, "data": {"acc\xff": 0.5}}\n' % s,
    "10**400": lambda s: b'{"step": %d, "data": {"%s": 1%s}}\n' % (s, METRIC.encode(),
                                                                 b"0" * 400),
    "1e400": lambda s: b'{"step": %d, "data": {"%s": 1e400}}\n' % (s, METRIC.encode()),
    "deep nesting": lambda s: b'{"step": %d, "data": %s1%s}\n' % (s, b'{"a":' * 5000,
                                                                 b"}" * 5000),
    "nesting past MAX_DEPTH": lambda s: b'{"step": %d, "data": %s1%s}\n' % (
        s, b'{"a":' * 100, b"}" * 100),
    "not JSON": lambda s: b"step %d: acc=0.5\n" % s,
    "a JSON array": lambda s: b"[%d, 0.5]\n" % s,
    "NUL in a key": lambda s: b'{"step": %d, "data": {"a\\u0000b": 0.5}}\n' % s,
    "step out of range": lambda s: b'{"step": 1%s, "data": {"%s": 0.5}}\n' % (
        b"0" * 30, METRIC.encode()),
}


def _file_with_bad_lines(path: Path) -> tuple[list[int], dict[int, str]]:
    """Good steps 1..3, then each bad kind followed by a good step; returns (good steps,
    bad line number -> kind)."""
    good, bad, lines = [], {}, []
    step = 1
    for _ in range(3):
        lines.append(_good(step))
        good.append(step)
        step += 1
    for kind, make in BAD_LINES.items():
        lines.append(make(step))
        bad[len(lines)] = kind
        step += 1
        lines.append(_good(step))
        good.append(step)
        step += 1
    path.write_bytes(b"".join(lines))
    return good, bad


def _points(server: LiveServer, project: str, name: str, metric: str = METRIC) -> list[dict]:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
        run = next((r for r in runs if r["name"] == name), None)
        if run is None:
            return []
        return api.get(f"/api/v1/runs/{run['id']}/points", params={"metric": metric}).json()[
            "points"]


def test_every_kind_of_bad_line_is_a_bad_line() -> None:
    from trainer_client.lines import BadLine, parse_record

    for kind, make in BAD_LINES.items():
        with pytest.raises(BadLine):
            parse_record(make(7), "verl")
            pytest.fail(kind)
    assert parse_record(_good(3), "verl") == (3, {METRIC: 0.03, "tokens": 30.0})
    assert parse_record(b"   \n", "verl") is None  # blank: nothing, silently


def test_follow_skips_bad_lines_and_sends_the_rest(live_server: LiveServer,
                                                   tmp_path: Path) -> None:
    log = tmp_path / "grpo.jsonl"
    good, bad = _file_with_bad_lines(log)
    follower = CliProcess("follow", "verl", str(log), "--project", "bad", "--name", "f",
                          "--url", live_server.url, "--poll-interval", "0.1",
                          home=tmp_path / "h")
    try:
        wait_for(lambda: [p["step"] for p in _points(live_server, "bad", "f")] == good)
        for lineno in bad:
            follower.wait_err(f"skipped {log}:{lineno}: ")
    finally:
        code = follower.stop()
    assert code == 0, follower.err
    assert follower.err.count(f"skipped {log}:") == len(bad)
    assert user_facing(follower.err), follower.err


def test_import_skips_bad_lines_and_fails_only_when_nothing_is_read(
        live_server: LiveServer, tmp_path: Path) -> None:
    log = tmp_path / "grpo.jsonl"
    good, bad = _file_with_bad_lines(log)
    args = ("--url", live_server.url, "--no-progress")
    code, err = run_cli("import", "verl", str(log), "--project", "bad", "--name", "i", *args,
                        home=tmp_path / "h")
    assert code == 0, err
    assert [p["step"] for p in _points(live_server, "bad", "i")] == good
    for lineno in bad:
        assert f"skipped {log}:{lineno}: " in err
    assert f"{len(bad)} bad lines skipped" in err
    assert user_facing(err), err

    only_bad = tmp_path / "only-bad.jsonl"
    only_bad.write_bytes(b"".join(make(1) for make in BAD_LINES.values()))
    code, err = run_cli("import", "verl", str(only_bad), "--project", "bad", "--name", "j",
                        *args, home=tmp_path / "h")
    assert code == 2
    assert "nothing could be read" in err and f"{len(BAD_LINES)} bad lines skipped" in err
    assert user_facing(err), err


def test_import_reads_a_compressed_log_and_says_when_one_is_cut_short(
        live_server: LiveServer, tmp_path: Path) -> None:
    """An archived ``grpo.jsonl.gz`` is imported through its decompressor, bad lines and all;
    one cut short (copied while still being written) fails with what went wrong, no
    traceback."""
    plain = tmp_path / "grpo.jsonl"
    good, bad = _file_with_bad_lines(plain)
    log = tmp_path / "grpo.jsonl.gz"
    log.write_bytes(gzip.compress(plain.read_bytes()))
    args = ("--url", live_server.url, "--no-progress")
    code, err = run_cli("import", "verl", str(log), "--project", "bad", "--name", "gz", *args,
                        home=tmp_path / "h")
    assert code == 0, err
    assert [p["step"] for p in _points(live_server, "bad", "gz")] == good
    assert f"{len(bad)} bad lines skipped" in err and f"skipped {log}:{min(bad)}: " in err

    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(log.read_bytes()[:-40])
    code, err = run_cli("import", "verl", str(cut), "--project", "bad", "--name", "cut", *args,
                        home=tmp_path / "h")
    assert code == 2 and f"cannot read {cut}" in err, err
    assert user_facing(err), err


def test_follower_killed_after_a_bad_line_loses_and_repeats_nothing(
        live_server: LiveServer, tmp_path: Path) -> None:
    """SIGKILL right after the follower warned about a bad line, then a restart: every good
    step arrives once, and the running sum of `tokens` (--compute sum:tokens) is exactly the
    sum over the good lines -- a line read twice would count twice, a lost one not at all."""
    log = tmp_path / "grpo.jsonl"
    lines = [_good(s) for s in range(1, 6)]
    lines.append(BAD_LINES["lone surrogate in a key"](6))
    lines += [_good(s) for s in range(7, 11)]
    log.write_bytes(b"".join(lines))
    home = tmp_path / "h"

    def follower() -> CliProcess:
        return CliProcess("follow", "verl", str(log), "--project", "kill", "--name", "k",
                          "--url", live_server.url, "--poll-interval", "0.1",
                          "--compute", "sum:tokens", home=home)

    first = follower()
    first.wait_err(f"skipped {log}:6: ")
    first.kill()  # SIGKILL: no flush, no state saved beyond what was written already
    assert first.proc.returncode == -signal.SIGKILL

    with log.open("ab") as out:
        out.write(b"".join(_good(s) for s in range(11, 16)))
    second = follower()
    good = [s for s in range(1, 16) if s != 6]
    try:
        wait_for(lambda: [p["step"] for p in _points(live_server, "kill", "k")] == good)
    finally:
        code = second.stop()
    assert code == 0, second.err
    pts = _points(live_server, "kill", "k")
    total, expected = 0.0, []
    for s in good:
        total += 10 * s
        expected.append(total)
    assert [p["compute"] for p in pts] == expected
    assert [p["value"] for p in pts] == [s / 100 for s in good]
    assert user_facing(first.err + second.err)
