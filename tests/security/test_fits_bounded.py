"""Items 3 and 7: request fits run bounded (a child process with a deadline; `paper` thinned),
never block shutdown, and points that make the engine fail are a 422 / a fit status."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from scalewatch.server import limits
from tests.conftest import make_app
from tests.support.live_server import LiveServer


def _curve(n: int) -> tuple[list[float], list[float]]:
    c = np.linspace(10, 10_000, n)
    y = 0.2 + 0.4 / (1 + (3000 / c) ** 1.5) + np.random.default_rng(0).normal(0, 0.01, n)
    return c.tolist(), y.tolist()


def test_paper_fits_are_thinned(authed) -> None:
    c, y = _curve(limits.MAX_PAPER_FIT_POINTS * 4)
    r = authed.client.post(
        "/api/v1/fit", json={"compute": c, "values": y, "method": "paper"}, headers=authed.h("read")
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["downsampled_from"] == len(c)
    assert body["n_points"] <= limits.MAX_PAPER_FIT_POINTS


def test_a_fit_past_its_deadline_is_stopped(sqlite_url) -> None:
    from fastapi.testclient import TestClient

    app = make_app(sqlite_url, fit_timeout=0.5)
    c, y = _curve(limits.MAX_PAPER_FIT_POINTS)
    with TestClient(app) as client:
        r = client.post("/api/v1/fit", json={"compute": c, "values": y, "method": "paper"})
        assert r.status_code == 422, r.text
        assert "longer than" in r.json()["detail"]
        # the pool recovers: the next (small) fit is served
        c2, y2 = _curve(50)
        app.state.fit_pool.timeout = 60
        assert client.post("/api/v1/fit", json={"compute": c2, "values": y2}).status_code == 200


def test_points_the_engine_cannot_fit_are_422_not_500(authed) -> None:
    c = np.logspace(-300, 300, 60).tolist()
    y = np.linspace(0.0, 1.0, 60).tolist()
    r = authed.client.post(
        "/api/v1/fit", json={"compute": c, "values": y}, headers=authed.h("read")
    )
    assert r.status_code in (200, 422), r.text
    if r.status_code == 200:
        assert r.json()["status"], r.text


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(x) for x in text)
    return out


def _alive(pids: list[int]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids):
            return False
        time.sleep(0.05)
    return True


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_shutdown_is_not_blocked_by_a_running_fit(tmp_path, sqlite_url) -> None:
    server = LiveServer(sqlite_url, home=tmp_path / "home")
    server.start()
    try:
        c, y = _curve(limits.MAX_PAPER_FIT_POINTS)

        def slow_fit() -> None:
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(
                    server.url + "/api/v1/fit",
                    timeout=120,
                    json={"compute": c, "values": y, "method": "paper"},
                )

        threading.Thread(target=slow_fit, daemon=True).start()
        assert server.proc is not None
        # the fit is running once the server has spawned its fit process
        deadline = time.monotonic() + 60
        while not _children(server.proc.pid):
            assert time.monotonic() < deadline, "no fit process started"
            time.sleep(0.05)
        kids = _children(server.proc.pid)
        os.kill(server.proc.pid, signal.SIGTERM)  # the server only: it must stop its fit
        server.proc.wait(timeout=30)  # TimeoutExpired: shutdown waited on the fit
        assert not _alive(kids), "the fit process outlived the server"
    finally:
        server.kill()
