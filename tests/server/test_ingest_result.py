"""What an ingest answers: (accepted, updated), and whether it queued a refit (the route wakes
the refitter only then)."""

from __future__ import annotations

from scalewatch.server.ingest import PointRow


def test_ingest_says_whether_it_queued_a_refit(store):  # noqa: ANN001
    run, _ = store.get_or_create_run("p", "r")
    rid = run["id"]
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
