"""`scalewatch import wandb` and `scalewatch follow wandb` on the transaction logs the real
`wandb` package writes in offline mode (`wandb/offline-run-*/run-*.wandb`), against a live
server: every step with its metrics, the run's project, name, group and config; a follower
started while the trainer writes gets everything, picks up a run directory that appears, marks
a run finished at its exit record, and resumes after a restart without loss or re-sending.

Nothing touches the network: WANDB_MODE=offline, and W&B's own directories are in tmp_path.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.client.cli_proc import run_cli, user_facing
from tests.support.live_server import LiveServer
from tests.support.net import free_port
from tests.support.polling import wait_for
from trainer_client.wandb_follow import WandbFollower, run_files
from trainer_client.wandb_log import HEADER, WandbLogError, events, scan

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent('''
    import os, sys, time
    import wandb
    out, name, group, steps, pause_at, release, exit_code = sys.argv[1:8]
    run = wandb.init(project="math-rl", name=name, group=group, mode="offline", dir=out,
                     config={"lr": 1e-6, "model": {"name": "qwen", "size": 8}})
    wandb.config.update({"batch_size": 512})
    for s in range(int(steps)):
        if s == int(pause_at):
            open(release + ".paused", "w").close()
            while not os.path.exists(release):
                time.sleep(0.05)
        row = {"critic/score/mean": s / 1000, "perf/total_num_tokens": 1000.0}
        if s % 50 == 0:
            row["val-core/openai/gsm8k/acc/mean@1"] = 0.2 + s / 2000
        if s == 100:
            row["response_length/hist"] = wandb.Histogram([1, 2, 3])  # not a scalar
        run.log(row, step=s)
    run.finish(exit_code=int(exit_code))
''')


@pytest.fixture(scope="module")
def wandb_installed() -> None:
    """The real wandb package (the dev extra installs it); in CI its absence is a failure."""
    try:
        import wandb  # noqa: F401
    except ImportError as exc:
        why = f"the wandb package is not installed ({exc}): pip install -e '.[dev]'"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("WANDB_") and not k.startswith("SCALEWATCH_")}
    env.update({
        "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true", "WANDB_CONSOLE": "off", "WANDB_X_DISABLE_STATS": "true",
        "WANDB_CONFIG_DIR": str(tmp / "wandb-home" / "config"),
        "WANDB_CACHE_DIR": str(tmp / "wandb-home" / "cache"),
        "WANDB_DATA_DIR": str(tmp / "wandb-home" / "data"),
        "WANDB_BASE_URL": "http://127.0.0.1:9",  # never reached in offline mode
    })
    return env


def _writer(tmp: Path, out: Path, name: str, steps: int, pause_at: int = -1,
            exit_code: int = 0) -> tuple[subprocess.Popen, Path]:
    script = tmp / "writer.py"
    script.write_text(WRITER)
    release = tmp / f"release-{name}"
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out), name, "cispo-768", str(steps), str(pause_at),
         str(release), str(exit_code)],
        env=_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, release


def _finished(proc: subprocess.Popen) -> None:
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out


def _logged_steps(out: Path, name: str) -> list[int]:
    for f in run_files(out):
        evs, _ = events(f)
        if any(e.kind == "run" and e.run is not None and e.run.name == name for e in evs):
            return [e.step for e in evs if e.kind == "history" and e.step is not None]
    return []


def _run(server: LiveServer, project: str, name: str) -> dict | None:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
    return next((r for r in runs if r["name"] == name), None)


def _points(server: LiveServer, run_id: int, metric: str) -> list[dict]:
    with server.client() as api:
        return api.get(f"/api/v1/runs/{run_id}/points",
                       params={"metric": metric, "max_points": 100_000}).json()["points"]


def _cli(tmp: Path, server: LiveServer, *argv: str) -> list[str]:
    return [sys.executable, "-m", "trainer_client.cli", *argv, "--url", server.url,
            "--home", str(tmp / "spool")]


def _check_run(server: LiveServer, name: str, steps: int) -> dict:
    run = _run(server, "math-rl", name)
    assert run is not None
    score = _points(server, run["id"], "critic/score/mean")
    assert [p["step"] for p in score] == list(range(steps))
    assert [p["value"] for p in score] == [s / 1000 for s in range(steps)]
    # --compute sum:perf/total_num_tokens: verl's per-step token count, summed.
    assert [p["compute"] for p in score] == [1000.0 * (s + 1) for s in range(steps)]
    val = _points(server, run["id"], "val-core/openai/gsm8k/acc/mean@1")
    assert [p["step"] for p in val] == list(range(0, steps, 50))
    assert set(run["latest"]) == {"critic/score/mean", "perf/total_num_tokens",
                                  "val-core/openai/gsm8k/acc/mean@1"}
    assert run["fit_metric"] == "val-core/openai/gsm8k/acc/mean@1"
    assert run["fit_metric_warning"] is None
    assert run["group"] == "cispo-768"  # --group-from-wandb
    cfg = run["config"]
    assert (cfg["lr"], cfg["model"], cfg["batch_size"]) == (1e-6, {"name": "qwen", "size": 8},
                                                             512)
    assert cfg["wandb_run_id"] and cfg["source"].endswith(".wandb")
    return run


def test_import_a_run_written_by_wandb(wandb_installed: None, live_server: LiveServer,
                                       tmp_path: Path) -> None:
    out = tmp_path / "trainer"
    _finished(_writer(tmp_path, out, "grpo-seed1", 300)[0])
    (run_dir,) = [p for p in (out / "wandb").iterdir() if p.name.startswith("offline-run-")]
    done = subprocess.run(
        _cli(tmp_path, live_server, "import", "wandb", str(run_dir), "--group-from-wandb",
             "--compute", "sum:perf/total_num_tokens"),
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "math-rl/grpo-seed1: 606 values" in done.stderr  # 300 steps x 2 + 6 evaluations
    run = _check_run(live_server, "grpo-seed1", 300)
    assert run["status"] == "finished"  # its log has the exit record


def test_follow_while_the_trainer_writes_and_new_runs_appear(
    wandb_installed: None, live_server: LiveServer, tmp_path: Path
) -> None:
    out = tmp_path / "trainer"
    writer, release = _writer(tmp_path, out, "grpo-seed1", 400, pause_at=200)
    # W&B writes its log in bursts: wait until the first 200 steps' rows are in the file
    # (the row of the step being logged is written when the next one starts).
    wait_for(lambda: len(_logged_steps(out / "wandb", "grpo-seed1")) >= 199, timeout=120)
    follower = subprocess.Popen(
        _cli(tmp_path, live_server, "follow", "wandb", str(out / "wandb"), "--group-from-wandb",
             "--compute", "sum:perf/total_num_tokens", "--poll-interval", "0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def sent(name: str) -> int:
            run = _run(live_server, "math-rl", name)
            return 0 if run is None else len(_points(live_server, run["id"], "critic/score/mean"))

        wait_for(lambda: sent("grpo-seed1") >= 199, timeout=120)
        run = _run(live_server, "math-rl", "grpo-seed1")
        assert run is not None and run["status"] == "running"
        second, _ = _writer(tmp_path, out, "grpo-seed2", 120)  # a new run directory
        release.touch()
        _finished(writer)
        _finished(second)
        wait_for(lambda: (_run(live_server, "math-rl", "grpo-seed1") or {}).get("status")
                 == "finished", timeout=120)
        wait_for(lambda: (_run(live_server, "math-rl", "grpo-seed2") or {}).get("status")
                 == "finished", timeout=120)
    finally:
        follower.send_signal(signal.SIGTERM)
        log, _ = follower.communicate(timeout=120)
    assert follower.returncode == 0, log
    assert "Traceback" not in log, log
    _check_run(live_server, "grpo-seed1", 400)
    _check_run(live_server, "grpo-seed2", 120)


def _args(tmp: Path, server: LiveServer) -> argparse.Namespace:
    return argparse.Namespace(
        project=None, name=None, url=server.url, token=None, home=str(tmp / "spool"),
        compute="sum:perf/total_num_tokens", fit_metric=None, group=None, group_from_wandb=True,
        poll_interval=0.2, no_progress=True)


def test_a_restarted_follower_resumes_without_loss_or_resending(
    wandb_installed: None, live_server: LiveServer, tmp_path: Path
) -> None:
    out = tmp_path / "trainer"
    writer, release = _writer(tmp_path, out, "grpo-seed1", 300, pause_at=150, exit_code=1)
    wait_for(lambda: len(_logged_steps(out / "wandb", "grpo-seed1")) >= 100, timeout=120)
    first = WandbFollower(out, _args(tmp_path, live_server))
    sent_before = first.poll_once()
    assert sent_before > 0
    assert first.stop() == 0  # stops following; the run is not finished by that
    release.touch()
    _finished(writer)

    again = WandbFollower(out, _args(tmp_path, live_server))
    sent_after = again.poll_once()
    # 300 steps x 2 metrics + 6 evaluations: each value sent exactly once over both followers.
    assert sent_before + sent_after == 606
    (w,) = again.runs.values()
    # The exit record (exit code 1) ends the run once the server has every point.
    wait_for(lambda: again.poll_once() == 0 and w.finished)
    run = _check_run(live_server, "grpo-seed1", 300)
    assert run["status"] == "failed"
    # The saved offsets never pass what was spooled: a third start sends nothing, and starts
    # no run at all (nothing new, the status already set).
    third = WandbFollower(out, _args(tmp_path, live_server))
    assert third.poll_once() == 0
    assert all(r.run is None for r in third.runs.values())


def test_an_exit_read_while_the_server_is_down_finishes_the_run_when_it_is_back(
    wandb_installed: None, live_server: LiveServer, tmp_path: Path
) -> None:
    out = tmp_path / "trainer"
    _finished(_writer(tmp_path, out, "grpo-seed1", 120)[0])
    live_server.stop()
    down = WandbFollower(out, _args(tmp_path, live_server))
    assert down.poll_once() == 243  # read and spooled; the server cannot acknowledge them
    (w,) = down.runs.values()
    assert w.ending == "finished" and not w.finished
    with pytest.warns(RuntimeWarning, match="not acknowledged"):
        assert w.stop(timeout=2) == 120  # stopped: every step (a point) stays spooled
    live_server.start()
    back = WandbFollower(out, _args(tmp_path, live_server))
    wait_for(lambda: back.poll_once() == 0 and all(r.finished for r in back.runs.values()))
    run = _check_run(live_server, "grpo-seed1", 120)
    assert run["status"] == "finished"


def test_the_reader_waits_for_records_being_written_and_skips_damage(
    wandb_installed: None, tmp_path: Path
) -> None:
    out = tmp_path / "trainer"
    _finished(_writer(tmp_path, out, "grpo-seed1", 300)[0])
    (log,) = run_files(out)
    data = log.read_bytes()
    assert data.startswith(HEADER) and len(data) > 3 * 32 * 1024  # several blocks
    whole, end = scan(log)
    assert end == len(data)
    # The file cut anywhere (a trainer mid-write): what is complete is read, the rest waits
    # for the next pass, and the two passes give every record once.
    part = tmp_path / "part.wandb"
    for cut in range(0, len(data), 4093):
        part.write_bytes(data[:cut])
        first, offset = scan(part)
        assert offset <= cut
        part.write_bytes(data)
        rest, _ = scan(part, offset)
        assert first + rest == whole, cut
    # A read budget takes a long log a part at a time, every record once.
    parts, offset = [], 0
    while offset < len(data):
        got, offset = scan(log, offset, read_bytes=4096, budget=10_000)
        assert got
        parts += got
    assert parts == whole
    # A damaged chunk in the middle: its block is skipped, the records after it are read.
    damaged = bytearray(data)
    damaged[40_000] ^= 0xFF
    part.write_bytes(bytes(damaged))
    got, end = scan(part, 0, final=True)
    assert end == len(data) and len(got) < len(whole)
    kept = next(i for i, (a, b) in enumerate(zip(got, whole, strict=False)) if a != b)
    lost = len(whole) - len(got)
    assert got == whole[:kept] + whole[kept + lost:]  # one stretch lost, the rest intact
    assert 40_000 - 32 * 1024 < len(b"".join(whole[kept:kept + lost])) < 32 * 1024
    # Not a W&B log: a clear error, not garbage.
    other = tmp_path / "other.wandb"
    other.write_bytes(b"not a wandb file at all")
    with pytest.raises(WandbLogError, match="not a W&B transaction log"):
        scan(other)
    other.write_bytes(HEADER[:-1] + b"\x01" + data[len(HEADER):])
    with pytest.raises(WandbLogError, match="format version 1"):
        scan(other)
    # A follower says so once and goes on with the real runs; an import refuses it.
    bad_dir = out / "wandb" / "run-20990101_000000-broken"
    bad_dir.mkdir()
    (bad_dir / "run-broken.wandb").write_bytes(b"not a wandb file at all")
    follower = WandbFollower(out, argparse.Namespace(project="p", name=None, home=str(tmp_path),
                                                     compute="step"))
    follower._discover()
    assert len(follower.runs) == 1 and len(follower.known) == 2
    follower._discover()  # known: not read (nor reported) again


def test_import_and_follow_wandb_end_at_once_on_a_refused_token(
    wandb_installed: None, tmp_path: Path, sqlite_url: str
) -> None:
    """As for the other formats (test_cli_ends.py): a token the server refuses ends `import
    wandb` and `follow wandb` with the reason (exit 2), nothing created; an unreachable server
    ends `import wandb`."""
    out = tmp_path / "trainer"
    _finished(_writer(tmp_path, out, "grpo-refused", 20)[0])
    server = LiveServer(sqlite_url, auth=True, home=tmp_path / "server-home")
    server.start()
    try:
        for command in ("import", "follow"):
            code, err = run_cli(command, "wandb", str(out / "wandb"), "--url", server.url,
                                "--token", "sw_not_a_token", home=tmp_path / "h", timeout=120)
            assert code == 2, err
            assert "HTTP 401" in err and server.url in err, err
            assert user_facing(err), err
        dead = f"http://127.0.0.1:{free_port()}"
        code, err = run_cli("import", "wandb", str(out / "wandb"), "--url", dead,
                            home=tmp_path / "h", timeout=120)
        assert code == 2 and f"cannot reach the scalewatch server at {dead}" in err, err
        assert _run(server, "math-rl", "grpo-refused") is None
    finally:
        server.stop()
