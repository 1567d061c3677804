"""Issue 35, one slow fit kills other users' fits: the deadline of a request fit stops that fit
only; a busy pool or a token past its cap is told to come back (503 / 429 with Retry-After),
never a 500. Real servers on loopback, real concurrent requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

from scalewatch.server import limits
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from tests.support.procs import children, is_refit_process


def _curve(n: int, seed: int = 0) -> dict:
    c = np.linspace(10, 10_000, n)
    y = 0.2 + 0.4 / (1 + (3000 / c) ** 1.5) + np.random.default_rng(seed).normal(0, 0.01, n)
    return {"compute": c.tolist(), "values": y.tolist()}


SLOW = {**_curve(limits.MAX_PAPER_FIT_POINTS), "method": "paper"}  # seconds of CPU
SMALL = _curve(50)  # tens of milliseconds


@contextmanager
def _server(tmp_path: Path, sqlite_url: str, **env: str) -> Iterator[LiveServer]:
    server = LiveServer(
        sqlite_url, auth=True, home=tmp_path / "home",
        extra_env={f"SCALEWATCH_{k.upper()}": v for k, v in env.items()},
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _Fit(threading.Thread):
    """One POST /api/v1/fit in its own thread and connection."""

    def __init__(self, server: LiveServer, token: str, body: dict) -> None:
        super().__init__(daemon=True)
        self.server, self.token, self.body = server, token, body
        self.response: httpx.Response | None = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            with server_client(self.server, self.token) as client:
                self.response = client.post("/api/v1/fit", json=self.body)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def result(self) -> httpx.Response:
        self.join(300)
        assert self.error is None, repr(self.error)
        assert self.response is not None, "no answer"
        return self.response


def server_client(server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.headers(token), timeout=300)


def _fit_processes(pid: int) -> list[int]:
    """The server's children but its refit process (server/refit_process.py)."""
    return [c for c in children(pid) if not is_refit_process(c)]


def _fit_running(server: LiveServer) -> None:
    """Wait until the server has started a fit process (the first fit is in it)."""
    assert server.proc is not None
    pid = server.proc.pid
    wait_for(lambda: _fit_processes(pid), timeout=120)


def test_a_fit_past_its_deadline_fails_only_itself(tmp_path: Path, sqlite_url: str) -> None:
    """One fit process: the slow fit runs, the small ones queue behind it. When the slow one
    runs out of time only its process is killed; the queued fits are served (they failed
    with it when the whole pool was torn down)."""
    with _server(tmp_path, sqlite_url, fit_processes="1", fit_timeout="1") as server:
        tokens = [server.make_token("read") for _ in range(3)]
        slow = _Fit(server, tokens[0], SLOW)
        slow.start()
        _fit_running(server)
        small = [_Fit(server, t, SMALL) for t in tokens[1:]]
        for f in small:
            f.start()
        r = slow.result()
        assert r.status_code == 422 and "longer than" in r.json()["detail"], r.text
        for f in small:
            got = f.result()
            assert got.status_code == 200, got.text
            assert got.json()["status"], got.text
        assert "Traceback" not in server.logs()


def test_six_slow_fits_and_a_small_one_never_answer_500(tmp_path: Path, sqlite_url: str) -> None:
    """The issue's scenario: six read tokens each ask for a paper fit, a seventh for a small
    one, on the default two fit processes with a short deadline."""
    with _server(tmp_path, sqlite_url, fit_timeout="1") as server:
        tokens = [server.make_token("read") for _ in range(7)]
        fits = [_Fit(server, t, SLOW) for t in tokens[:6]]
        for f in fits:
            f.start()
        _fit_running(server)
        small = _Fit(server, tokens[6], SMALL)
        small.start()
        statuses = [f.result().status_code for f in fits]
        assert set(statuses) <= {422, 503}, statuses  # timed out, or told to come back
        assert small.result().status_code == 200, small.result().text
        assert "Traceback" not in server.logs()


def test_a_full_pool_answers_503_with_retry_after(tmp_path: Path, sqlite_url: str) -> None:
    with _server(
        tmp_path, sqlite_url, fit_processes="1", fit_queue="0", fit_timeout="120"
    ) as server:
        tokens = [server.make_token("read") for _ in range(2)]
        slow = _Fit(server, tokens[0], SLOW)
        slow.start()
        _fit_running(server)
        with server_client(server, tokens[1]) as client:
            r = client.post("/api/v1/fit", json=SMALL)
        assert r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) >= 1
        assert "busy" in r.json()["detail"]
        assert slow.result().status_code == 200  # the running fit was not disturbed


def test_a_token_past_its_cap_answers_429_with_retry_after(
    tmp_path: Path, sqlite_url: str
) -> None:
    with _server(
        tmp_path, sqlite_url, expensive_reads_per_token="1", fit_timeout="120"
    ) as server:
        greedy, other = server.make_token("read"), server.make_token("read")
        slow = _Fit(server, greedy, SLOW)
        slow.start()
        _fit_running(server)
        with server_client(server, greedy) as client:
            r = client.post("/api/v1/fit", json=SMALL)
            assert r.status_code == 429, r.text
            assert int(r.headers["Retry-After"]) >= 1
            c = client.get("/api/v1/compare", params={"run": 1})
            assert c.status_code == 429, c.text  # comparisons count too
        with server_client(server, other) as client:  # another token is not held back
            assert client.post("/api/v1/fit", json=SMALL).status_code == 200
        assert slow.result().status_code == 200
        with server_client(server, greedy) as client:  # its fit done, the token may again
            wait_for(lambda: client.post("/api/v1/fit", json=SMALL).status_code == 200)
