"""Ingest (upsert, last write wins) and point queries with in-database downsampling."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import and_, func, select, text, update
from sqlalchemy.orm import Session

from server import limits
from server.db.models import Point, Run, Series, utcnow
from server.ingest import PointRow
from server.store.base import NotFound, PointsPage
from server.store.common import dialect_insert
from server.store.runs_sql import resolve_fit_metric

# Each bucket keeps its first, last, lowest and highest point: collapses and spikes survive
# downsampling, which averaging would hide. Runs entirely inside the database (window functions
# exist in SQLite >= 3.25 and PostgreSQL), so a million-point series is never loaded into Python.
_DOWNSAMPLE_SQL = """
WITH b AS (
    SELECT step, compute, value,
           CAST(({x} - :lo) * :nb / :span AS INTEGER) AS bucket
    FROM points
    WHERE series_id = :sid AND step >= :since AND {x} >= :lo AND {x} <= :hi
), r AS (
    SELECT step, compute, value,
           ROW_NUMBER() OVER (PARTITION BY bucket ORDER BY step) AS r_first,
           ROW_NUMBER() OVER (PARTITION BY bucket ORDER BY step DESC) AS r_last,
           ROW_NUMBER() OVER (PARTITION BY bucket ORDER BY value, step) AS r_min,
           ROW_NUMBER() OVER (PARTITION BY bucket ORDER BY value DESC, step) AS r_max
    FROM b
)
SELECT step, compute, value FROM r
WHERE r_first = 1 OR r_last = 1 OR r_min = 1 OR r_max = 1
ORDER BY step
"""


class PointsMixin:
    def ingest_points(self, run_id: int, rows: list[PointRow]) -> tuple[int, int]:
        """Upsert rows on (run, metric, step); returns (accepted, updated) in one transaction."""
        # Last write wins inside a batch too (a resend may repeat a step).
        dedup: dict[tuple[str, int], PointRow] = {}
        for row in rows:
            dedup[(row.metric, row.step)] = row
        by_metric: dict[str, list[PointRow]] = defaultdict(list)
        for row in dedup.values():
            by_metric[row.metric].append(row)

        with self.session() as s:  # type: ignore[attr-defined]
            # Lock the run row: concurrent batches of one run serialise here, which keeps the
            # summaries exact and the lock order (run, then series by id) deadlock-free.
            run = s.get(Run, run_id, with_for_update=True)
            if run is None:
                raise NotFound(f"run {run_id} not found")
            if not rows:
                return 0, 0
            series_ids = self._ensure_series(s, run_id, sorted(by_metric))
            inserted: dict[str, int] = {}
            for metric in sorted(by_metric, key=lambda m: series_ids[m]):
                batch = by_metric[metric]
                overwritten = self._upsert_series_points(s, series_ids[metric], batch)
                inserted[metric] = len(batch) - overwritten
            self._update_summaries(s, run, series_ids, by_metric, inserted)
            return len(dedup), len(dedup) - sum(inserted.values())

    def _ensure_series(self, s: Session, run_id: int, names: list[str]) -> dict[str, int]:
        existing = dict(
            s.execute(
                select(Series.name, Series.id).where(
                    Series.run_id == run_id, Series.name.in_(names)
                )
            ).all()
        )
        missing = [n for n in names if n not in existing]
        if missing:
            now = utcnow()
            s.execute(
                dialect_insert(s)(Series).on_conflict_do_nothing(),
                [
                    {
                        "run_id": run_id,
                        "name": n,
                        "n_points": 0,
                        "updated_at": now,
                        "refit_requested": 0,
                        "refit_done": 0,
                    }
                    for n in missing
                ],
            )
            existing.update(
                s.execute(
                    select(Series.name, Series.id).where(
                        Series.run_id == run_id, Series.name.in_(missing)
                    )
                ).all()
            )
        return existing

    def _upsert_series_points(self, s: Session, sid: int, batch: list[PointRow]) -> int:
        steps = [r.step for r in batch]
        lo, hi = min(steps), max(steps)
        # Count overwrites with a primary-key range scan; for a trainer appending new steps the
        # range lies past the stored points and this returns nothing.
        present = set(
            s.scalars(
                select(Point.step).where(Point.series_id == sid, Point.step >= lo, Point.step <= hi)
            ).all()
        )
        overwritten = sum(1 for st in steps if st in present)
        insert = dialect_insert(s)
        stmt = insert(Point)
        stmt = stmt.on_conflict_do_update(
            index_elements=[Point.series_id, Point.step],
            set_={
                "compute": stmt.excluded.compute,
                "value": stmt.excluded.value,
                "wall_time": stmt.excluded.wall_time,
            },
        )
        s.execute(
            stmt,
            [
                {
                    "series_id": sid,
                    "step": r.step,
                    "compute": r.compute,
                    "value": r.value,
                    "wall_time": r.wall_time,
                }
                for r in batch
            ],
        )
        return overwritten

    def _update_summaries(
        self,
        s: Session,
        run: Run,
        series_ids: dict[str, int],
        by_metric: dict[str, list[PointRow]],
        inserted: dict[str, int],
    ) -> None:
        now = utcnow()
        all_names = s.scalars(select(Series.name).where(Series.run_id == run.id)).all()
        fit_metric = resolve_fit_metric(run.fit_metric, list(all_names))
        for metric, batch in by_metric.items():
            sid = series_ids[metric]
            newest = max(batch, key=lambda r: r.step)
            values: dict[str, object] = {
                "updated_at": now,
                "n_points": Series.n_points + inserted[metric],
            }
            if metric == fit_metric:
                values["refit_requested"] = Series.refit_requested + 1
            s.execute(update(Series).where(Series.id == sid).values(**values))
            s.execute(
                update(Series)
                .where(
                    Series.id == sid,
                    (Series.last_step.is_(None)) | (Series.last_step <= newest.step),
                )
                .values(
                    last_step=newest.step,
                    last_compute=newest.compute,
                    last_value=newest.value,
                )
            )
        newest_all = max((r for b in by_metric.values() for r in b), key=lambda r: r.step)
        run.last_seen_at = now
        if run.last_step is None or newest_all.step >= run.last_step:
            run.last_step = newest_all.step
            run.last_compute = newest_all.compute

    def get_points(
        self,
        run_id: int,
        metric: str,
        *,
        since_step: int | None = None,
        max_points: int | None = None,
        x_range: tuple[float, float] | None = None,
        x: str = "compute",
    ) -> PointsPage:
        with self.session() as s:  # type: ignore[attr-defined]
            if s.get(Run, run_id) is None:
                raise NotFound(f"run {run_id} not found")
            sid = s.scalar(select(Series.id).where(Series.run_id == run_id, Series.name == metric))
            if sid is None:
                return PointsPage(metric, [], [], [], False, 0)
            since = since_step if since_step is not None else 0
            where = and_(Point.series_id == sid, Point.step >= since)
            col = Point.compute if x == "compute" else Point.step
            if x_range is not None:
                where = and_(where, col >= x_range[0], col <= x_range[1])
            total = s.scalar(select(func.count()).where(where)) or 0
            if max_points is None or total <= max_points:
                cap = limits.MAX_RAW_POINTS
                rows = s.execute(
                    select(Point.step, Point.compute, Point.value)
                    .where(where)
                    .order_by(Point.step)
                    .limit(cap)
                ).all()
                return PointsPage(
                    metric,
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                    total > cap,
                    total,
                )
            if x_range is None:
                lo, hi = s.execute(select(func.min(col), func.max(col)).where(where)).one()
            else:
                lo, hi = x_range
            span = (hi - lo) or 1
            nb = max(1, max_points // 4)
            sql = _DOWNSAMPLE_SQL.format(x="compute" if x == "compute" else "step")
            rows = s.execute(
                text(sql),
                {
                    "sid": sid,
                    "since": since,
                    "lo": lo,
                    "hi": hi,
                    "nb": nb,
                    "span": float(span) * (1 + 1e-12) if x == "compute" else span + 1,
                },
            ).all()
            return PointsPage(
                metric,
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                True,
                total,
            )
