"""Unit and protocol-level tests of trainer_client against small loopback fakes."""

from __future__ import annotations

import gzip
import inspect
import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

import trainer_client as sw
from tests.client.sw_fakes import FakeServer, SilentServer
from tests.support.net import free_port
from tests.support.polling import wait_for
from trainer_client import sender as sendermod
from trainer_client._http import backoff_delay, is_retryable_status, parse_retry_after
from trainer_client.sender import Sender, SendTarget, dedupe_points
from trainer_client.spool import Spool, iter_spools

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("fast_backoff")]


# --------------------------------------------------------------------------- compute
class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_meter_counts_gpu_hours_and_pauses():
    clock = FakeClock()
    m = sw.ComputeMeter(gpus=8, clock=clock)
    clock.t += 3600
    assert m.value == pytest.approx(8.0)
    m.pause()
    clock.t += 3600
    assert m() == pytest.approx(8.0)
    m.resume()
    clock.t += 1800
    assert float(m) == pytest.approx(12.0)
    with m.paused():
        clock.t += 10_000
        assert not m.running
    assert m.running
    assert m.value == pytest.approx(12.0)
    m.pause()
    with m.paused():  # pausing a paused meter leaves it paused
        pass
    assert not m.running


def test_meter_initial_and_not_started():
    clock = FakeClock()
    m = sw.ComputeMeter(gpus=2, initial=100.0, start=False, clock=clock)
    clock.t += 3600
    assert m.value == 100.0
    m.start()
    clock.t += 3600
    assert m.value == pytest.approx(102.0)
    with pytest.raises(ValueError):
        sw.ComputeMeter(gpus=0)


def test_flops_estimate():
    assert sw.flops(trained_tokens=10, generated_tokens=5, params=1e9) == 6e10 + 1e10
    assert sw.flops(params=7e9) == 0.0
    with pytest.raises(ValueError):
        sw.flops(trained_tokens=-1, params=1)


# --------------------------------------------------------------------------- helpers
def test_backoff_full_jitter_and_cap():
    assert backoff_delay(0, 0.5, 30, rng=lambda: 1.0) == 0.5
    assert backoff_delay(3, 0.5, 30, rng=lambda: 1.0) == 4.0
    assert backoff_delay(50, 0.5, 30, rng=lambda: 1.0) == 30.0
    assert backoff_delay(5, 0.5, 30, rng=lambda: 0.0) == 0.0
    for a in range(20):
        assert 0 <= backoff_delay(a) <= 30


def test_retry_after_and_status_classes():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert parse_retry_after(date, now=1445412470.0) == pytest.approx(10.0)
    assert all(is_retryable_status(s) for s in (408, 429, 500, 502, 503, 504))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 413, 422))


def test_dedupe_last_write_wins_per_step_metric():
    pts = [
        {"step": 1, "compute": 1.0, "metrics": {"a": 1.0, "b": 1.0}, "time": 0},
        {"step": 2, "compute": 2.0, "metrics": {"a": 2.0}, "time": 0},
        {"step": 1, "compute": 1.5, "metrics": {"a": 9.0}, "time": 0},
    ]
    out = dedupe_points(pts)
    assert out == [
        {"step": 1, "compute": 1.0, "metrics": {"b": 1.0}, "time": 0},
        {"step": 2, "compute": 2.0, "metrics": {"a": 2.0}, "time": 0},
        {"step": 1, "compute": 1.5, "metrics": {"a": 9.0}, "time": 0},
    ]
    assert dedupe_points(pts[:2]) is not None


def test_spool_files_order_lock_and_cleanup(tmp_path):
    sp = Spool(tmp_path, "proj/x", "run one")
    sp.write_meta({"project": "proj/x", "name": "run one"})
    p1 = sp.write_batch([{"step": 1, "compute": 0.0, "metrics": {"a": 1.0}}])
    p2 = sp.write_batch([{"step": 2, "compute": 0.0, "metrics": {"a": 1.0}}] * 3)
    assert sp.batches() == [p1, p2]
    assert sp.pending_points() == 4
    assert Spool.read_batch(p2)[0]["step"] == 2
    assert sp.dir.parent.name == "proj%2Fx"
    [found] = iter_spools(tmp_path)
    assert (found.project, found.name) == ("proj/x", "run one")
    other = Spool(tmp_path, "proj/x", "run one")
    assert sp.try_lock()
    assert not other.try_lock()
    sp.unlock()
    assert other.try_lock()
    other.unlock()
    dead = sp.dir / ".tmp-999999999-1-x.json"
    dead.write_text("partial")
    sp.cleanup_tmp()
    assert not dead.exists()
    sp.reject(p1, "HTTP 422")
    assert sp.batches() == [p2]
    assert (sp.dir / "rejected" / p1.name).exists()


# --------------------------------------------------------------------------- log()
def test_log_validates_arguments(tmp_path):
    run = sw.init("p", "n", url="http://127.0.0.1:9", mode="offline", home=tmp_path)
    with pytest.raises(TypeError):
        run.log({"a": "x"}, step=1, compute=0.0)
    with pytest.raises(TypeError):
        run.log({"a": 1.0}, step=1.5, compute=0.0)
    with pytest.raises(TypeError):
        run.log([("a", 1.0)], step=1, compute=0.0)
    with pytest.raises(TypeError):
        run.log({1: 1.0}, step=1, compute=0.0)
    with pytest.raises(ValueError):
        run.log({"a": 1.0}, step=-1, compute=0.0)
    with pytest.raises(ValueError):
        run.log({"a": 1.0}, step=1, compute=-3.0)
    with pytest.raises(ValueError):
        run.log({"a": 1.0}, step=1)  # no compute yet, no meter
    run.log({"a": 1, "b": True}, step=1, compute=2)  # ints/bools are numbers
    run.log({"a": 2.0}, step=2)  # falls back to the last compute
    run.finish()
    with pytest.raises(RuntimeError):
        run.log({"a": 1.0}, step=3, compute=1.0)
    pts = [p for f in run.spool.batches() for p in Spool.read_batch(f)]
    assert [(p["step"], p["compute"], p["metrics"]) for p in pts] == [
        (1, 2.0, {"a": 1.0, "b": 1.0}), (2, 2.0, {"a": 2.0})]


def test_init_takes_the_runs_parameters_declared_once(tmp_path):
    # init() forwards to Run: the same parameters for help() and type checkers, every keyword
    # (and the ten positional ones) as before.
    assert inspect.signature(sw.init).parameters == inspect.signature(sw.Run).parameters
    assert inspect.signature(sw.init).return_annotation == "Run"
    assert list(inspect.signature(sw.init).parameters) == [
        "project", "name", "config", "target_compute", "compute_unit", "url", "token", "mode",
        "tags", "fit_metric", "home", "timeout", "meter", "group", "value_range"]
    run = sw.init("p", "n", {"lr": 0.1}, 100.0, "tokens", "http://127.0.0.1:9", None, "offline",
                  ["t"], "reward", home=tmp_path, timeout=1.0, group="g")
    assert (run.compute_unit, run.mode, run.timeout, run.url) == (
        "tokens", "offline", 1.0, "http://127.0.0.1:9")
    assert run._meta["group"] == "g" and run._meta["fit_metric"] == "reward"
    run.finish()
    with pytest.raises(TypeError):
        sw.init("p", "n", hom=tmp_path)
    with pytest.raises(TypeError):  # home and the later ones stay keyword-only
        sw.init("p", "n", None, None, None, None, None, "offline", None, None, tmp_path)


def test_names_checked_once_still_check_values_and_a_point_is_a_copy(tmp_path):
    """log() remembers the metric-name sets it has checked; values are still checked on every
    call, a bad name is refused however often it is logged, and the point logged is what the
    dict held when log() returned (the trainer may reuse its dict)."""
    run = sw.init("p", "n", url="http://127.0.0.1:9", mode="offline", home=tmp_path)
    metrics = {"a": 0.5, "b": 0.25}
    run.log(metrics, step=1, compute=1.0)
    metrics["a"] = 0.75  # the same dict, reused for the next step
    run.log(metrics, step=2, compute=2.0)
    metrics["a"] = 9.0  # changed after the last log(): not what step 2 logged
    with pytest.raises(TypeError):
        run.log({"a": "x", "b": 0.1}, step=3, compute=3.0)  # names known, value bad
    for _ in range(2):
        with pytest.raises(ValueError):
            run.log({"a": 0.1, "": 0.1}, step=3, compute=3.0)
        with pytest.raises(TypeError):
            run.log({"a": 0.1, 7: 0.1}, step=3, compute=3.0)
    run.log({"a": float("nan"), "b": 0.5}, step=4, compute=4.0)  # known names, NaN dropped
    run.log({"b": 0.5, "a": 1}, step=5, compute=5.0)  # another order, an int value
    run.finish()
    pts = [p for f in run.spool.batches() for p in Spool.read_batch(f)]
    assert [(p["step"], p["metrics"]) for p in pts] == [
        (1, {"a": 0.5, "b": 0.25}), (2, {"a": 0.75, "b": 0.25}), (4, {"b": 0.5}),
        (5, {"b": 0.5, "a": 1.0})]


def test_nan_dropped_with_one_rate_limited_warning(tmp_path, caplog):
    run = sw.init("p", "n", mode="offline", home=tmp_path)
    with caplog.at_level(logging.WARNING, logger="scalewatch"):
        for i in range(100):
            run.log({"a": float("nan"), "b": float("inf"), "c": 1.0}, step=i, compute=1.0)
    run.finish()
    warns = [r for r in caplog.records if "NaN/inf" in r.getMessage()]
    assert len(warns) == 1
    pts = [p for f in run.spool.batches() for p in Spool.read_batch(f)]
    assert len(pts) == 100 and all(p["metrics"] == {"c": 1.0} for p in pts)


def test_log_with_meter(tmp_path):
    meter = sw.ComputeMeter(gpus=4)
    run = sw.init("p", "n", mode="offline", home=tmp_path, meter=meter)
    run.log({"a": 1.0}, step=1, compute=meter)
    run.log({"a": 1.0}, step=2)
    run.finish()
    pts = [p for f in run.spool.batches() for p in Spool.read_batch(f)]
    assert len(pts) == 2 and 0 <= pts[0]["compute"] <= pts[1]["compute"]


# --------------------------------------------------------------------------- sending
def test_online_all_points_once_gzip_auth(tmp_path):
    with FakeServer(token="tok") as srv:
        run = sw.init("math", "s0", url=srv.url, token="tok", home=tmp_path,
                      config={"lr": 1e-6, "nan": float("nan")}, target_compute=100.0,
                      tags=["a"], fit_metric="val")
        for i in range(2500):
            run.log({"reward": i / 2500, "val": 0.5}, step=i, compute=i * 0.01)
        assert run.finish(timeout=30) == 0
        assert srv.steps("reward") == list(range(2500))
        assert all(v == 1 for v in srv.inserts.values())
        reqs = srv.point_requests()
        assert all(len(r["body"]["points"]) <= 1000 for r in reqs)
        assert all(r["headers"].get("Content-Encoding") == "gzip" for r in reqs)
        assert all(r["headers"].get("Authorization") == "Bearer tok" for r in reqs)
        meta = srv.run_meta[1]
        assert meta["config"] == {"lr": 1e-6, "nan": None}
        assert meta["target_compute"] == 100.0 and meta["fit_metric"] == "val"
        assert run.id == 1
    assert not run.spool.dir.exists()  # clean finish removes the spool


def test_transient_errors_retried_exactly_once(tmp_path):
    calls = {"n": 0}

    def flaky(method, path, body):
        if path.endswith("/points"):
            calls["n"] += 1
            if calls["n"] % 3 != 0:
                return (503 if calls["n"] % 2 else 429), {"Retry-After": "0"}, b"{}"
        return None

    with FakeServer(behaviour=flaky) as srv:
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        for i in range(1500):
            run.log({"m": 1.0}, step=i, compute=float(i))
        assert run.finish(timeout=60) == 0
        assert srv.steps("m") == list(range(1500))
        assert all(v == 1 for v in srv.inserts.values())


def test_422_dropped_without_retry_storm(tmp_path, caplog):
    def reject(method, path, body):
        if path.endswith("/points"):
            return 422, {}, b'{"detail":[{"loc":["points",0],"msg":"bad"}]}'
        return None

    with FakeServer(behaviour=reject) as srv, caplog.at_level(logging.ERROR, "scalewatch"):
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        for i in range(3000):
            run.log({"m": 1.0}, step=i, compute=1.0)
        assert run.finish(timeout=30) == 0
        # No retry storm: every point is sent at most twice (once in a merged request, once
        # more in its own batch file when the merged request is refused), never retried.
        sent = Counter(p["step"] for r in srv.point_requests() for p in r["body"]["points"])
        assert sorted(sent) == list(range(3000))
        assert max(sent.values()) <= 2
        assert len([r for r in caplog.records if "HTTP 422" in r.getMessage()]) == 1
        assert list((run.spool.dir / "rejected").glob("*.json"))


def test_retry_after_is_honoured(tmp_path, monkeypatch):
    slept = []
    target = SendTarget(spool=Spool(tmp_path, "p", "n"), meta={}, url="http://unused")
    monkeypatch.setattr(target, "sleep", slept.append)
    s = Sender(target, conn=None)
    s._backoff(retry_after=7.0)
    s._backoff(retry_after=None)
    s._backoff(retry_after=10_000.0)
    assert slept[0] >= 7.0 and slept[1] <= 0.5 * 4 and slept[2] == sendermod.RETRY_AFTER_CAP


def test_silent_server_never_blocks_log(tmp_path, monkeypatch):
    srv = SilentServer()
    try:
        run = sw.init("p", "n", url=srv.url, home=tmp_path, timeout=1.0)
        for i in range(10_000):
            run.log({"m": 1.0}, step=i, compute=float(i))
        with pytest.warns(RuntimeWarning, match="10000 point"):
            left = run.finish(timeout=2)
        assert left == 10_000
        assert run.spool.pending_points() == 10_000
    finally:
        srv.close()


def test_server_down_then_up(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    run = sw.init("p", "n", url=url, home=tmp_path)
    for i in range(500):
        run.log({"m": float(i)}, step=i, compute=float(i))
    assert run.flush(10)
    time.sleep(1.0)
    with FakeServer(port=port) as srv:
        for i in range(500, 1000):
            run.log({"m": float(i)}, step=i, compute=float(i))
        assert run.finish(timeout=30) == 0
        assert srv.steps("m") == list(range(1000))


def test_leftover_spool_replayed_on_init_and_by_sync(tmp_path):
    with FakeServer() as srv:
        # A crashed trainer left batches (and its meta) behind.
        sp = Spool(tmp_path, "p", "n")
        sp.write_meta({"project": "p", "name": "n", "compute_unit": "gpu_hours"})
        sp.write_batch([{"step": i, "compute": 1.0, "metrics": {"m": 0.0}} for i in range(10)])
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        run.log({"m": 1.0}, step=5, compute=1.0)  # redone step: newest value wins
        assert run.finish(timeout=30) == 0
        assert srv.steps("m") == list(range(10))
        assert srv.points[(1, "m", 5)][0] == 1.0
        # an offline run is created and uploaded by replay_spools
        off = sw.init("p", "offline-run", mode="offline", home=tmp_path, tags=["x"])
        for i in range(20):
            off.log({"m": 2.0}, step=i, compute=1.0)
        off.finish()
        summary = sw.replay_spools(srv.url, None, home=tmp_path)
        assert summary["ok"] and summary["sent_points"] == 20
        assert srv.steps("m", run_id=2) == list(range(20))
        assert srv.run_meta[2]["tags"] == ["x"]
        assert not list(iter_spools(tmp_path))


def test_sync_gives_up_when_server_down_and_keeps_points(tmp_path):
    off = sw.init("p", "n", mode="offline", home=tmp_path)
    off.log({"m": 1.0}, step=1, compute=1.0)
    off.finish()
    summary = sw.replay_spools(f"http://127.0.0.1:{free_port()}", None, home=tmp_path,
                               max_failures=2)
    assert not summary["ok"] and summary["remaining_points"] == 1
    assert summary["runs"][0]["status"] == "partial"


def test_404_reregisters_and_401_keeps_points(tmp_path):
    with FakeServer() as srv:
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        run.log({"m": 1.0}, step=1, compute=1.0)
        assert run.flush(10)
        assert wait_for(lambda: srv.steps("m") == [1], timeout=30.0)
        with srv.lock:  # the run disappears on the server (deleted / new database)
            srv.runs.clear(), srv.run_meta.clear(), srv.points.clear()
        run.log({"m": 1.0}, step=2, compute=1.0)
        assert run.finish(timeout=30) == 0
        assert srv.steps("m") == [2]
    with FakeServer(token="right") as srv:
        run = sw.init("p", "auth", url=srv.url, token="wrong", home=tmp_path)
        run.log({"m": 1.0}, step=1, compute=1.0)
        with pytest.warns(RuntimeWarning):
            assert run.finish(timeout=2) == 1
        assert sw.replay_spools(srv.url, "right", home=tmp_path)["sent_points"] == 1


def test_fit_and_alerts_never_raise(tmp_path):
    def api(method, path, body):
        if "/fit" in path:
            return 200, {}, json.dumps({"A": 0.6}).encode()
        if path.startswith("/api/v1/alerts"):
            return 200, {}, json.dumps({"alerts": [{"id": 3}]}).encode()
        return None

    with FakeServer(behaviour=api) as srv:
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        assert run.fit() == {"A": 0.6}
        assert run.alerts() == [{"id": 3}]
        assert any("run=1" in r["path"] and "state=open" in r["path"] for r in srv.requests)
        run.finish()
    down = sw.init("p", "m", url=f"http://127.0.0.1:{free_port()}", home=tmp_path)
    assert down.fit() is None and down.alerts() == []
    down.finish(timeout=0.5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_child_restarts_its_own_threads(tmp_path):
    with FakeServer() as srv:
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        run.log({"m": 1.0}, step=0, compute=0.0)
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                for i in range(100, 110):
                    run.log({"m": 1.0}, step=i, compute=0.0)
                run.flush(10)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        for i in range(1, 10):
            run.log({"m": 1.0}, step=i, compute=0.0)
        assert run.finish(timeout=30) == 0
        assert srv.steps("m") == list(range(10)) + list(range(100, 110))


def test_request_body_is_valid_gzip_json(tmp_path):
    raw = {}

    def grab(method, path, body):
        if path.endswith("/points"):  # finish() also PATCHes the run's status
            raw["body"] = body
        return None

    with FakeServer(behaviour=grab) as srv:
        run = sw.init("p", "n", url=srv.url, home=tmp_path)
        run.log({"m": 0.25}, step=3, compute=1.5)
        # finish() returns as soon as the point is acknowledged; the long deadline is for a
        # machine under heavy load (this once ran out at the default 30 s with two copies of
        # the suite running; the requests say how far the client got if it does again).
        left = run.finish(timeout=120)
        assert left == 0, [(r["method"], r["path"]) for r in srv.requests]
    [p] = raw["body"]["points"]
    assert p["step"] == 3 and p["compute"] == 1.5 and p["metrics"] == {"m": 0.25}
    assert isinstance(p["time"], float)
    assert gzip.decompress(gzip.compress(b"{}")) == b"{}"


def test_client_is_standard_library_only():
    # -S: no site-packages, so any third-party import fails; the repository root is on the path,
    # so an import of the service (`scalewatch.*`, or its folders) has to be caught by looking.
    code = (
        "import sys, trainer_client, trainer_client.sync, trainer_client.pipelinerl, "
        "trainer_client.cli\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}\n"
        "             & {'scalewatch', 'server', 'dashboard', 'migrations', 'tests'}))"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_server_limits_reexport_the_client_limits():
    from scalewatch.server import limits as server_limits
    from trainer_client import limits as client_limits

    for name in client_limits.__all__:
        assert getattr(server_limits, name) is getattr(client_limits, name)
    assert "MAX_METRIC_NAME_LENGTH" in client_limits.__all__
    # Metric names are as long as MLflow's metric keys (a longer one got the whole MLflow batch
    # refused); project and run names stay shorter.
    assert client_limits.MAX_METRIC_NAME_LENGTH == server_limits.MAX_MLFLOW_KEY_LENGTH == 250
    assert client_limits.MAX_NAME_LENGTH == 200
    for limits_module in (client_limits, server_limits):
        assert limits_module.__all__ == sorted(limits_module.__all__), limits_module.__name__


@pytest.mark.parametrize(("project", "name", "says"), [
    ("p" * 201, "run", "project has 201 characters; at most 200"),
    ("proj", "r" * 201, "name has 201 characters; at most 200"),
    ("pro\x00j", "run", "project must not contain NUL"),
    ("proj", "r\ud800", "name must be valid UTF-8"),
])
def test_init_refuses_a_name_the_server_would(tmp_path, project, name, says):  # noqa: ANN001
    """Refused at init, before any point is spooled under a name no server accepts (the
    server refused it only when the run registered)."""
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        sw.init(project, name, mode="offline", home=str(tmp_path))
    assert not any(tmp_path.rglob("*.jsonl"))
    ok = sw.init("p" * 200, "r" * 200, mode="offline", home=str(tmp_path),
                 fit_metric="m" * 250)
    ok.finish()
