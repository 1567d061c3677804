"""What an ingest answers: (accepted, updated), and whether it queued a refit (the route wakes
the refitter only then)."""

from __future__ import annotations

from scalewatch.server.ingest import PointRow


def test_ingest_says_whether_it_queued_a_refit(store):  # noqa: ANN001
    run, _ = store.get_or_create_run("p", "r")
    rid = run.id
    other = store.ingest_points(rid, [PointRow("rl/kl", s, float(s), 0.1, None) for s in range(5)])
    assert tuple(other) == (5, 0) and not other.refit  # not the fit metric: nothing to refit
    accepted, updated = store.ingest_points(
        rid, [PointRow("val_pass_rate", s, float(s), 0.3, 1.0) for s in range(3)]
    )
    assert (accepted, updated) == (3, 0)
    again = store.ingest_points(rid, [PointRow("val_pass_rate", 2, 2.0, 0.4, None),
                                      PointRow("rl/kl", 9, 9.0, 0.2, None)])  # fmt: skip
    assert tuple(again) == (2, 1) and again.refit
    claimed = store.claim_dirty_series("test", limit=10)
    assert [d.metric for d in claimed] == ["val_pass_rate"]


def test_an_ingest_that_fails_in_the_database_stores_nothing(store, monkeypatch):  # noqa: ANN001
    """The last statements (summaries, and on PostgreSQL COMMIT pipelined with them) failing
    leaves no point, chunk or summary of the batch; the same batch then goes in whole."""
    from scalewatch.server.store import ingest_pg, points_sql

    run, _ = store.get_or_create_run("p", "r")
    rid = run.id
    store.ingest_points(rid, [PointRow("m", s, float(s), 0.5, None) for s in range(100)])
    batch = [PointRow("m", s, float(s), 0.5, 1.0) for s in range(100, 200)]

    def boom(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("database went away")

    if store.dialect == "postgresql":  # a statement in the pipeline that ends with COMMIT
        bad = ingest_pg._SERIES_SUMMARY.replace("WHERE s.id = u.id", "WHERE 1 / 0 = 1")
        monkeypatch.setattr(ingest_pg, "_SERIES_SUMMARY", bad)
    else:
        monkeypatch.setattr(points_sql.PointsMixin, "_update_summaries", boom)
    try:
        store.ingest_points(rid, batch)
    except Exception:  # noqa: BLE001, S110 - either error is the point of the test
        pass
    else:
        raise AssertionError("the ingest should have failed")
    monkeypatch.undo()
    page = store.get_points(rid, "m")
    assert page.total == 100 and page.steps[-1] == 99
    assert store.get_points(rid, "m", max_points=8, rollup=True).total == 100
    assert tuple(store.ingest_points(rid, batch)) == (100, 0)
    page = store.get_points(rid, "m")
    assert page.total == 200 and page.steps[-1] == 199
