"""`scalewatch serve --workers N`: N uvicorn worker processes on one database, each with its
own refitter and alert workers, on SQLite and PostgreSQL. The work is shared through the
database (leases, unique open alerts), so every fit and alert happens once."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.alerts.helpers import points, stable_run
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from tests.support.procs import descendants

FAST = {"SCALEWATCH_REFIT_INTERVAL": "0.1", "SCALEWATCH_DASHBOARD": "0"}


def _serving_workers(pid: int) -> int:
    """uvicorn's worker processes under the `serve` process (by their command line)."""
    n = 0
    for p in descendants(pid):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        n += b"multiprocessing" in cmd and b"resource_tracker" not in cmd
    return n


@pytest.mark.timeout(240)
def test_workers_share_fits_and_alerts_once(database_url: str, tmp_path: Path) -> None:
    server = LiveServer(database_url, home=tmp_path / "home", extra_env=FAST,
                        extra_args=["--workers", "2"])  # fmt: skip
    server.start()
    try:
        assert server.proc is not None
        wait_for(lambda: _serving_workers(server.proc.pid) == 2, timeout=60)
        with httpx.Client(base_url=server.url, timeout=30) as c:
            rule = c.post("/api/v1/alert-rules", json={
                "project": "w", "run_id": None, "kind": "asymptote_below",
                "params": {"threshold": 0.9},
            })  # fmt: skip
            assert rule.status_code == 201, rule.text
            run_ids = [c.post("/api/v1/runs", json={"project": "w", "name": f"r{i}"}).json()["id"]
                       for i in range(3)]  # fmt: skip
        for batch in range(4):
            for i, rid in enumerate(run_ids):
                cc, yy = stable_run(seed=20 + i)
                lo, hi = batch * 40, batch * 40 + 40
                # A new connection per request: the kernel hands it to either worker.
                r = httpx.post(f"{server.url}/api/v1/runs/{rid}/points",
                               json={"points": points(cc[lo:hi], yy[lo:hi], lo)}, timeout=30)
                assert r.status_code == 200, r.text
        engine = create_engine(database_url)

        def settled() -> bool:
            with engine.connect() as conn:
                pending = conn.execute(text(
                    "SELECT count(*) FROM series WHERE refit_requested <> refit_done")).scalar()
                n = conn.execute(text("SELECT min(f.n_points) FROM series s "
                                      "JOIN fits f ON f.id = s.latest_fit_id")).scalar()
            return pending == 0 and n == 160

        wait_for(settled, timeout=120)
        with engine.connect() as conn:
            fits = conn.execute(text("SELECT series_id, n_points, count(*) FROM fits "
                                     "GROUP BY series_id, n_points")).all()
        engine.dispose()
        assert fits and all(count == 1 for _, _, count in fits), fits  # no fit made twice

        def alerts() -> list | None:
            got = httpx.get(f"{server.url}/api/v1/alerts", params={"project": "w"}).json()
            return got["alerts"] if len(got["alerts"]) >= 3 else None

        found = wait_for(alerts, timeout=60)
        assert sorted(a["run_id"] for a in found) == sorted(run_ids)  # one open alert a run
        assert _serving_workers(server.proc.pid) == 2
    finally:
        server.stop()
