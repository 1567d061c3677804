"""`scalewatch follow` / `scalewatch import` against a live server: verl, prime-rl and generic
JSON lines (with appends, a partial line, a restart and a rotation) and real TensorBoard event
files. Every step arrives exactly once, through trainer_client's spool."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from trainer_client import init
from trainer_client.cli import main as cli_main
from trainer_client.follow import LineFollower, parse_line

pytestmark = pytest.mark.slow


def _points(server: LiveServer, project: str, name: str, metric: str) -> list[dict]:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
        run = next(r for r in runs if r["name"] == name)
        return api.get(f"/api/v1/runs/{run['id']}/points", params={"metric": metric}).json()[
            "points"]


def _run(server: LiveServer, project: str, name: str) -> dict:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
        return next(r for r in runs if r["name"] == name)


def _verl_line(step: int) -> str:
    return json.dumps({"step": step, "data": {"val-core/gsm8k/acc/mean@1": step / 100,
                                              "critic/score/mean": step / 50,
                                              "timing/gen": 1.5, "note": "text is ignored"}})


def test_parse_line_formats() -> None:
    assert parse_line(_verl_line(3), "verl") == (
        3, {"val-core/gsm8k/acc/mean@1": 0.03, "critic/score/mean": 0.06, "timing/gen": 1.5})
    assert parse_line('{"step": 2, "eval/x/avg@4": 0.5, "progress/total_tokens": 10}',
                      "prime-rl") == (2, {"eval/x/avg@4": 0.5, "progress/total_tokens": 10.0})
    nested = '{"trainer/global_step": 7, "eval": {"ds": {"avg_score": 0.25}}, "nan": NaN}'
    assert parse_line(nested, "jsonl", "trainer/global_step") == (7, {"eval/ds/avg_score": 0.25})
    for junk in ("", "not json", '{"data": {}}', '{"step": -1, "data": {"a": 1}}', '{"step": 1'):
        assert parse_line(junk, "verl") is None


def test_verl_follow_survives_partial_lines_restart_and_rotation(
    live_server: LiveServer, tmp_path: Path
) -> None:
    log = tmp_path / "math-rl" / "grpo.jsonl"
    log.parent.mkdir()
    home = tmp_path / "spool"

    def follower() -> LineFollower:
        run = init("verl-follow", "grpo", url=live_server.url, home=home, compute_unit="steps")
        return LineFollower("verl", log, run)

    log.write_text("".join(_verl_line(s) + "\n" for s in range(1, 6)))
    f = follower()
    f.poll_once()
    with log.open("a") as out:  # more lines, the last one half-written
        out.write("".join(_verl_line(s) + "\n" for s in range(6, 11)) + _verl_line(11)[:20])
    f.poll_once()
    assert f.run.finish(status="") == 0  # the follower stops (SIGTERM)...

    f = follower()  # ... and restarts: it resumes at its saved offset
    with log.open("a") as out:
        out.write(_verl_line(11)[20:] + "\n" + _verl_line(12) + "\n")
    f.poll_once()
    rotated = log.with_suffix(".new")  # the trainer restarts: a new file replaces the old one
    rotated.write_text("".join(_verl_line(s) + "\n" for s in range(13, 16)))
    os.replace(rotated, log)
    f.poll_once()
    assert f.run.finish() == 0

    pts = _points(live_server, "verl-follow", "grpo", "val-core/gsm8k/acc/mean@1")
    assert [p["step"] for p in pts] == list(range(1, 16))
    assert [p["compute"] for p in pts] == [float(s) for s in range(1, 16)]
    run = _run(live_server, "verl-follow", "grpo")
    assert run["fit_metric"] == "val-core/gsm8k/acc/mean@1"
    assert run["status"] == "finished"


def test_import_prime_rl_with_cumulative_compute(live_server: LiveServer, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "run"
    out.mkdir(parents=True)
    rows = [{"step": s, "progress/total_tokens": 1000 * s, "train/all/reward/mean": s / 10,
             **({"eval/gsm8k/default/agent/avg@4": s / 20} if s % 5 == 0 else {})}
            for s in range(1, 41)]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = cli_main(["import", "prime-rl", str(tmp_path / "outputs"), "--project", "prime",
                     "--name", "r1", "--url", live_server.url, "--home", str(tmp_path / "h"),
                     "--compute", "metric:progress/total_tokens", "--no-progress"])
    assert code == 0
    run = _run(live_server, "prime", "r1")
    assert run["fit_metric"] == "eval/gsm8k/default/agent/avg@4"
    assert run["compute_unit"] == "progress/total_tokens"
    assert run["status"] == "finished"
    pts = _points(live_server, "prime", "r1", "eval/gsm8k/default/agent/avg@4")
    assert [(p["step"], p["compute"]) for p in pts] == [(s, 1000.0 * s) for s in range(5, 41, 5)]


def test_import_tensorboard_event_files(live_server: LiveServer, tmp_path: Path) -> None:
    tbx = pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    logdir = tmp_path / "tb"
    writer = tbx.SummaryWriter(str(logdir))
    steps = 12_000  # beyond EventAccumulator's default sample of 10,000 per tag
    for s in range(steps):
        writer.add_scalar("train/reward", s / steps, s)
        if s % 1000 == 0:
            writer.add_scalar("eval/math/avg_score", s / (2 * steps), s)
    writer.close()
    code = cli_main(["import", "tensorboard", str(logdir), "--project", "tb", "--name", "t1",
                     "--url", live_server.url, "--home", str(tmp_path / "h"), "--no-progress",
                     "--compute", "sum:train/reward"])
    assert code == 0
    run = _run(live_server, "tb", "t1")
    assert run["fit_metric"] == "eval/math/avg_score"
    # Nothing sampled away (GET points answers pages of 10,000: read both).
    pts = _points(live_server, "tb", "t1", "train/reward")
    with live_server.client() as api:
        pts += api.get(f"/api/v1/runs/{run['id']}/points", params={
            "metric": "train/reward", "since_step": pts[-1]["step"] + 1}).json()["points"]
    assert [p["step"] for p in pts] == list(range(steps))
    evals = _points(live_server, "tb", "t1", "eval/math/avg_score")
    assert [p["step"] for p in evals] == list(range(0, steps, 1000))


def test_tensorboard_follow_reads_only_what_is_new_and_survives_a_restart(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """The tail keeps each event file's offset: a pass sends only what was written since the
    last one, a run directory that appears later is picked up, and a restarted follower sends
    nothing twice. Compute in GPU-hours comes from the events' own wall times."""
    tbx = pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from trainer_client.tensorboard import (
        TensorBoardFollower,
        TensorBoardTail,
        tensorboard_records,
    )

    logdir = tmp_path / "tb"
    writer = tbx.SummaryWriter(str(logdir / "actor"))
    t0 = 1.7e9

    def on_disk(d: Path, last_step: int) -> bool:
        writer.flush()  # tensorboardX writes from a thread: flush until the events are there
        return any(r[0] == last_step for r in tensorboard_records(d))

    def write(steps: range) -> None:
        for s in steps:  # one step every 36 s of wall time: 0.01 h, x 8 GPUs = 0.08 GPU-h
            writer.add_scalar("eval/avg_score", s / 100, s, walltime=t0 + 36.0 * s)
        wait_for(lambda: on_disk(logdir / "actor", steps[-1]))

    write(range(0, 20))
    tail = TensorBoardTail(logdir)
    assert [r[0] for r in tail.poll()] == list(range(20))
    assert tail.poll() == []  # nothing new: nothing read again
    write(range(20, 30))
    got = tail.poll()
    assert [r[0] for r in got] == list(range(20, 30))
    assert set(got[0][1]) == {"actor/eval/avg_score"}

    home = tmp_path / "spool"

    def follower() -> TensorBoardFollower:
        run = init("tb-follow", "grpo", url=live_server.url, home=home, compute_unit="gpu_hours")
        return TensorBoardFollower(logdir, run, "gpu-hours:8")

    f = follower()
    assert f.poll_once() == 30
    write(range(30, 40))
    critic = tbx.SummaryWriter(str(logdir / "critic"))  # a second run directory appears
    critic.add_scalar("loss", 0.5, 3, walltime=t0 + 108.0)
    critic.close()
    assert f.poll_once() == 11
    assert f.run.finish(status="") == 0  # the follower stops...
    f = follower()  # ... and restarts from its saved state: nothing is sent twice
    assert f.poll_once() == 0
    write(range(40, 45))
    assert f.poll_once() == 5
    assert f.run.finish() == 0
    writer.close()
    critic.close()

    pts = _points(live_server, "tb-follow", "grpo", "actor/eval/avg_score")
    assert [p["step"] for p in pts] == list(range(45))
    assert [round(p["compute"], 6) for p in pts] == [round(0.08 * s, 6) for s in range(45)]
    assert [p["step"] for p in _points(live_server, "tb-follow", "grpo", "critic/loss")] == [3]


def test_tensorboard_tail_reads_every_writer_of_a_directory_and_a_resume_overwrites(
    tmp_path: Path,
) -> None:
    """Two writers in one directory (train and eval): TensorBoard's DirectoryWatcher reads
    only the newest file, so the first writer's scalars stopped arriving (8 of 60). A trainer
    resumed from a checkpoint logs steps again in a new file: those values replace the old
    ones (they were dropped as already sent). A restarted tail skips exactly what it read."""
    tbx = pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from trainer_client.tensorboard import TensorBoardTail, tensorboard_records

    logdir = tmp_path / "tb"
    t0 = 1.7e9

    open_writers: list = []

    def written(steps: list[int]) -> bool:
        for w in open_writers:  # tensorboardX writes from a thread: flush until they are there
            w.flush()
        return {r[0] for r in tensorboard_records(logdir)} >= set(steps)

    train = tbx.SummaryWriter(str(logdir), filename_suffix=".train")
    open_writers.append(train)
    train.add_scalar("train/loss", 0.0, 0, walltime=t0)
    train.flush()
    wait_for(lambda: written([0]))
    tail = TensorBoardTail(logdir)
    assert [r[0] for r in tail.poll()] == [0]
    evals = tbx.SummaryWriter(str(logdir), filename_suffix=".eval")  # a second file
    open_writers.append(evals)
    got: dict[int, dict[str, float]] = {}

    def write(steps: range) -> None:
        for s in steps:
            train.add_scalar("train/loss", s + 0.5, s, walltime=t0 + s)
            if s % 5 == 0:
                evals.add_scalar("eval/acc", s / 100, s, walltime=t0 + s)

        def caught_up() -> bool:
            # Each writer flushes from a thread of its own: a pass may see a step's eval
            # before its train scalar, so the tail's rows are merged and every one is awaited.
            for w in open_writers:
                w.flush()
            for s, m, _ in tail.poll():
                got.setdefault(s, {}).update(m)
            return all("train/loss" in got.get(s, {}) for s in steps) and all(
                "eval/acc" in got.get(s, {}) for s in steps if s % 5 == 0)

        wait_for(caught_up)

    write(range(1, 6))  # both files have events now, and the tail has seen both
    write(range(6, 30))  # both writers go on
    assert sorted(got) == list(range(1, 30))
    assert all(got[s]["train/loss"] == s + 0.5 for s in got)
    assert [s for s in got if "eval/acc" in got[s]] == [5, 10, 15, 20, 25]
    train.close()
    evals.close()
    open_writers.clear()

    saved = dict(tail.events)
    resumed = tbx.SummaryWriter(str(logdir), filename_suffix=".resumed")
    for s in range(20, 35):  # from a checkpoint at step 20
        resumed.add_scalar("train/loss", s + 0.75, s, walltime=t0 + 100 + s)
    resumed.close()
    wait_for(lambda: written(list(range(35))))
    again = TensorBoardTail(logdir, events=saved)  # a restarted follower
    rows = {s: m for s, m, _ in again.poll()}
    assert sorted(rows) == list(range(20, 35))  # nothing of what was read is sent again
    assert all(rows[s]["train/loss"] == s + 0.75 for s in rows)
    assert again.poll() == []
    # A state saved by the tail before it counted events: steps up to the last one sent.
    legacy = TensorBoardTail(logdir, last={"train/loss": 29, "eval/acc": 25})
    assert sorted(s for s, _, _ in legacy.poll()) == list(range(30, 35))
