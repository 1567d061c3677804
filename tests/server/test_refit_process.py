"""Refits in a child process at a lower OS priority (`server/refit_process.py`), and the refit
lag: from a point's arrival to the fit that includes it (`series.dirty_since`, /metrics, the Run
page). On SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.alerts.helpers import points, stable_run
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from tests.support.procs import descendants, is_refit_process

FAST = {"SCALEWATCH_REFIT_INTERVAL": "0.1", "SCALEWATCH_DASHBOARD": "0"}


def _refit_children(pid: int) -> list[int]:
    """The refit processes under `pid`, its uvicorn process included."""
    return [p for p in descendants(pid) if is_refit_process(p)]


def _nice(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[16])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def _metric_in(body: str, name: str) -> float | None:
    """The value of one series in a /metrics text (None: not there)."""
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def _metric(url: str, name: str) -> float | None:
    return _metric_in(httpx.get(url + "/metrics", timeout=30).text, name)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_serve_fits_in_a_nice_child_that_dies_with_the_server(
    database_url: str, tmp_path: Path
) -> None:
    server = LiveServer(database_url, home=tmp_path / "home", extra_env=FAST)
    server.start()
    try:
        assert server.proc is not None
        child = wait_for(lambda: (_refit_children(server.proc.pid) or [None])[0], timeout=60)
        # It lowers its own priority once it has read its settings: below the server's.
        wait_for(lambda: _nice(child) >= 10, timeout=60)
        with httpx.Client(base_url=server.url, timeout=30) as c:
            rid = c.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
            cc, yy = stable_run(seed=3)
            r = c.post(f"/api/v1/runs/{rid}/points", json={"points": points(cc[:80], yy[:80], 0)})
            assert r.status_code == 200, r.text

            def fitted() -> dict | None:
                fit = c.get(f"/api/v1/runs/{rid}/fit").json()
                return fit if fit.get("fit_id") and fit.get("n_points") == 80 else None

            wait_for(fitted, timeout=120)
        # The child's fits are counted by the server process's /metrics, with their lag.
        wait_for(lambda: (_metric(server.url, "scalewatch_fits_total") or 0) >= 1, timeout=60)
        assert (_metric(server.url, "scalewatch_refit_lag_seconds_count") or 0) >= 1
        assert _metric(server.url, "scalewatch_refit_backlog") == 0
        # SIGKILL of the server: the child must not outlive it (nor keep fitting).
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
        wait_for(lambda: not _alive(child), timeout=60)
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_refit_in_process_keeps_the_thread(database_url: str, tmp_path: Path) -> None:
    server = LiveServer(database_url, home=tmp_path / "home", extra_env=FAST,
                        extra_args=["--refit-in-process"])
    server.start()
    try:
        assert server.proc is not None
        with httpx.Client(base_url=server.url, timeout=30) as c:
            rid = c.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
            cc, yy = stable_run(seed=4)
            c.post(f"/api/v1/runs/{rid}/points", json={"points": points(cc[:60], yy[:60], 0)})
            wait_for(lambda: c.get(f"/api/v1/runs/{rid}/fit").json().get("fit_id"), timeout=120)
        assert _refit_children(server.proc.pid) == []
    finally:
        server.stop()


def test_the_refit_clears_the_wait_and_metrics_count_its_lag(
    live_app, database_url: str  # noqa: ANN001
) -> None:
    """The fit that includes a series' waiting points clears `dirty_since`, and /metrics
    reports the backlog (none left) and the fit's lag."""
    _, api = live_app
    engine = create_engine(database_url)
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "lag"}).json()["id"]
    cc, yy = stable_run(seed=5)
    api.post(f"/api/v1/runs/{rid}/points", json={"points": points(cc[:40], yy[:40], 0)})

    def settled() -> bool:
        with engine.connect() as conn:
            row = conn.execute(text(
                "SELECT dirty_since, refit_requested - refit_done FROM series "
                "WHERE name = 'val_pass_rate'")).one()
        return row[1] == 0 and row[0] is None

    wait_for(settled, timeout=120)
    engine.dispose()
    body = api.get("/metrics").text
    assert _metric_in(body, "scalewatch_refit_backlog") == 0
    assert (_metric_in(body, "scalewatch_refit_lag_seconds_count") or 0) >= 1


def test_dirty_since_is_the_first_waiting_point(api, database_url: str) -> None:  # noqa: ANN001
    """Without a refitter: the first batch sets it, the second leaves it where it was, and
    /metrics' backlog and oldest wait see the series; so does the Run page's data."""
    from scalewatch.dashboard.data import run_detail

    engine = create_engine(database_url)
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "wait"}).json()["id"]
    cc, yy = stable_run(seed=6)
    api.post(f"/api/v1/runs/{rid}/points", json={"points": points(cc[:20], yy[:20], 0)})

    def dirty_since() -> object:
        with engine.connect() as conn:
            return conn.execute(text("SELECT dirty_since FROM series "
                                     "WHERE name = 'val_pass_rate'")).scalar()

    first = dirty_since()
    assert first is not None
    api.post(f"/api/v1/runs/{rid}/points", json={"points": points(cc[20:40], yy[20:40], 20)})
    assert dirty_since() == first
    engine.dispose()
    body = api.get("/metrics").text
    assert _metric_in(body, "scalewatch_refit_backlog") == 1
    wait = _metric_in(body, "scalewatch_refit_oldest_wait_seconds")
    assert wait is not None and wait >= 0.0
    detail = run_detail(api.app.state.store, rid, "val_pass_rate")
    assert detail["refit_wait"] is not None and detail["refit_wait"] >= 0.0


def test_run_page_says_when_the_fit_is_behind() -> None:
    from scalewatch.dashboard.pages.run import REFIT_LAG_SHOWN, _refit_lag

    assert _refit_lag(None) == [] and _refit_lag(REFIT_LAG_SHOWN) == []
    (box,) = _refit_lag(95.0)
    assert "95 s" in box.children and box.id == "run-refit-lag"
