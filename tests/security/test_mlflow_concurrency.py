"""MLflow params and tags of one run logged by several writers at once (a trainer's ranks, or
its async logging threads) are all kept: the read-merge-write of the run's config and tags
happens under the run's lock, on SQLite and PostgreSQL, through a real server over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import LiveServer

M = "/api/2.0/mlflow"
WRITERS = 4
ROUNDS = 15


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    s = LiveServer(database_url, home=tmp_path / "home")
    s.start()
    yield s
    s.stop()


def test_concurrent_log_batches_lose_no_param_or_tag(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        run = c.post(f"{M}/runs/create", json={"experiment_id": "0", "run_name": "ranks"})
        run_id = run.json()["run"]["info"]["run_id"]
    barrier = threading.Barrier(WRITERS)
    statuses: list[int] = []
    lock = threading.Lock()

    def writer(rank: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for r in range(ROUNDS):
                barrier.wait(timeout=60)  # every rank's batch of a round lands together
                got = client.post(f"{M}/runs/log-batch", json={
                    "run_id": run_id,
                    "params": [{"key": f"rank{rank}.p{r}", "value": str(r)},
                               # logged again every round, unchanged (a changed param is
                               # refused, as MLflow refuses it)
                               {"key": f"rank{rank}.seed", "value": str(rank)}],
                    "tags": [{"key": f"rank{rank}", "value": str(r)}],
                })
                with lock:
                    statuses.append(got.status_code)

    threads = [threading.Thread(target=writer, args=(rank,)) for rank in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert statuses == [200] * (WRITERS * ROUNDS), statuses
    with httpx.Client(base_url=server.url, timeout=60) as c:
        stored = c.get(f"/api/v1/runs/{run_id}").json()
    want_config = {f"rank{k}.p{r}": str(r) for k in range(WRITERS) for r in range(ROUNDS)}
    want_config |= {f"rank{k}.seed": str(k) for k in range(WRITERS)}
    assert stored["config"] == want_config
    assert sorted(stored["tags"]) == [f"rank{k}={ROUNDS - 1}" for k in range(WRITERS)]


def test_of_concurrent_creates_of_one_experiment_exactly_one_creates_it(store) -> None:  # noqa: ANN001
    """`experiments/create` answers RESOURCE_ALREADY_EXISTS unless this call made the
    experiment; it asked whether the project existed, then inserted (ON CONFLICT DO NOTHING)
    and said "created" whether or not its insert was the one that landed: on PostgreSQL 7 of
    24 simultaneous creates of one name were each told they created it. Every caller here
    first sees no project (the lookup waits for all of them), so all race for the insert."""
    callers = 6
    looked = threading.Barrier(callers)
    seen: set[int] = set()
    lookup = store.get_project

    def get_project(**kw: object) -> object:
        found = lookup(**kw)
        if threading.get_ident() not in seen:  # each caller's first look: before any insert
            seen.add(threading.get_ident())
            looked.wait(timeout=60)
        return found

    store.get_project = get_project
    results: list[tuple[int, bool]] = []

    def create() -> None:
        project, created = store.create_project("exp")
        results.append((project.id, created))

    threads = [threading.Thread(target=create) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == callers
    assert len({pid for pid, _ in results}) == 1  # one project
    assert sum(created for _, created in results) == 1, results
