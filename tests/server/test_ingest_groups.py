"""Group commit (`server/store/group_commit.py`): batches of several runs written in one
transaction (PostgreSQL: `ingest_pg.py`, shared statements; SQLite: one after the other) leave
exactly what writing them one by one leaves, and one batch's failure is never another's."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, text

from scalewatch.server.ingest import PointRow, group_rows
from scalewatch.server.store import ingest_pg
from scalewatch.server.store.base import Ingested, NotFound
from scalewatch.server.store.chunks import COLUMNS
from tests.support.polling import wait_for

pg_only = pytest.mark.parametrize("backend", ["postgresql"])

METRICS = ("val/pass_rate", "rl/kl")


def _rows(steps: range, metrics: tuple[str, ...] = METRICS, wall: float | None = 1.5,
          shift: float = 0.0) -> list[PointRow]:  # fmt: skip
    return [PointRow(m, s, s * 1e12, 0.3 + shift + 0.001 * s + 0.01 * i, wall)
            for s in steps for i, m in enumerate(metrics)]  # fmt: skip


def _state(store, project: str) -> dict:  # noqa: ANN001
    """Everything an ingest writes, for one project's runs, keyed by run and metric names."""
    with store.engine.connect() as c:
        q = lambda sql: [tuple(r) for r in c.execute(text(sql), {"p": project}).all()]  # noqa: E731
        runs = "FROM runs r JOIN projects p ON p.id = r.project_id WHERE p.name = :p"
        series = ("FROM series s JOIN runs r ON r.id = s.run_id "
                  "JOIN projects p ON p.id = r.project_id WHERE p.name = :p")
        return {
            "runs": q(f"SELECT r.name, r.last_step, r.last_compute {runs} ORDER BY r.name"),
            "series": q(f"SELECT r.name, s.name, s.n_points, s.last_step, s.last_compute, "
                        f"s.last_value, s.refit_requested {series} ORDER BY 1, 2"),
            "points": q(f"SELECT r.name, s.name, pt.step, pt.compute, pt.value, pt.wall_time "
                        f"{series.replace('FROM series s', 'FROM points pt JOIN series s ON s.id = pt.series_id')} "  # noqa: E501
                        f"ORDER BY 1, 2, 3"),
            "chunks": q(f"SELECT r.name, s.name, {', '.join('c.' + k for k in COLUMNS[1:])} "
                        f"{series.replace('FROM series s', 'FROM point_chunks c JOIN series s ON s.id = c.series_id')} "  # noqa: E501
                        f"ORDER BY 1, 2, 3, 4"),
            "group_marks": q("SELECT g.group_name, g.metric, g.refit_requested "
                             "FROM group_series g JOIN projects p ON p.id = g.project_id "
                             "WHERE p.name = :p ORDER BY 1, 2"),
        }


def _runs(store, project: str) -> list[int]:  # noqa: ANN001
    fields = [{"group": "recipe-a", "fit_metric": "val/pass_rate"},
              {"group": "recipe-a", "fit_metric": "val/pass_rate"},
              {"group": "recipe-b", "fit_metric": "rl/kl"}, {}, {}]  # fmt: skip
    return [store.get_or_create_run(project, f"r{i}", **f)[0].id for i, f in enumerate(fields)]


def _rounds() -> list[list[tuple[int, list[PointRow]]]]:
    """Per round, (run index, rows) of the five runs: first points, appends of every size, a
    metric the run has never had, a rewrite of stored steps, points without a wall time."""
    return [
        [(i, _rows(range(0, 10))) for i in range(5)],
        [(0, _rows(range(10, 30))), (1, _rows(range(10, 11))), (2, _rows(range(10, 700))),
         (3, _rows(range(10, 20), wall=None)), (4, _rows(range(10, 20)))],
        [(0, _rows(range(30, 40))), (1, _rows(range(5, 15), shift=0.2)),  # a rewrite
         (2, _rows(range(700, 5000, 7))), (3, _rows(range(20, 30), metrics=("new/metric",))),
         (4, _rows(range(20, 21)) + [PointRow("rl/kl", 21, 21e12, 0.9, None)])],
        [(i, _rows(range(5000 + i, 5100))) for i in range(5)],
    ]  # fmt: skip


def test_a_group_writes_exactly_what_one_batch_at_a_time_writes(store):  # noqa: ANN001
    one, grouped = _runs(store, "one"), _runs(store, "grouped")
    write_group = (store._ingest_group_or_each if store.dialect == "postgresql"
                   else store._ingest_group_sqlite)  # fmt: skip
    for round_ in _rounds():
        expected = [store.ingest_points(one[i], rows) for i, rows in round_]  # each alone
        outcomes = write_group([(grouped[i], group_rows(rows)) for i, rows in round_])
        assert outcomes == expected
    assert _state(store, "grouped") == _state(store, "one")
    state = _state(store, "one")
    assert len(state["points"]) > 1000  # the test saw real work
    # Two members of one group in one transaction bump its mark once each, as one by one:
    # twice when they joined it, twice a round.
    assert ("recipe-a", "val/pass_rate", 2 + 2 * 4) in state["group_marks"]


@pg_only
def test_a_group_defers_rewrites_and_new_metrics_and_reports_missing_runs(store):  # noqa: ANN001
    ids = _runs(store, "p")
    for rid in ids[:3]:
        store.ingest_points(rid, _rows(range(0, 10)))
    items = [(ids[0], group_rows(_rows(range(10, 20)))),  # the common case: in the group
             (ids[1], group_rows(_rows(range(5, 15)))),  # rewrites steps 5-9: on its own
             (ids[2], group_rows(_rows(range(10, 20), metrics=("brand/new",)))),  # on its own
             (999_999, group_rows(_rows(range(0, 5))))]  # fmt: skip
    with store.engine.begin() as conn:
        outcomes = store._ingest_group_pg(conn, items)
    assert outcomes[0] == Ingested(20, 0, True)
    assert outcomes[1:3] == [None, None]
    assert isinstance(outcomes[3], NotFound)
    assert store.get_points(ids[0], "val/pass_rate").total == 20
    assert store.get_points(ids[1], "val/pass_rate").total == 10  # left for later, untouched


@pg_only
def test_a_failing_group_is_written_batch_by_batch(store, monkeypatch):  # noqa: ANN001
    """The group's transaction fails (here its last statement but COMMIT): nothing of it
    stays, and each batch is written on its own; a batch that fails on its own too fails
    alone."""
    ids = _runs(store, "p")
    for rid in ids:
        store.ingest_points(rid, _rows(range(0, 10)))
    bad = ingest_pg._RUNS_SUMMARY.replace("WHERE runs.id = u.id", "WHERE 1 / 0 = 1")
    monkeypatch.setattr(ingest_pg, "_RUNS_SUMMARY", bad)
    outcomes = store._ingest_group_or_each(
        [(ids[0], group_rows(_rows(range(10, 20)))), (ids[2], group_rows(_rows(range(10, 30))))]
    )
    assert outcomes == [Ingested(20, 0, True), Ingested(40, 0, True)]
    monkeypatch.undo()
    too_far = [PointRow("val/pass_rate", 2**63, 1.0, 0.5, None)]  # past bigint: fails anywhere
    outcomes = store._ingest_group_or_each([
        (ids[3], group_rows(_rows(range(10, 20)))),
        (ids[1], group_rows(too_far)),
        (ids[4], group_rows(_rows(range(10, 20)))),
    ])
    assert outcomes[0] == outcomes[2] == Ingested(20, 0, True)
    assert isinstance(outcomes[1], Exception)
    for rid, total in zip(ids, [20, 10, 30, 20, 20], strict=True):
        assert store.get_points(rid, "val/pass_rate").total == total
        assert store.get_run(rid).last_step == total - 1


@pg_only
def test_concurrent_batches_are_grouped_and_each_caller_gets_its_own_result(  # noqa: ANN201
    store, database_url: str  # noqa: ANN001
):
    """While one batch waits for its run's lock, batches of other runs queue; they are then
    written as one group (a second batch of a run waits for the group after its first)."""
    ids = _runs(store, "p")
    for rid in ids:
        store.ingest_points(rid, _rows(range(0, 10)))
    holder = create_engine(database_url).connect()
    holder.execute(text("SELECT id FROM runs WHERE id = :r FOR UPDATE"), {"r": ids[0]})
    results: dict[str, object] = {}

    def ingest(label: str, rid: int, rows: list[PointRow]) -> None:
        try:
            results[label] = store.ingest_points(rid, rows)
        except Exception as exc:  # noqa: BLE001 - checked below
            results[label] = exc

    groups_before = store.ingest_groups.groups
    work = [("r0", ids[0], _rows(range(10, 20)))]
    work += [(f"r{i}", ids[i], _rows(range(10, 30))) for i in range(1, 5)]
    work += [("r1 again", ids[1], _rows(range(30, 35))), ("gone", 999_999, _rows(range(3)))]
    threads = []
    try:
        for n, (label, rid, rows) in enumerate(work):
            threads.append(threading.Thread(target=ingest, args=(label, rid, rows)))
            threads[-1].start()
            # The first is the leader, blocked on the lock; the others queue behind it.
            wait_for(lambda n=n: len(store.ingest_groups._queue) == n, timeout=60, interval=0.01)
    finally:
        holder.commit()
        holder.close()
    for t in threads:
        t.join(120)
    assert results["r0"] == Ingested(20, 0, True)
    assert all(results[f"r{i}"] == Ingested(40, 0, True) for i in range(1, 5))
    assert results["r1 again"] == Ingested(10, 0, True)
    assert isinstance(results["gone"], NotFound)
    # r0 alone, then r1-r4 and the missing run together, then r1's second batch.
    assert store.ingest_groups.groups - groups_before == 3
    assert [store.get_points(rid, "rl/kl").total for rid in ids] == [20, 35, 30, 30, 30]
    assert [store.get_run(rid).last_step for rid in ids] == [19, 34, 29, 29, 29]


@pg_only
def test_metrics_count_the_ingest_transactions_and_the_batches_they_wrote(api):  # noqa: ANN001
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    for first in (0, 10):
        points = [{"step": s, "compute": float(s), "metrics": {"m": 0.5}}
                  for s in range(first, first + 10)]  # fmt: skip
        assert api.post(f"/api/v1/runs/{rid}/points", json={"points": points}).status_code == 200
    text_ = api.get("/metrics").text
    assert "scalewatch_ingest_groups_total 2\n" in text_
    assert "scalewatch_ingest_group_batches_total 2\n" in text_


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_failing_sqlite_group_is_written_batch_by_batch(store):  # noqa: ANN001
    ids = _runs(store, "p")
    too_far = [PointRow("val/pass_rate", 2**63, 1.0, 0.5, None)]  # past SQLite's INTEGER
    outcomes = store._ingest_group_sqlite([
        (ids[0], group_rows(_rows(range(0, 10)))),
        (999_999, group_rows(_rows(range(0, 10)))),
        (ids[1], group_rows(too_far)),
        (ids[2], group_rows(_rows(range(0, 10)))),
    ])
    assert outcomes[0] == outcomes[3] == Ingested(20, 0, True)
    assert isinstance(outcomes[1], NotFound) and isinstance(outcomes[2], OverflowError)
    assert [store.get_points(rid, "val/pass_rate").total for rid in ids[:3]] == [10, 0, 10]


def test_summaries_move_forward_only_and_count_every_point_once(store):  # noqa: ANN001
    """A replayed older batch overwrites its points but never turns back a summary."""
    rid = store.get_or_create_run("p", "r", fit_metric="val/pass_rate")[0].id
    store.ingest_points(rid, _rows(range(0, 10)))
    store.ingest_points(rid, _rows(range(2, 5), shift=0.5))  # older steps, new values
    assert _state(store, "p")["series"] == [
        ("r", "rl/kl", 10, 9, 9e12, 0.3 + 0.009 + 0.01, 0),
        ("r", "val/pass_rate", 10, 9, 9e12, 0.3 + 0.009, 2),
    ]
    store.ingest_points(rid, _rows(range(10, 12)))
    series = _state(store, "p")["series"]
    assert [row[2:5] for row in series] == [(12, 11, 11e12)] * 2 and series[1][6] == 3
    assert _state(store, "p")["runs"] == [("r", 11, 11e12)]
