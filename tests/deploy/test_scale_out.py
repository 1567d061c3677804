"""Two server processes on one PostgreSQL: fits, alerts and webhook deliveries happen once."""

from __future__ import annotations

import json
from collections import Counter

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.alerts.helpers import Receiver, points, stable_run
from tests.support.databases import require_postgres
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for

FAST = {
    "SCALEWATCH_REFIT_INTERVAL": "0.1",
    "SCALEWATCH_ALERT_INTERVAL": "1",
    "SCALEWATCH_WEBHOOK_BACKOFF": "0.3",
    "SCALEWATCH_DASHBOARD": "0",
    "SCALEWATCH_WEBHOOK_ALLOW_PRIVATE": "1",  # the receiver is on loopback
}


@pytest.fixture
def two_servers(postgres, tmp_path):
    require_postgres(postgres)
    url = postgres.new_database()
    servers = [LiveServer(url, home=tmp_path / f"h{i}", extra_env=FAST) for i in range(2)]
    for s in servers:
        s.start()
    yield url, servers
    for s in servers:
        s.stop()
    postgres.drop(url)


@pytest.mark.timeout(240)
def test_two_processes_share_the_work_exactly_once(two_servers):
    url, (a, b) = two_servers
    with Receiver(fail_first=1) as hook:
        ca, cb = httpx.Client(base_url=a.url, timeout=30), httpx.Client(base_url=b.url, timeout=30)
        rule = ca.post(
            "/api/v1/alert-rules",
            json={
                "project": "scale",
                "run_id": None,
                "kind": "asymptote_below",
                "params": {"threshold": 0.9},
                "webhook_url": hook.url,
                "webhook_secret": "s3cret",
            },
        )
        assert rule.status_code == 201, rule.text
        run_ids = []
        for i in range(4):
            client = (ca, cb)[i % 2]
            run_ids.append(
                client.post("/api/v1/runs", json={"project": "scale", "name": f"r{i}"}).json()["id"]
            )
        # Ingest each run in five batches, alternating between the two processes.
        for batch in range(5):
            for i, rid in enumerate(run_ids):
                c, y = stable_run(seed=10 + i)
                lo, hi = batch * 40, batch * 40 + 40
                client = (ca, cb)[(batch + i) % 2]
                r = client.post(
                    f"/api/v1/runs/{rid}/points", json={"points": points(c[lo:hi], y[lo:hi], lo)}
                )
                assert r.status_code == 200, r.text

        engine = create_engine(url)

        def settled() -> bool:
            with engine.connect() as conn:
                pending = conn.execute(
                    text("SELECT count(*) FROM series WHERE refit_requested <> refit_done")
                ).scalar()
                n = conn.execute(
                    text(
                        "SELECT min(f.n_points) FROM series s JOIN fits f ON f.id = s.latest_fit_id"
                    )
                ).scalar()
            return pending == 0 and n == 200

        wait_for(settled, timeout=120)
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT series_id, n_points, result FROM fits")).all()
        # Each (series, points seen) fitted once. A refit that lagged until the series doubled
        # stores the fits it skipped first (backfilled, refit/backfill.py): those aside, at
        # most one fit per batch.
        fits = Counter((sid, n) for sid, n, _ in rows)
        assert fits and all(count == 1 for count in fits.values()), fits
        live = Counter(sid for sid, _, res in rows
                       if not (json.loads(res) if isinstance(res, str) else res).get("backfilled"))
        assert len(live) == 4 and all(n <= 5 for n in live.values()), live

        def alerts_delivered() -> list | None:
            got = hook.delivered()
            return got if len(got) >= 4 else None

        wait_for(alerts_delivered, timeout=60)
        alerts = ca.get("/api/v1/alerts", params={"project": "scale"}).json()["alerts"]
        assert sorted(al["run_id"] for al in alerts) == sorted(run_ids)
        assert all(al["kind"] == "asymptote_below" for al in alerts)
        # Settle a moment longer: no process may deliver a second copy.
        import time

        time.sleep(3)
        delivered = hook.delivered()
        ids = [r["headers"].get("x-scalewatch-delivery") for r in delivered]
        assert len(delivered) == 4 and len(set(ids)) == 4, ids
        assert len(hook.requests) == 5  # one failed attempt, retried once by one process
        engine.dispose()
