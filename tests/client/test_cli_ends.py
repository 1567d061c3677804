"""Commands that end, and say what they do (issue 36, item 4): the real `scalewatch` command in
a subprocess against a real server. A refused token or an unreachable server ends `import` at
once with the reason (before, it waited 5 minutes); a follower says when it waits for its file,
when the server is back and when it stops, and marks the run finished on --finish-on-exit;
the TensorBoard follower does not log a line per poll."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.cli_proc import CliProcess, run_cli, user_facing
from tests.support.live_server import LiveServer
from tests.support.net import free_port
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow

METRIC = "val-core/gsm8k/acc/mean@1"
# Longer than any fast refusal takes, far shorter than the 300 s wait this replaces.
ENDS_WITHIN = 60.0


def _verl(path: Path, steps: range) -> None:
    with path.open("a") as out:
        for s in steps:
            out.write(json.dumps({"step": s, "data": {METRIC: s / 100}}) + "\n")


def _run(server: LiveServer, project: str, name: str) -> dict | None:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
    return next((r for r in runs if r["name"] == name), None)


def _steps(server: LiveServer, project: str, name: str) -> list[int]:
    run = _run(server, project, name)
    if run is None:
        return []
    with server.client() as api:
        pts = api.get(f"/api/v1/runs/{run['id']}/points", params={"metric": METRIC}).json()
    return [p["step"] for p in pts["points"]]


@pytest.fixture
def authed_server(tmp_path: Path, sqlite_url: str) -> Iterator[LiveServer]:
    server = LiveServer(sqlite_url, auth=True, home=tmp_path / "server-home")
    server.start()
    yield server
    server.stop()


def test_import_ends_at_once_on_a_refused_token_or_an_unreachable_server(
        authed_server: LiveServer, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    _verl(log, range(1, 11))
    base = ("import", "verl", str(log), "--project", "p", "--name", "r", "--no-progress")
    url = authed_server.url

    started = time.monotonic()
    code, err = run_cli(*base, "--url", url, "--token", "sw_not_a_token", home=tmp_path / "h",
                        timeout=ENDS_WITHIN)
    assert code == 2, err
    assert "HTTP 401" in err and url in err and "--token" in err and "nothing was imported" in err
    assert user_facing(err), err

    read_token = authed_server.make_token("read")
    code, err = run_cli(*base, "--url", url, "--token", read_token, home=tmp_path / "h",
                        timeout=ENDS_WITHIN)
    assert code == 2, err
    assert "HTTP 403" in err and "write token" in err
    assert user_facing(err), err

    dead = f"http://127.0.0.1:{free_port()}"
    code, err = run_cli(*base, "--url", dead, home=tmp_path / "h", timeout=ENDS_WITHIN)
    assert code == 2, err
    assert f"cannot reach the scalewatch server at {dead} (connection refused)" in err
    assert user_facing(err), err
    assert time.monotonic() - started < 3 * ENDS_WITHIN
    assert _run(authed_server, "p", "r") is None  # nothing was created

    # The same import with a write token goes through and marks the run finished.
    code, err = run_cli(*base, "--url", url, "--token", authed_server.make_token("write"),
                        home=tmp_path / "h", timeout=120)
    assert code == 0, err
    assert _steps(authed_server, "p", "r") == list(range(1, 11))
    run = _run(authed_server, "p", "r")
    assert run is not None and run["status"] == "finished"


def test_follow_refused_token_ends_at_once(authed_server: LiveServer, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    _verl(log, range(1, 4))
    code, err = run_cli("follow", "verl", str(log), "--project", "p", "--name", "f",
                        "--url", authed_server.url, "--token", "sw_wrong", home=tmp_path / "h",
                        timeout=ENDS_WITHIN)
    assert code == 2, err
    assert "HTTP 401" in err and user_facing(err), err


def test_follow_waits_for_its_file_and_finishes_the_run_on_exit(
        live_server: LiveServer, tmp_path: Path) -> None:
    log = tmp_path / "later" / "run.jsonl"
    follower = CliProcess("follow", "verl", str(log), "--project", "p", "--name", "w",
                          "--url", live_server.url, "--poll-interval", "0.1",
                          "--finish-on-exit", home=tmp_path / "h")
    try:
        follower.wait_err(f"{log} is not there yet; waiting for it")
        log.parent.mkdir()
        _verl(log, range(1, 6))
        follower.wait_err(f"{log} is there")
        wait_for(lambda: _steps(live_server, "p", "w") == list(range(1, 6)))
        run = _run(live_server, "p", "w")
        assert run is not None and run["status"] == "running"
    finally:
        code = follower.stop()
    assert code == 0, follower.err
    assert "stopped; 5 values read" in follower.err and "marked finished" in follower.err
    run = _run(live_server, "p", "w")
    assert run is not None and run["status"] == "finished"
    assert user_facing(follower.err), follower.err


def test_follow_says_when_the_server_is_back(tmp_path: Path, sqlite_url: str) -> None:
    server = LiveServer(sqlite_url, home=tmp_path / "server-home")  # not started yet
    log = tmp_path / "run.jsonl"
    _verl(log, range(1, 6))
    follower = CliProcess("follow", "verl", str(log), "--project", "p", "--name", "b",
                          "--url", server.url, "--poll-interval", "0.1", home=tmp_path / "h")
    try:
        follower.wait_err(f"cannot reach the scalewatch server at {server.url} "
                          "(connection refused); following anyway")
        follower.wait_err(f"{server.url} unreachable")  # the sender, once, with the spool
        server.start()
        follower.wait_err(f"reached {server.url} again")
        wait_for(lambda: _steps(server, "p", "b") == list(range(1, 6)))
        code = follower.stop()
        assert code == 0, follower.err
        run = _run(server, "p", "b")
        assert run is not None and run["status"] == "running"  # no --finish-on-exit
        assert "status left as it was" in follower.err
        assert user_facing(follower.err), follower.err
    finally:
        follower.stop()
        server.stop()


def test_tensorboard_follower_logs_changes_not_polls(live_server: LiveServer,
                                                     tmp_path: Path) -> None:
    tbx = pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    logdir = tmp_path / "tb"
    writer = tbx.SummaryWriter(str(logdir))
    for s in range(5):
        writer.add_scalar("eval/avg_score", s / 10, s)
    writer.close()
    follower = CliProcess("follow", "tensorboard", str(logdir), "--project", "p", "--name",
                          "tb", "--url", live_server.url, "--poll-interval", "0.05",
                          home=tmp_path / "h")
    try:
        follower.wait_err("following")

        def steps() -> list[int]:
            run = _run(live_server, "p", "tb")
            if run is None:
                return []
            with live_server.client() as api:
                pts = api.get(f"/api/v1/runs/{run['id']}/points",
                              params={"metric": "eval/avg_score"}).json()["points"]
            return [p["step"] for p in pts]

        # The sender waits up to 1 s to batch: dozens of 0.05 s polls happen meanwhile.
        wait_for(lambda: steps() == list(range(5)))
    finally:
        code = follower.stop()
    assert code == 0, follower.err
    lines = follower.err.splitlines()
    assert "No path found" not in follower.err
    assert len(lines) <= 4, follower.err  # following, (run directory), stopped


def test_a_restarted_directory_follower_resumes_its_file_not_a_newer_one(
        live_server: LiveServer, tmp_path: Path) -> None:
    """verl writes <root>/<project>/<experiment>.jsonl; a follower of the root takes the newest
    file. Restarted after another experiment's file appeared, it took that one: the rest of its
    own file was never read, and the other's steps were written over the run's."""
    root = tmp_path / "logs"
    (root / "proj").mkdir(parents=True)
    mine, other = root / "proj" / "exp-a.jsonl", root / "proj" / "exp-b.jsonl"
    _verl(mine, range(0, 10))
    args = ("follow", "verl", str(root), "--project", "p", "--name", "d", "--url",
            live_server.url, "--poll-interval", "0.1")
    first = CliProcess(*args, home=tmp_path / "h")
    try:
        wait_for(lambda: _steps(live_server, "p", "d") == list(range(10)))
    finally:
        assert first.stop() == 0, first.err
    _verl(mine, range(10, 20))
    with other.open("w") as out:  # newer: another experiment, other values at steps 0-4
        for s in range(5):
            out.write(json.dumps({"step": s, "data": {METRIC: 0.99}}) + "\n")
    again = CliProcess(*args, home=tmp_path / "h")
    try:
        again.wait_err(f"resuming {mine}")
        wait_for(lambda: _steps(live_server, "p", "d") == list(range(20)))
    finally:
        assert again.stop() == 0, again.err
    run = _run(live_server, "p", "d")
    assert run is not None
    with live_server.client() as api:
        pts = api.get(f"/api/v1/runs/{run['id']}/points", params={"metric": METRIC}).json()
    assert [p["value"] for p in pts["points"]] == pytest.approx([s / 100 for s in range(20)])
