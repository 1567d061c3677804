"""Item 8: on SQLite, writers upserting the same steps at the same time never get a 500."""

from __future__ import annotations

import threading

import httpx


def test_concurrent_upserts_of_the_same_steps(live_server) -> None:
    with live_server.client() as c:
        runs = [
            c.post("/api/v1/runs", json={"project": "p", "name": f"r{i}"}).json()["id"]
            for i in range(8)
        ]
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def writer(seed: int) -> None:
        with httpx.Client(base_url=live_server.url, timeout=60) as client:
            for rid in runs:
                for rep in range(5):
                    barrier.wait(timeout=60)
                    pts = [
                        {"step": s, "compute": float(s), "metrics": {"m": 0.1 * seed, "n": rep}}
                        for s in range(rep * 50, rep * 50 + 100)
                    ]
                    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": pts})
                    with lock:
                        statuses.append(r.status_code)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(statuses) == 4 * 8 * 5
    assert set(statuses) == {200}, sorted(set(statuses))
    with live_server.client() as c:
        for rid in runs:
            page = c.get(f"/api/v1/runs/{rid}/points", params={"metric": "m"}).json()
            assert page["total"] == 300
