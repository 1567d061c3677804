"""PipelineRL sidecar against fixture experiment directories shaped like PipelineRL's."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.client.sw_fakes import FakeServer
from trainer_client.pipelinerl import (
    Sidecar,
    add_sidecar_arguments,
    parse_trainer_line,
    read_gpu_count,
    run_sidecar,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("fast_backoff")]

T0 = 1_790_000_000.0  # launch time (mtime of exp_config.yaml)
SPS = 1024  # samples per step

EXP_CONFIG = """\
output_dir: results/math_7b
world:
  replicas: 1
  actor_fraction: 4
  preprocessor_fraction: 0
  finetune_fraction: 4
jobs:
- kind: actor_llm
  idx: 0
  node_rank: 0
  gpus:
  - 0
  - 1
  port: 8080
- kind: actor_llm
  idx: 1
  node_rank: 0
  gpus:
  - 2
- kind: environment
  node_rank: 0
  gpus: []
- kind: finetune
  node_rank: 0
  gpus:
  - 3
"""  # 4 GPUs


def trainer_line(step: int, at: float, reward: float = 0.5) -> str:
    stamp = time.strftime("%m/%d/%Y %H:%M:%S", time.localtime(at))
    metrics = {"stats/samples": step * SPS, "stats/tokens": step * SPS * 700.0,
               "rl/reward": reward, "stats/lag": 3.0}
    pretty = {k: f"{v:.3f}" for k, v in metrics.items()}
    return f"{stamp}.000 - INFO - pipelinerl.finetune_loop - Completed steps {step}: {pretty}\n"


def eval_line(version: int, success: float) -> str:
    return json.dumps({"test_success_mean": success, "test_reward_mean": success,
                       "aime_2024/success_mean": success / 2,
                       "trainer_model_version": version, "test_latency_mean": 1.0}) + "\n"


def make_exp(root: Path) -> Path:
    exp = root / "results" / "math_7b"
    (exp / "conf").mkdir(parents=True)
    (exp / "finetune" / "log").mkdir(parents=True)
    (exp / "streams" / "stats_test" / "0" / "0").mkdir(parents=True)
    (exp / "conf" / "exp_config.yaml").write_text(EXP_CONFIG)
    os.utime(exp / "conf" / "exp_config.yaml", (T0, T0))
    return exp


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def log_path(exp: Path) -> Path:
    return exp / "finetune" / "log" / "info_0.log"


def stream_path(exp: Path) -> Path:
    return exp / "streams" / "stats_test" / "0" / "0" / "0.jsonl"


def test_parsers(tmp_path):
    exp = make_exp(tmp_path)
    assert read_gpu_count(exp) == 4
    (exp / "conf" / "exp_config.yaml").write_text("world:\n  actor_fraction: 4\n"
                                                  "  finetune_fraction: 4\n")
    assert read_gpu_count(exp) == 8  # fallback on world fractions
    assert read_gpu_count(tmp_path / "nope") is None
    step, m, when = parse_trainer_line(trainer_line(7, T0 + 60))
    assert step == 7 and m["stats/samples"] == 7 * SPS and m["rl/reward"] == 0.5
    assert when == pytest.approx(T0 + 60)
    assert parse_trainer_line("some other log line") is None


def test_join_restart_rotation_and_no_resend(tmp_path):
    exp = make_exp(tmp_path)
    home = tmp_path / "home"
    with FakeServer() as srv:
        sc = Sidecar(exp, project="pl", name="math", url=srv.url, home=home)
        append(stream_path(exp), eval_line(0, 0.10))  # initial eval, before any step
        for s in (1, 2, 3):
            append(log_path(exp), trainer_line(s, T0 + 900 * s))
        append(stream_path(exp), eval_line(2 * SPS, 0.20))
        append(stream_path(exp), eval_line(4 * SPS, 0.30))  # trainer not there yet
        append(stream_path(exp), '{"test_success_mean": 0.9')  # partial line: not read yet
        assert sc.poll_once() == 5
        assert len(sc.pending) == 1
        append(log_path(exp), trainer_line(4, T0 + 3600))
        sc.poll_once()
        assert sc.pending == []
        sc.run.flush()
        assert sc.run.finish(timeout=120) == 0
        pts = srv.points
        # 4 GPUs x 1800 s = 2 GPU-hours at step 2
        assert pts[(1, "val_pass_rate", 0)] == (0.10, 0.0)
        assert pts[(1, "val_pass_rate", 2)] == (0.20, pytest.approx(2.0))
        assert pts[(1, "val_pass_rate", 4)] == (0.30, pytest.approx(4.0))
        assert pts[(1, "reward", 3)][0] == 0.5
        assert pts[(1, "trained_samples", 3)][0] == 3 * SPS
        assert pts[(1, "trained_tokens", 1)][0] == SPS * 700.0
        assert srv.run_meta[1]["fit_metric"] == "val_pass_rate"
        inserts_before = dict(srv.inserts)

        # sidecar restart: offsets come back from the spool dir, nothing is re-sent
        sc2 = Sidecar(exp, project="pl", name="math", url=srv.url, home=home)
        assert sc2.poll_once() == 0
        # the partial eval line completes
        append(stream_path(exp), "}\n".replace("}", ', "trainer_model_version": 4096}'))
        assert sc2.poll_once() == 1

        # experiment relaunch: new config mtime, log file replaced (new inode), stream truncated
        os.utime(exp / "conf" / "exp_config.yaml", (T0 + 7200, T0 + 7200))
        new_log = log_path(exp).with_suffix(".new")
        new_log.write_text(trainer_line(5, T0 + 7200 + 900))
        os.replace(new_log, log_path(exp))
        stream_path(exp).write_text(eval_line(5 * SPS, 0.40))
        assert sc2.poll_once() == 2  # one trainer line, one eval
        assert sc2.run.finish(timeout=120) == 0
        # compute: launch 1 counted to its last line (3600 s) + 900 s of launch 2 = 5 GPU-h
        assert srv.points[(1, "val_pass_rate", 5)] == (0.40, pytest.approx(5.0))
        assert srv.points[(1, "val_pass_rate", 4)][0] == 0.9
        for k, n in inserts_before.items():
            if k != (1, "val_pass_rate", 4):
                assert srv.inserts[k] == n, k


def test_run_sidecar_thread_and_cli_args(tmp_path):
    import argparse

    exp = make_exp(tmp_path)
    for s in (1, 2):
        append(log_path(exp), trainer_line(s, T0 + 600 * s))
    append(stream_path(exp), eval_line(SPS, 0.25))
    p = add_sidecar_arguments(argparse.ArgumentParser())
    args = p.parse_args(["--exp-dir", str(exp), "--project", "pl", "--gpus", "8"])
    assert args.exp_dir == str(exp) and args.gpus == 8 and args.poll_interval == 2.0
    with FakeServer() as srv:
        stop = threading.Event()
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("left", run_sidecar(
            exp, project="pl", url=srv.url, poll_interval=0.2, stop_event=stop, gpus=8,
            home=tmp_path / "home")))
        t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (1, "val_pass_rate", 1) not in srv.points:
            time.sleep(0.1)
        stop.set()
        t.join(60)
        assert result["left"] == 0
        assert srv.runs == {("pl", "math_7b"): 1}
        # 8 GPUs x 600 s = 1.333 GPU-hours at step 1
        assert srv.points[(1, "val_pass_rate", 1)] == (0.25, pytest.approx(8 * 600 / 3600))


def test_without_a_trainer_log_each_evaluation_keeps_a_step_of_its_own(tmp_path):
    """No finetune/log/info_0.log (a custom launcher): the evaluations fall back to the
    sidecar's clock after the join timeout, and all of them went to step 0, each one
    overwriting the one before; the model version they name orders them."""
    exp = make_exp(tmp_path)
    with FakeServer() as srv:
        sc = Sidecar(exp, project="pl", name="solo", url=srv.url, home=tmp_path / "home")
        sc.join_timeout = 0.0
        for version, success in ((640, 0.1), (1280, 0.2), (1920, 0.3)):
            append(stream_path(exp), eval_line(version, success))
        sc.poll_once()
        wait = time.monotonic() + 60
        while sc.pending and time.monotonic() < wait:  # the join timeout is "more than" 0 s
            sc.poll_once()
        assert sc.pending == []
        assert sc.run.finish(timeout=120) == 0
        got = {k[2]: v[0] for k, v in srv.points.items() if k[1] == "val_pass_rate"}
        assert got == {640: 0.1, 1280: 0.2, 1920: 0.3}
