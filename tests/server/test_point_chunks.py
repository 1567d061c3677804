"""point_chunks: kept exact at every ingest, and downsampling from them equals the raw query."""

from __future__ import annotations

import random
import struct

import pytest
from sqlalchemy import text

from scalewatch.server.ingest import PointRow
from scalewatch.server.store import point_reads_sql
from scalewatch.server.store.chunks import COLUMNS, all_levels


def _rows(metric: str, steps: list[int], rng: random.Random, base: float = 0.0) -> list[PointRow]:
    return [PointRow(metric, s, s * 0.5 + 1.0, base + rng.random(), None) for s in steps]


def _stored_chunks(store, sid: int) -> list[tuple]:  # noqa: ANN001
    with store.engine.connect() as c:
        rows = c.execute(
            text(f"SELECT {', '.join(COLUMNS)} FROM point_chunks WHERE series_id = :s "
                 "ORDER BY level, chunk"),
            {"s": sid},
        ).all()
    return [tuple(r) for r in rows]


def _expected_chunks(store, sid: int) -> list[tuple]:  # noqa: ANN001
    with store.engine.connect() as c:
        pts = c.execute(
            text("SELECT step, compute, value FROM points WHERE series_id = :s"), {"s": sid}
        ).all()
    return sorted((tuple(r) for r in all_levels(sid, [tuple(p) for p in pts])),
                  key=lambda r: (r[1], r[2]))  # fmt: skip


def _series_id(store, run_id: int, metric: str) -> int:  # noqa: ANN001
    with store.engine.connect() as c:
        return c.execute(
            text("SELECT id FROM series WHERE run_id = :r AND name = :m"),
            {"r": run_id, "m": metric},
        ).scalar_one()


def _seed(store, rng: random.Random) -> int:  # noqa: ANN001
    run, _ = store.get_or_create_run("p", "chunks")
    rid = run.id
    steps = list(range(0, 30_000))
    for lo in range(0, 20_000, 1000):  # appends (the trainer's case), two metrics a batch
        store.ingest_points(rid, _rows("m", steps[lo : lo + 1000], rng)
                            + _rows("r", steps[lo : lo + 1000:7], rng))  # fmt: skip
    # A gap filled later (inserts inside the stored range), overwrites, and a spike.
    store.ingest_points(rid, _rows("m", list(range(25_000, 30_000)), rng))
    store.ingest_points(rid, _rows("m", list(range(20_000, 25_000, 3)), rng))
    store.ingest_points(rid, _rows("m", list(range(5_000, 5_100)), rng, base=0.25))
    store.ingest_points(rid, [PointRow("m", 12_345, 12_345 * 0.5 + 1.0, 7.5, None)])
    return rid


@pytest.fixture
def seeded(store):  # noqa: ANN001, ANN201
    return store, _seed(store, random.Random(7))


def test_chunks_stay_exact_through_appends_inserts_and_overwrites(seeded):
    store, rid = seeded
    for metric in ("m", "r"):
        sid = _series_id(store, rid, metric)
        assert _stored_chunks(store, sid) == _expected_chunks(store, sid)


@pytest.mark.parametrize(
    ("x", "x_range", "since", "max_points"),
    [
        ("compute", None, None, 1000),
        ("compute", (2_000.0, 9_000.5), None, 400),
        ("compute", (0.0, 20_000.0), 3_333, 1000),
        ("step", None, None, 1000),
        ("step", (1_000, 21_000), 777, 400),
    ],
)
def test_downsampling_from_chunks_equals_the_raw_query(seeded, monkeypatch, x, x_range, since,
                                                       max_points):  # fmt: skip
    store, rid = seeded
    used = []
    real = point_reads_sql.PointReadsMixin._downsample_chunks

    def spy(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = real(self, *a, **k)
        used.append(out is not None)
        return out

    def ask():  # noqa: ANN202
        point_reads_sql._DOWNSAMPLED._items.clear()
        return store.get_points(rid, "m", max_points=max_points, x_range=x_range, x=x,
                                since_step=since)  # fmt: skip

    monkeypatch.setattr(point_reads_sql.PointReadsMixin, "_downsample_chunks", spy)
    from_chunks = ask()
    assert used == [True]  # dense enough: the chunks were used
    monkeypatch.setattr(point_reads_sql.PointReadsMixin, "_downsample_chunks", lambda *a, **k: None)
    raw = ask()
    assert from_chunks == raw
    assert from_chunks.downsampled and 7.5 in from_chunks.values or x_range is not None


def test_sparse_series_falls_back_to_the_raw_query(seeded, monkeypatch):
    store, rid = seeded
    calls = []
    real = point_reads_sql.PointReadsMixin._downsample_chunks

    def spy(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = real(self, *a, **k)
        calls.append(out)
        return out

    monkeypatch.setattr(point_reads_sql.PointReadsMixin, "_downsample_chunks", spy)
    point_reads_sql._DOWNSAMPLED._items.clear()
    page = store.get_points(rid, "r", max_points=1000)  # ~2,900 points, 3 a 16-step chunk
    assert calls == [None] and page.downsampled


def test_migration_fills_chunks_from_existing_points(empty_database_url):
    from sqlalchemy import create_engine

    from scalewatch.server.db.migrate import upgrade

    engine = create_engine(empty_database_url)
    try:
        upgrade(engine, "0005")
        rng = random.Random(3)
        with engine.begin() as c:
            c.execute(text("INSERT INTO projects (id, name, created_at) "
                           "VALUES (1, 'p', CURRENT_TIMESTAMP)"))  # fmt: skip
            c.execute(text(
                "INSERT INTO runs (id, project_id, name, config, tags, notes, status, "
                "compute_unit, fit_settings, created_at, last_seen_at) VALUES (1, 1, 'r', '{}', "
                "'[]', '', 'running', 'gpu_hours', '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            ))  # fmt: skip
            c.execute(text(
                "INSERT INTO series (id, run_id, name, n_points, updated_at, refit_requested, "
                "refit_done) VALUES (1, 1, 'm', 3000, CURRENT_TIMESTAMP, 0, 0)"
            ))  # fmt: skip
            c.execute(
                text("INSERT INTO points (series_id, step, compute, value) VALUES (1, :s, :c, :v)"),
                [{"s": s, "c": s * 0.5, "v": rng.random()} for s in range(0, 6000, 2)],
            )
        upgrade(engine)

        class _S:  # what the helpers need of a store
            pass

        st = _S()
        st.engine = engine  # type: ignore[attr-defined]
        stored = _stored_chunks(st, 1)
        assert stored and stored == _expected_chunks(st, 1)
    finally:
        engine.dispose()


def _bits(row: tuple) -> tuple:
    """A row with each float as its IEEE bytes (== holds -0.0 and 0.0 equal)."""
    return tuple(struct.pack(">d", x) if isinstance(x, float) else x for x in row)


def test_ingest_stores_every_value_bit_for_bit(store):  # noqa: ANN001
    """Appends go in as binary arrays on PostgreSQL: extreme floats, the largest step, with
    and without a wall time in one batch (and a batch of none), read back exactly (there bit
    for bit, -0.0 too); the chunks stay exact."""
    run, _ = store.get_or_create_run("p", "bits")
    big = 2**62
    values = [5e-324, 1e-300, 0.1 + 0.2, 1.7976931348623157e308, -0.0, 123456789.123456789]
    rows = [PointRow("m", big - 10 + i, v * 0 + 1e-310 * i, v, None if i % 2 else 1.7e9 + i / 3)
            for i, v in enumerate(values)]  # fmt: skip
    rows += [PointRow("n", i, float(i), -v, 1.0) for i, v in enumerate(values)]
    store.ingest_points(run.id, rows)
    store.ingest_points(run.id, [PointRow("m", big, 2.5, 0.25, None)])  # an append after
    with store.engine.connect() as c:
        got = {tuple(r) for r in c.execute(text(
            "SELECT s.name, p.step, p.compute, p.value, p.wall_time FROM points p "
            "JOIN series s ON s.id = p.series_id"))}  # fmt: skip
    want = {(r.metric, r.step, r.compute, r.value, r.wall_time) for r in rows}
    want |= {("m", big, 2.5, 0.25, None)}
    assert got == want
    if store.dialect == "postgresql":  # SQLite keeps no -0.0 (a REAL it stores as 0)
        assert {_bits(r) for r in got} == {_bits(r) for r in want}
    for metric in ("m", "n"):
        sid = _series_id(store, run.id, metric)
        assert _stored_chunks(store, sid) == _expected_chunks(store, sid)


def test_level_columns_are_all_levels_bit_for_bit():
    """The vectorised chunk builder of ingest gives `all_levels`' rows exactly, in the key's
    order, for several series at once: ties in value (the earliest lowest, the latest
    highest) and in compute, -0.0 next to 0.0, sparse and dense steps, one point a chunk."""
    np = pytest.importorskip("numpy")
    from scalewatch.server.store.chunks import level_columns

    rng = random.Random(3)
    for _ in range(200):
        want: list[tuple] = []
        series = []
        for sid in sorted(rng.sample(range(1, 40), rng.randint(1, 4))):
            start = rng.choice([0, 7, 1000, 2**40])
            k = rng.randint(1, 1500)
            steps = sorted(rng.sample(range(start, start + k * rng.choice([1, 3, 50])), k))
            values = [rng.choice([0.0, -0.0, 0.5, 2.5]) if rng.random() < 0.5 else rng.random()
                      for _ in steps]  # fmt: skip
            computes = [rng.choice([0.0, -0.0, 1.0]) if rng.random() < 0.5 else rng.random()
                        for _ in steps]  # fmt: skip
            series.append((sid, steps, computes, values))
            want += all_levels(sid, list(zip(steps, computes, values, strict=True)))
        cols = level_columns(
            np.concatenate([np.full(len(s[1]), s[0]) for s in series]),
            np.array([st for s in series for st in s[1]], dtype=np.int64),
            np.array([c for s in series for c in s[2]]),
            np.array([v for s in series for v in s[3]]),
        )
        got = list(zip(*(c.tolist() for c in cols), strict=True))
        assert [_bits(r) for r in got] == [_bits(tuple(r)) for r in want]
        assert all(type(a) is type(b) for g, w in zip(got, want, strict=True)
                   for a, b in zip(g, w, strict=True))  # fmt: skip
