"""`scalewatch follow wandb` when writing the spool is slower than a pass waits for it (a stuck
or slow disk): the records already read must not be read again, or a `--compute sum:NAME`
running sum counts them twice and every later point's compute (the fit's x-axis) is wrong.

Real W&B files (the real `wandb` package, offline) and a real server; the one fault injected is
a spool batch write that blocks until the test releases it.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.client.test_wandb_follow import (
    _args,
    _check_run,
    _finished,
    _writer,
    wandb_installed,  # noqa: F401 - the fixture, used by name
)
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from trainer_client import wandb_follow
from trainer_client.spool import Spool
from trainer_client.wandb_follow import STATE_FILE, WandbFollower, import_wandb_main

pytestmark = pytest.mark.slow


def test_a_slow_spool_write_does_not_count_a_running_sum_twice(
    wandb_installed: None,  # noqa: F811
    live_server: LiveServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "trainer"
    _finished(_writer(tmp_path, out, "grpo-seed1", 120)[0])

    # The disk is stuck: a batch write blocks until released (bounded, so a broken test ends).
    # A pass waits 0.5 s for its points to be spooled instead of 30 s.
    released, blocked = threading.Event(), threading.Event()
    real_write_batch = Spool.write_batch

    def stuck_write_batch(self: Spool, points: list[dict[str, Any]]) -> Path:
        blocked.set()
        released.wait(60)
        return real_write_batch(self, points)

    monkeypatch.setattr(Spool, "write_batch", stuck_write_batch)
    monkeypatch.setattr(wandb_follow, "FLUSH_TIMEOUT", 0.5)

    follower = WandbFollower(out, _args(tmp_path, live_server))
    first = follower.poll_once()  # reads the whole log; its points are not spooled in time
    assert blocked.is_set()
    (w,) = follower.runs.values()
    assert not w.finished
    released.set()  # the disk answers again
    second = follower.poll_once()
    wait_for(lambda: follower.poll_once() == 0 and w.finished)

    # --compute sum:perf/total_num_tokens: step s has 1000 x (s + 1) tokens, not more.
    run = _check_run(live_server, "grpo-seed1", 120)
    assert run["status"] == "finished"
    # 120 steps x 2 metrics + 3 evaluations, each read and logged once.
    assert (first, second, w.values) == (243, 0, 243)
    # The saved running sum is the log's: a restarted follower goes on from the right total,
    # and finds nothing new to send.
    saved = json.loads((Spool(str(tmp_path / "spool"), "math-rl", "grpo-seed1").dir
                        / STATE_FILE).read_text("utf-8"))
    assert saved["compute"]["total"] == 120 * 1000.0
    again = WandbFollower(out, _args(tmp_path, live_server))
    assert again.poll_once() == 0


def test_import_waits_for_a_slow_spool_and_finishes_the_run(
    wandb_installed: None,  # noqa: F811
    live_server: LiveServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "trainer"
    _finished(_writer(tmp_path, out, "grpo-seed1", 120)[0])

    # The first batch write takes 1.5 s, three times what a pass waits: two passes in a row
    # find the points not spooled yet. `import` must keep polling, not give the run up as
    # having no exit record once a pass reads nothing new.
    real_write_batch = Spool.write_batch
    slow = [1.5]

    def slow_write_batch(self: Spool, points: list[dict[str, Any]]) -> Path:
        if slow:
            time.sleep(slow.pop())
        return real_write_batch(self, points)

    monkeypatch.setattr(Spool, "write_batch", slow_write_batch)
    monkeypatch.setattr(wandb_follow, "FLUSH_TIMEOUT", 0.5)

    args = argparse.Namespace(**vars(_args(tmp_path, live_server)), path=str(out))
    assert import_wandb_main(args) == 0
    assert not slow  # the slow write happened
    assert "no exit record" not in capsys.readouterr().err
    run = _check_run(live_server, "grpo-seed1", 120)  # each row summed once
    assert run["status"] == "finished"
