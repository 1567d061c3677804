"""Deleting a run while a batch of its points is being written leaves none of them behind.

Points carry no foreign key (it cost a third of ingest time), so `delete_run` must see every
point of the run: it takes the run's row lock, which every ingest holds until it commits,
before it deletes anything. PostgreSQL only: SQLite runs one writer at a time, so the two
transactions cannot interleave there.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine, text

from scalewatch.server.ingest import PointRow
from tests.support.polling import wait_for


# The shared `store` and `database_url` fixtures, on PostgreSQL alone.
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_run_deleted_during_an_ingest_leaves_no_orphan_points(  # noqa: ANN201
    store, database_url: str  # noqa: ANN001
):
    from scalewatch.server.store.base import NotFound

    other = create_engine(database_url)
    try:
        run, _ = store.get_or_create_run("p", "doomed")
        rid = run.id
        store.ingest_points(rid, [PointRow("reward", s, float(s), 0.1, None) for s in range(5)])
        with other.connect() as conn:
            sid = conn.execute(text("SELECT id FROM series WHERE run_id = :r"), {"r": rid}).scalar()
        # An ingest in flight: it holds the run's row lock and has written a point, not
        # committed yet (what the store's own ingest does between its lock and its COMMIT).
        ingest = other.connect()
        ingest.execute(text("SELECT id FROM runs WHERE id = :r FOR UPDATE"), {"r": rid})
        ingest.execute(text("INSERT INTO points (series_id, step, compute, value) "
                            "VALUES (:s, 99, 99.0, 0.5)"), {"s": sid})
        done: list[BaseException | None] = []

        def delete() -> None:
            try:
                store.delete_run(rid)
                done.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                done.append(exc)

        worker = threading.Thread(target=delete)
        worker.start()

        def delete_waits_on_a_lock() -> bool:
            with other.connect() as conn:
                return bool(conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'")).scalar())

        wait_for(delete_waits_on_a_lock, timeout=30, interval=0.05)
        ingest.commit()
        ingest.close()
        worker.join(timeout=30)
        assert done == [None]
        with other.connect() as conn:
            left = conn.execute(text("SELECT count(*) FROM points WHERE series_id = :s"),
                                {"s": sid}).scalar()
        assert left == 0  # the in-flight batch went with its run
        with pytest.raises(NotFound):
            store.ingest_points(rid, [PointRow("reward", 100, 100.0, 0.1, None)])
    finally:
        other.dispose()
