"""The bound on a run's distinct metric names (limits.MAX_SERIES_PER_RUN), on both databases.

The limit is lowered for each test (the store reads it at every check) instead of creating
10,000 series. A batch that would bring its run past the limit is refused whole, with nothing
of it written; a batch of names the run already has is always taken, even at the limit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select, text

from scalewatch.server import limits
from scalewatch.server.config import load_settings
from scalewatch.server.db.engine import make_engine
from scalewatch.server.db.models import Run, Series
from scalewatch.server.ingest import PointRow, group_rows
from scalewatch.server.store import SqlStore
from scalewatch.server.store.base import Ingested, TooManySeries
from tests.support.polling import wait_for

LIMIT = 4


@pytest.fixture(autouse=True)
def low_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SERIES_PER_RUN", LIMIT)


def rows(step: int, names: str | list[str], value: float = 1.0) -> list[PointRow]:
    return [PointRow(n, step, float(step), value, None) for n in names]


def series_of(store: SqlStore, run_id: int) -> dict[str, int]:
    """name -> its number of points, read from the points themselves."""
    with store.engine.connect() as conn:
        names = conn.execute(
            select(Series.name, Series.id).where(Series.run_id == run_id)
        ).all()
        return {
            name: conn.execute(
                text("SELECT count(*) FROM points WHERE series_id = :sid"), {"sid": sid}
            ).scalar_one()
            for name, sid in names
        }


def new_run(store: SqlStore, name: str = "r") -> int:
    return store.get_or_create_run("p", name)[0].id


# --- the store: every ingest path's one check ---------------------------------------------------


def test_names_the_run_has_are_taken_at_the_limit_and_a_crossing_batch_writes_nothing(
    store: SqlStore,
) -> None:
    rid = new_run(store)
    assert store.ingest_points(rid, rows(1, "ab")) == (2, 0)
    assert store.ingest_points(rid, rows(2, "abcd")) == (4, 0)  # exactly at the limit
    # At the limit: points of existing names, appended and rewritten, are always taken.
    assert store.ingest_points(rid, rows(3, "abcd")) == (4, 0)
    assert store.ingest_points(rid, rows(2, "ad", value=2.0)) == (2, 2)
    before = series_of(store, rid)
    last_step = store.get_run(rid).last_step
    # One new name among known ones: the whole batch is refused, its known names' points too.
    with pytest.raises(TooManySeries) as refused:
        store.ingest_points(rid, rows(4, "abcde"))
    assert (refused.value.status, refused.value.run_id) == (422, rid)
    assert (refused.value.stored, refused.value.new, refused.value.limit) == (4, 1, LIMIT)
    assert series_of(store, rid) == before
    run = store.get_run(rid)
    assert run.last_step == last_step == 3  # the run summary did not move either
    assert "e" not in run.latest
    # ... and the run goes on taking its own names.
    assert store.ingest_points(rid, rows(4, "abcd")) == (4, 0)


def test_the_check_looks_ahead_at_the_whole_batch(store: SqlStore) -> None:
    rid = new_run(store)
    store.ingest_points(rid, rows(1, "ab"))
    # Two new names would fit one at a time, not together: 2 + 3 > 4.
    with pytest.raises(TooManySeries) as refused:
        store.ingest_points(rid, rows(2, "abxyz"))
    assert (refused.value.stored, refused.value.new) == (2, 3)
    assert set(series_of(store, rid)) == {"a", "b"}
    assert store.ingest_points(rid, rows(2, "abxy")) == (4, 0)  # 2 + 2: at the limit
    # A run of its own: the bound is per run.
    other = new_run(store, "other")
    assert store.ingest_points(other, rows(1, "pqrs")) == (4, 0)


def test_written_together_a_refused_batch_is_only_its_own(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Batches of several runs that waited for the store go in as one group
    (`GroupCommit`: one transaction on SQLite, shared statements on PostgreSQL): the refused one
    answers its own caller and the others are stored."""
    full, fine, fresh = new_run(store, "full"), new_run(store, "fine"), new_run(store, "fresh")
    store.ingest_points(full, rows(1, "abcd"))
    store.ingest_points(fine, rows(1, "ab"))
    items = [
        (fine, group_rows(rows(2, "ab"))),  # appends to known series
        (full, group_rows(rows(2, "abcdz"))),  # one name too many
        (fresh, group_rows(rows(1, "abc"))),  # new series within the limit
    ]
    with caplog.at_level(logging.WARNING, logger="scalewatch.server.store.group_commit"):
        outcomes = store.ingest_groups._apply(items)
    assert not caplog.records  # the group's transaction did not fail over it
    assert isinstance(outcomes[0], Ingested) and tuple(outcomes[0]) == (2, 0)
    assert isinstance(outcomes[1], TooManySeries)
    assert isinstance(outcomes[2], Ingested) and tuple(outcomes[2]) == (3, 0)
    assert series_of(store, full) == dict.fromkeys("abcd", 1)
    assert series_of(store, fine) == dict.fromkeys("ab", 2)
    assert series_of(store, fresh) == dict.fromkeys("abc", 1)


def test_check_new_series_forecasts_the_ingest_check(store: SqlStore) -> None:
    """The check a caller makes before writing something else with the points (MLflow's
    log-batch): the same answer ingest would give, nothing written either way."""
    rid = new_run(store)
    store.ingest_points(rid, rows(1, "abc"))
    store.check_new_series(rid, ["a", "b", "x"])  # one new: 4, at the limit
    store.check_new_series(rid, list("abc"))
    with pytest.raises(TooManySeries) as refused:
        store.check_new_series(rid, ["a", "x", "y"])
    assert (refused.value.stored, refused.value.new) == (3, 2)
    store.ingest_points(rid, rows(2, "abcx"))
    store.check_new_series(rid, list("abcx"))  # at the limit, names the run has
    with pytest.raises(TooManySeries):
        store.check_new_series(rid, ["y"])
    assert set(series_of(store, rid)) == set("abcx")


# --- concurrency ------------------------------------------------------------------------------


@pytest.fixture
def two_stores(database_url: str) -> Iterator[tuple[SqlStore, SqlStore]]:
    """Two stores on one database, as two server processes have (each its own engine and
    GroupCommit: their ingests of one run really overlap in the database)."""
    def store() -> SqlStore:
        return SqlStore(make_engine(load_settings(database_url=database_url)))

    first, second = store(), store()
    yield first, second
    first.engine.dispose()
    second.engine.dispose()


def _outcome(call: Callable[[], Any]) -> Any:
    """What `call` returned, or the exception it raised (its caller's answer)."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001
        return exc


def _in_threads(calls: list[Callable[[], Any]]) -> list[Any]:
    results: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(i: int) -> None:
        start.wait()
        results[i] = _outcome(calls[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_concurrent_batches_of_two_processes_never_pass_the_limit(
    two_stores: tuple[SqlStore, SqlStore],
) -> None:
    first, second = two_stores
    for round_ in range(5):
        run_id = new_run(first, f"race-{round_}")
        first.ingest_points(run_id, rows(1, "a"))
        # Each brings two new names: 1 + 2 fits, 1 + 2 + 2 does not.
        outcomes = _in_threads([
            lambda run_id=run_id: first.ingest_points(run_id, rows(2, ["a", "x1", "x2"])),
            lambda run_id=run_id: second.ingest_points(run_id, rows(2, ["a", "y1", "y2"])),
        ])
        refused = [o for o in outcomes if isinstance(o, TooManySeries)]
        taken = [o for o in outcomes if isinstance(o, Ingested)]
        assert (len(refused), len(taken)) == (1, 1), outcomes
        assert len(series_of(first, run_id)) == 3


@pytest.mark.parametrize("backend", ["postgresql"])  # SQLite locks the database, not a row
def test_postgresql_batches_waiting_on_the_run_lock_see_each_others_series(
    two_stores: tuple[SqlStore, SqlStore],
) -> None:
    """Both batches are made to wait on the run row at once (held by a third transaction), so
    they read the series one after the other with the same start: the second sees the first's
    new series (READ COMMITTED, a statement after the lock) and is refused."""
    first, second = two_stores
    rid = new_run(first)
    first.ingest_points(rid, rows(1, "a"))
    holder = first.engine.connect()
    try:
        tx = holder.begin()
        holder.execute(select(Run.id).where(Run.id == rid).with_for_update())
        results: list[Any] = []
        threads = [
            threading.Thread(target=lambda s=s, names=names: results.append(
                _outcome(lambda: s.ingest_points(rid, rows(2, names)))))
            for s, names in ((first, ["a", "x1", "x2"]), (second, ["a", "y1", "y2"]))
        ]
        for t in threads:
            t.start()
        waiting = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        with second.engine.connect() as watch:
            wait_for(lambda: watch.execute(waiting).scalar_one() == 2, timeout=60)
        tx.commit()
    finally:
        holder.close()
    for t in threads:
        t.join(120)
    assert sorted(type(o).__name__ for o in results) == ["Ingested", "TooManySeries"], results
    assert len(series_of(first, rid)) == 3


# --- the REST API --------------------------------------------------------------------------------


def _post(api: Any, rid: int, step: int, names: str | list[str]) -> Any:
    body = {"points": [{"step": step, "compute": float(step),
                        "metrics": {n: 0.5 for n in names}}]}
    return api.post(f"/api/v1/runs/{rid}/points", json=body)


def test_rest_refusal_is_a_422_saying_run_series_new_names_and_limit(api: Any) -> None:
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    assert _post(api, rid, 1, "abc").json() == {"accepted": 3, "updated": 0}
    r = _post(api, rid, 2, ["a", "new/x", "new/y"])
    assert r.status_code == 422
    body = r.json()
    assert set(body) == {"detail", "code", "errors"}
    assert (body["code"], body["errors"]) == ("invalid", [])
    detail = body["detail"]
    for said in (f"run {rid} ", "has 3 metric series", "brings 2 new metric name(s)",
                 "'new/x'", "at most 4 distinct metric names", "nothing of the batch was stored"):
        assert said in detail, (said, detail)
    points = api.get(f"/api/v1/runs/{rid}/points", params={"metric": "a"}).json()["points"]
    assert [p["step"] for p in points] == [1]  # the known name's point went with the batch
    run = api.get(f"/api/v1/runs/{rid}").json()
    assert set(run["latest"]) == {"a", "b", "c"} and run["last_step"] == 1
    # At the limit, then only names the run has.
    assert _post(api, rid, 2, "abcd").json() == {"accepted": 4, "updated": 0}
    assert _post(api, rid, 3, "abcd").json() == {"accepted": 4, "updated": 0}
    r = _post(api, rid, 4, "e")
    assert r.status_code == 422 and "has 4 metric series" in r.json()["detail"]
    # Many new names: a few are named, the rest counted.
    r = _post(api, rid, 4, [f"m{i}" for i in range(10)])
    assert "brings 10 new metric name(s) ('m0', 'm1', 'm2' and 7 more)" in r.json()["detail"]


def test_rest_limit_is_checked_after_the_batch_is_valid(api: Any) -> None:
    """A batch with a bad point is the usual 422 listing it (nothing about series): the bound
    only ever sees a valid batch."""
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    body = {"points": [{"step": -1, "compute": 1.0, "metrics": {n: 0.5 for n in "abcdef"}}]}
    r = api.post(f"/api/v1/runs/{rid}/points", json=body)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "points[0].step"
    assert api.post("/api/v1/runs/424242/points", json={"points": [
        {"step": 1, "compute": 1.0, "metrics": {n: 0.5 for n in "abcdef"}}]}).status_code == 404


# --- the MLflow-compatible endpoint ------------------------------------------------------------

M = "/api/2.0/mlflow"


@pytest.fixture
def mlflow_client(database_url: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """An app with auth on and a write token limited to project "proj" (the store the MLflow
    routes get is then the project-scoped wrapper, as a team's token gets it)."""
    from fastapi.testclient import TestClient

    from tests.conftest import make_app

    app = make_app(database_url, auth=True)
    token = app.state.store.create_token("team", "write", ["proj"])[1]
    with TestClient(app) as client:
        yield client, {"Authorization": f"Bearer {token}"}
    app.state.store.engine.dispose()


def _mlflow_run(client: Any, h: dict[str, str]) -> str:
    exp = client.post(f"{M}/experiments/create", json={"name": "proj"}, headers=h).json()
    got = client.post(f"{M}/runs/create", headers=h,
                      json={"experiment_id": exp["experiment_id"], "run_name": "r"})
    assert got.status_code == 200, got.text
    return got.json()["run"]["info"]["run_id"]


def _metrics(keys: str | list[str], step: int) -> list[dict[str, Any]]:
    return [{"key": k, "value": 0.5, "timestamp": 0, "step": step} for k in keys]


def _refused(r: Any, run_id: str, stored: int, new: int) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == {"error_code", "message"}  # MLflow's error shape, which its client reads
    assert body["error_code"] == "INVALID_PARAMETER_VALUE"
    for said in (f"run {run_id} ", f"has {stored} metric series",
                 f"brings {new} new metric name(s)", f"at most {LIMIT} distinct metric names"):
        assert said in body["message"], (said, body["message"])


def test_mlflow_log_metric_and_log_batch_past_the_limit_are_a_400(mlflow_client: tuple) -> None:
    client, h = mlflow_client
    run_id = _mlflow_run(client, h)
    ok = client.post(f"{M}/runs/log-batch", headers=h,
                     json={"run_id": run_id, "metrics": _metrics("abc", 1)})
    assert ok.status_code == 200, ok.text
    # log-metric: a fourth key reaches the limit, a fifth passes it.
    log_metric = f"{M}/runs/log-metric"
    assert client.post(log_metric, headers=h,
                       json={"run_id": run_id, **_metrics("d", 2)[0]}).status_code == 200
    _refused(client.post(log_metric, headers=h, json={"run_id": run_id, **_metrics("e", 3)[0]}),
             run_id, stored=4, new=1)
    # Keys the run has are taken at the limit, by either call.
    assert client.post(log_metric, headers=h,
                       json={"run_id": run_id, **_metrics("e", 3)[0] | {"key": "a"}}
                       ).status_code == 200
    assert client.post(f"{M}/runs/log-batch", headers=h, json={
        "run_id": run_id, "metrics": _metrics("abcd", 4)}).status_code == 200
    # log-batch: known keys with a new one are refused whole.
    _refused(client.post(f"{M}/runs/log-batch", headers=h, json={
        "run_id": run_id, "metrics": _metrics("abcdxy", 5)}), run_id, stored=4, new=2)
    hist = client.get(f"{M}/metrics/get-history", headers=h,
                      params={"run_id": run_id, "metric_key": "a"}).json()["metrics"]
    assert [m["step"] for m in hist] == [1, 3, 4]
    run = client.get(f"/api/v1/runs/{run_id}", headers=h).json()
    assert set(run["latest"]) == set("abcd") and run["last_step"] == 4


def test_mlflow_log_batch_refused_writes_none_of_its_params_and_tags(
    mlflow_client: tuple,
) -> None:
    """log-batch writes params and tags before the metrics: a batch the bound refuses is
    refused before either, so nothing of it is stored (the check of `check_new_series`, then
    ingest's own under the run's lock)."""
    client, h = mlflow_client
    run_id = _mlflow_run(client, h)
    client.post(f"{M}/runs/log-batch", headers=h,
                json={"run_id": run_id, "metrics": _metrics("abc", 1)})
    before = client.get(f"/api/v1/runs/{run_id}", headers=h).json()
    batch = {
        "run_id": run_id,
        "metrics": _metrics(["a", "x", "y"], 2),
        "params": [{"key": "lr", "value": "1e-6"}],
        "tags": [{"key": "team", "value": "rl"}, {"key": "mlflow.runName", "value": "renamed"}],
    }
    _refused(client.post(f"{M}/runs/log-batch", headers=h, json=batch),
             run_id, stored=3, new=2)
    after = client.get(f"/api/v1/runs/{run_id}", headers=h).json()
    for field in ("name", "config", "tags", "latest", "last_step"):
        assert after[field] == before[field], field
    # The same params and tags with keys the run has (one new: at the limit) go in.
    batch["metrics"] = _metrics(["a", "x"], 2)
    assert client.post(f"{M}/runs/log-batch", headers=h, json=batch).status_code == 200
    after = client.get(f"/api/v1/runs/{run_id}", headers=h).json()
    assert (after["name"], after["config"], after["tags"]) == ("renamed", {"lr": "1e-6"},
                                                               ["team=rl"])
    assert set(after["latest"]) == {"a", "b", "c", "x"}
