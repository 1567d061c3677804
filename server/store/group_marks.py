"""Marking a group dirty inside another concern's transaction (ingest, run create/patch/delete).

A group's fit depends on every member's points of its metric, on who the members are and on
their fit settings, so each of those changes bumps `group_series.refit_requested` in the very
transaction that makes it: a group refit can then never miss a change, exactly like a series'.

Lock order: group rows are always the last rows a transaction locks (after the run row and its
series), so ingests of two members of one group and a run patch never wait on each other in a
cycle.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import update
from sqlalchemy.orm import Session

from scalewatch.server.db.group_models import GroupSeries
from scalewatch.server.db.models import utcnow
from scalewatch.server.store.common import dialect_insert

# The ingest hot path's mark, in plain SQL on either driver: one upsert (the row of the run's
# fit metric is created on the member's first points, bumped after that).
_UPSERT = (
    "INSERT INTO group_series (project_id, group_name, metric, refit_requested, refit_done, "
    "updated_at) VALUES ({p}, {p}, {p}, 1, 0, {p}) ON CONFLICT (project_id, group_name, metric) "
    "DO UPDATE SET refit_requested = group_series.refit_requested + 1, "
    "updated_at = excluded.updated_at"
)
UPSERT_PG = _UPSERT.format(p="%s")
UPSERT_SQLITE = _UPSERT.format(p="?")


def mark_group_dirty(
    s: Session, project_id: int, group: str, metrics: Iterable[str] = (), every: bool = True
) -> None:
    """Queue a refit of `group`: of every metric row it has (`every`, for membership and
    settings changes) and of `metrics` (rows created when missing)."""
    now = utcnow()
    wanted = sorted(set(metrics))
    if wanted:
        insert = dialect_insert(s)
        s.execute(
            insert(GroupSeries)
            .values([
                {"project_id": project_id, "group_name": group, "metric": m,
                 "refit_requested": 0, "refit_done": 0, "updated_at": now}
                for m in wanted
            ])
            .on_conflict_do_nothing()
        )
    if not every and not wanted:
        return
    where = [GroupSeries.project_id == project_id, GroupSeries.group_name == group]
    if not every:
        where.append(GroupSeries.metric.in_(wanted))
    s.execute(
        update(GroupSeries)
        .where(*where)
        .values(refit_requested=GroupSeries.refit_requested + 1, updated_at=now)
    )
