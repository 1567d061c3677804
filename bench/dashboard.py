"""Dashboard bench: server time and bytes of the callbacks that produce each page's data.

* Runs page: 1,000 runs (each with a stored fit) in one project.
* Compare page: 10 runs × 100,000 points each (downsampled in the database to ≤ 2,000 a run
  over one shared compute range) plus the ceiling-vs-efficiency scatter.

Seeds through the store into a temporary SQLite file, and PostgreSQL when reachable
(`SCALEWATCH_BENCH_PG_URL`, default postgresql+psycopg://postgres@127.0.0.1:5432/postgres; its
own database is created and dropped). Requests go through FastAPI's TestClient to
`/dashboard/_dash-update-component`, exactly as the browser sends them. Baseline: the raw,
un-downsampled points JSON of the same runs from the REST API, measured in the same run.

    .venv/bin/python -m bench.dashboard [--runs 1000] [--points 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import TempDatabase, pg_available  # noqa: E402
from scalewatch.dashboard.callback_client import dash_call  # noqa: E402

TARGET_MS = 300.0
TARGET_BYTES = 1_000_000


def _fit_dict(c: np.ndarray, y: np.ndarray) -> dict:
    from scalewatch.server.fitting import FitOptions, fit_curve
    from scalewatch.server.services.fits import fit_record

    res = fit_curve(c, y, FitOptions(target_compute=float(c[-1]) * 4))
    return dict(fit_record(res, metric="val_pass_rate"))


def _curve(n: int, c_max: float, a: float, b: float, cm: float, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    c = np.linspace(c_max / n, c_max, n)
    y = 0.3 + (a - 0.3) / (1 + (cm / c) ** b) + rng.normal(0, 0.01, n)
    return c, y


def _store_fits(store, fits: dict[int, dict]) -> None:  # noqa: ANN001
    """Store one fit per run through the refit queue (claim, then finish)."""
    owner = "bench"
    while True:
        claimed = store.claim_dirty_series(owner, limit=500)
        if not claimed:
            return
        for d in claimed:
            store.finish_refit(d.series_id, owner, d.requested, fits.get(d.run_id), True)


def seed(store, n_runs: int, n_points: int) -> list[int]:  # noqa: ANN001
    from scalewatch.server.ingest import PointRow

    t0 = time.perf_counter()
    c, y = _curve(40, 8000.0, 0.6, 1.9, 2500.0, 0)
    small_fit = _fit_dict(c, y)
    fits: dict[int, dict] = {}
    rows = [PointRow("val_pass_rate", i, float(ci), float(yi), None) for i, (ci, yi) in
            enumerate(zip(c, y, strict=True))]  # fmt: skip
    for i in range(n_runs):
        run, _ = store.get_or_create_run(
            "bench-runs", f"run-{i:04d}", target_compute=32000.0, tags=["sweep"],
            config={"lr": 1e-4 * (1 + i % 7), "batch": 256 * (1 + i % 4), "seed": i},
        )  # fmt: skip
        store.ingest_points(run.id, rows)
        fits[run.id] = small_fit
    compare_ids = []
    for k in range(10):
        a, b, cm = 0.55 + 0.015 * k, 1.5 + 0.1 * k, 2000.0 + 400 * k
        c, y = _curve(n_points, 20000.0, a, b, cm, k + 1)
        run, _ = store.get_or_create_run("bench-compare", f"cmp-{k}", target_compute=80000.0)
        for lo in range(0, n_points, 20_000):
            store.ingest_points(
                run.id,
                [PointRow("val_pass_rate", lo + j, float(ci), float(yi), None)
                 for j, (ci, yi) in enumerate(zip(c[lo:lo + 20_000], y[lo:lo + 20_000],
                                                  strict=True))],
            )  # fmt: skip
        idx = np.linspace(0, n_points - 1, 2000).astype(int)  # fit on a thinned copy: faster
        fits[run.id] = _fit_dict(c[idx], y[idx])
        compare_ids.append(run.id)
    _store_fits(store, fits)
    print(f"  seeded {n_runs} runs + 10 × {n_points:,} points in {time.perf_counter() - t0:.1f}s")
    return compare_ids


def measure(fn, repeat: int) -> tuple[float, int, float]:  # noqa: ANN001
    """(median ms of repeated calls, bytes, ms of the first call). The first call is reported
    on its own: it pays for cold caches (pages, comparisons and curves are cached by version)."""
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1000
    times, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = fn()
        times.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, r.text[:500]
        size = len(r.content)
    return statistics.median(times), size, first


def cold_downsampling(fn) -> tuple[float, float]:  # noqa: ANN001
    """ms of a call with every cache of the page emptied (downsampled pages, comparisons, the
    fits' curves): (points from the rollups, as the Compare page reads them; exact buckets
    from point_chunks and raw points, as before the rollups), in the same conditions."""
    from scalewatch.dashboard.figures import common
    from scalewatch.server.services import compare
    from scalewatch.server.store import point_reads_sql, rollup_sql

    def cold() -> float:
        point_reads_sql._DOWNSAMPLED._items.clear()
        compare.COMPARISONS.clear()
        with common._CURVES_LOCK:
            common._CURVES.clear()
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1000

    saved = point_reads_sql.PointReadsMixin._downsample_rollup
    saved_many = rollup_sql.RollupMixin._rollup_pages
    with_rollups = cold()
    point_reads_sql.PointReadsMixin._downsample_rollup = (  # type: ignore[method-assign]
        lambda *a, **k: None)
    rollup_sql.RollupMixin._rollup_pages = lambda *a, **k: {}  # type: ignore[method-assign]
    try:
        return with_rollups, cold()
    finally:
        point_reads_sql.PointReadsMixin._downsample_rollup = saved  # type: ignore[method-assign]
        rollup_sql.RollupMixin._rollup_pages = saved_many  # type: ignore[method-assign]


def bench_backend(kind: str, n_runs: int, n_points: int, repeat: int) -> list[tuple]:
    from fastapi.testclient import TestClient
    from sqlalchemy import create_engine

    from scalewatch.server.api.app import create_app
    from scalewatch.server.config import load_settings
    from scalewatch.server.db.engine import make_engine
    from scalewatch.server.db.migrate import upgrade
    from scalewatch.server.store import SqlStore

    db = TempDatabase(kind)
    rows = []
    try:
        engine = create_engine(db.url)
        upgrade(engine)
        engine.dispose()
        settings = load_settings(database_url=db.url, auth=False, workers_enabled=False)
        store = SqlStore(make_engine(settings))
        ids = seed(store, n_runs, n_points)
        app = create_app(settings, store=store)
        # As `scalewatch serve` does (server/api/main.py build_app): what exists at startup is
        # moved out of the collector's reach. Without it a full collection walks this process's
        # objects (the app, the seeding's leftovers) in ~110 ms, landing in whichever request
        # happens to cross the threshold: 'first load' and 'cold' read 300+ ms in some runs.
        gc.collect()
        gc.freeze()
        with TestClient(app) as client:
            deps = client.get("/dashboard/_dash-dependencies").json()

            def runs_page():  # noqa: ANN202
                return dash_call(client, "runs-table", {"runs-project.value": "bench-runs"},
                                 deps=deps)  # fmt: skip

            def compare_main():  # noqa: ANN202
                return dash_call(client, "cmp-graph", {"cmp-ids.data": ids}, deps=deps)

            def compare_scatter():  # noqa: ANN202
                return dash_call(client, "cmp-scatter", {"cmp-ids.data": ids}, deps=deps)

            def raw_runs():  # noqa: ANN202
                return client.get("/api/v1/runs", params={"project": "bench-runs",
                                                          "limit": n_runs})  # fmt: skip

            class _Sum:
                def __init__(self, parts: list) -> None:
                    self.status_code = 200
                    self.content = b"".join(p.content for p in parts)
                    self.text = ""

            def raw_points():  # noqa: ANN202
                q = {"metric": "val_pass_rate"}
                return _Sum([client.get(f"/api/v1/runs/{i}/points", params=q) for i in ids])

            def compare_total():  # noqa: ANN202
                return _Sum([compare_main(), compare_scatter()])

            r_ms, r_b, _ = measure(runs_page, repeat)
            b_ms, b_b, _ = measure(raw_runs, repeat)
            rows.append((kind, f"Runs page ({n_runs:,} runs)", r_ms, r_b, b_ms, b_b))
            m_ms, m_b, m_first = measure(compare_main, repeat)
            cold_rollup, cold_exact = cold_downsampling(compare_main)
            s_ms, s_b, _ = measure(compare_scatter, repeat)
            t_ms, t_b, _ = measure(compare_total, repeat)
            p_ms, p_b, _ = measure(raw_points, max(1, repeat // 2))
            label = f"Compare (10 × {n_points:,} pts)"
            rows.append((kind, label + ": first load", m_first, m_b, p_ms, p_b))
            rows.append((kind, label + ": cold, rollups", cold_rollup, m_b, p_ms, p_b))
            rows.append((kind, label + ": cold, exact buckets", cold_exact, m_b, p_ms, p_b))
            rows.append((kind, label + ": chart+verdict", m_ms, m_b, p_ms, p_b))
            rows.append((kind, label + ": A-vs-B scatter", s_ms, s_b, None, None))
            rows.append((kind, label + ": page total", t_ms, t_b, p_ms, p_b))
        store.engine.dispose()
    finally:
        gc.unfreeze()  # the next database's run starts from the same state
        db.drop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sqlite-only", action="store_true")
    args = ap.parse_args()
    kinds = ["sqlite"]
    if not args.sqlite_only and pg_available():
        kinds.append("postgresql")
    elif not args.sqlite_only:
        print("PostgreSQL not reachable: SQLite only")
    rows = []
    for kind in kinds:
        print(f"[{kind}]")
        rows += bench_backend(kind, args.runs, args.points, args.repeat)
    head = (f"{'db':<11}{'request':<40}{'ms':>8}{'bytes':>11}  {'target':<15}"
            f"{'raw API ms':>11}{'raw bytes':>12}{'bytes ratio':>12}")  # fmt: skip
    print()
    print(head)
    print("-" * len(head))
    for kind, label, ms, size, bms, bsize in rows:
        ok = "ok" if ms <= TARGET_MS and size <= TARGET_BYTES else "MISS"
        ratio = f"{bsize / size:>11.1f}x" if bsize else f"{'–':>12}"
        print(
            f"{kind:<11}{label:<40}{ms:>8.0f}{size:>11,}  {ok + ' (≤300ms,≤1MB)':<15}"
            f"{(f'{bms:.0f}' if bms else '–'):>11}{(f'{bsize:,}' if bsize else '–'):>12}{ratio}"
        )
    print("\nms = median server time of repeated callback requests (TestClient, in-process;"
          " 'first load' = the first request of the process, nothing cached;"
          " 'cold' = a request with every cache emptied (pages, comparisons, curves), points"
          " from the rollups / exact buckets from point_chunks and raw points as before them);"
          " raw = the REST API's un-downsampled JSON for the same data.")  # fmt: skip


if __name__ == "__main__":
    main()
