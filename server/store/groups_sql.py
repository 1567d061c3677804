"""Groups (recipes) and their fits: the group refit queue (leased like series), group fit
history, and the reads the API, the refitter and group alerts need. A group is the runs of one
project sharing `runs.group_name`; its members can therefore never disagree on the project."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session, selectinload

from scalewatch.server.db.group_models import GroupFit, GroupSeries
from scalewatch.server.db.models import Fit, Point, Project, Run, Series, utcnow
from scalewatch.server.domain.runs import GroupMember, GroupSummary
from scalewatch.server.store.base import DirtyGroup, NotFound
from scalewatch.server.store.common import SqlBase, iso
from scalewatch.server.store.fit_records import (
    FitHistoryEntry,
    FitRecord,
    fit_columns,
    fit_summary,
    history_entry,
)
from scalewatch.server.store.fits_sql import finished_runs_teach
from scalewatch.server.store.group_marks import mark_group_dirty
from scalewatch.server.store.runs_sql import explicit_fit_metric, resolve_fit_metric


class GroupsMixin(SqlBase):
    # ---- members -----------------------------------------------------------------------------
    def _project_id_of(self, s: Session, project: str) -> int:
        pid = s.scalar(select(Project.id).where(Project.name == project))
        if pid is None:
            raise NotFound(f"project {project!r} not found")
        return pid

    def _members(self, s: Session, pid: int, group: str | None = None) -> list[dict[str, Any]]:
        """Runs of a project in `group` (every group when None) with their resolved fit
        metric, by id."""
        q = select(Run).where(Run.project_id == pid).options(selectinload(Run.project))
        q = q.where(Run.group_name == group if group is not None else Run.group_name.is_not(None))
        runs = s.scalars(q.order_by(Run.id)).all()
        names: dict[int, list[str]] = {r.id: [] for r in runs}
        if runs:
            for rid, name in s.execute(
                select(Series.run_id, Series.name).where(Series.run_id.in_(list(names)))
            ):
                names[rid].append(name)
        return [
            {
                "id": r.id,
                "name": r.name,
                "group": r.group_name,
                "fit_metric": resolve_fit_metric(explicit_fit_metric(r), names[r.id]),
                "target_compute": r.target_compute,
                "fit_settings": dict(r.fit_settings or {}),
                "status": r.status,
            }
            for r in runs
        ]

    def group_members(self, project: str, group: str) -> list[GroupMember]:
        """The runs of `group` (id, name, fit_metric, target, fit settings), by id; raises
        `NotFound` for an unknown project or a group without members."""
        with self.session() as s:
            members = self._members(s, self._project_id_of(s, project), group)
        if not members:
            raise NotFound(f"project {project!r} has no group {group!r}")
        return [GroupMember.model_validate(m) for m in members]

    def list_groups(self, project: str) -> list[GroupSummary]:
        """Every group of a project: name, n_runs, runs (ids), its common fit metric (None
        when the members disagree) and the latest fit summary of that metric."""
        with self.session() as s:
            pid = self._project_id_of(s, project)
            by_group: dict[str, list[dict[str, Any]]] = {}
            for m in self._members(s, pid):
                by_group.setdefault(m["group"], []).append(m)
            rows = s.execute(
                select(GroupSeries.group_name, GroupSeries.metric, GroupFit.summary)
                .join(GroupFit, GroupFit.id == GroupSeries.latest_fit_id)
                .where(GroupSeries.project_id == pid)
            ).all()
            fits = {(g, m): summary for g, m, summary in rows}
        out = []
        for name in sorted(by_group):
            members = by_group[name]
            metrics = {m["fit_metric"] for m in members}
            metric = next(iter(metrics)) if len(metrics) == 1 else None
            out.append(GroupSummary.model_validate({
                "name": name,
                "n_runs": len(members),
                "runs": [m["id"] for m in members],
                "metric": metric,
                "fit": fits.get((name, metric)) if metric is not None else None,
            }))
        return out

    # ---- the group refit queue -------------------------------------------------------------
    def claim_dirty_groups(
        self, owner: str, lease_seconds: float = 120, limit: int = 4
    ) -> list[DirtyGroup]:
        """Lease groups whose inputs changed since their last fit: the same compare-and-set
        claim as `claim_dirty_series` (never two workers on one group; expired leases free)."""
        now = utcnow()
        dirty = (
            GroupSeries.refit_requested > GroupSeries.refit_done,
            or_(GroupSeries.lease_until.is_(None), GroupSeries.lease_until < now),
        )
        with self.session() as s:
            candidates = s.scalars(
                select(GroupSeries.id).where(*dirty).order_by(GroupSeries.updated_at).limit(limit)
            ).all()
        claimed: list[DirtyGroup] = []
        for gid in candidates:
            with self.session() as s:
                res = s.execute(
                    update(GroupSeries)
                    .where(GroupSeries.id == gid, *dirty)
                    .values(lease_owner=owner, lease_until=now + timedelta(seconds=lease_seconds))
                    .returning(GroupSeries.project_id, GroupSeries.group_name,
                               GroupSeries.metric, GroupSeries.refit_requested)
                ).first()
                if res is None:
                    continue
                project = s.scalar(select(Project.name).where(Project.id == res[0]))
                claimed.append(DirtyGroup(gid, res[0], str(project), res[1], res[2], res[3]))
        return claimed

    def group_snapshot(self, group_series_id: int) -> tuple[int, list[dict[str, Any]]]:
        """(refit_requested, members with their points of the group's metric) from one
        snapshot: every member's settings and points as of the counter the fit marks done."""
        with self.sessions() as s:
            if self.dialect == "postgresql":
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            row = s.execute(
                select(GroupSeries.refit_requested, GroupSeries.project_id,
                       GroupSeries.group_name, GroupSeries.metric)
                .where(GroupSeries.id == group_series_id)
            ).first()
            if row is None:
                s.rollback()
                return 0, []
            requested, pid, group, metric = row
            members = self._members(s, pid, group)
            # The project's drift allowance, as its runs' fits take it (fits_sql.fit_context).
            hindcasts = finished_runs_teach(s, pid, metric)["hindcasts"]
            sids = dict(s.execute(
                select(Series.run_id, Series.id).where(
                    Series.run_id.in_([m["id"] for m in members]), Series.name == metric)
            ).all())
            for m in members:
                sid = sids.get(m["id"])
                pts = [] if sid is None else s.execute(
                    select(Point.compute, Point.value, Point.step)
                    .where(Point.series_id == sid).order_by(Point.step)
                ).all()
                m["series_id"] = sid
                m["compute"] = [p[0] for p in pts]
                m["values"] = [p[1] for p in pts]
                m["steps"] = [p[2] for p in pts]
                m["run_fit"] = None if sid is None else self._current_fit(s, sid)
                m["project_hindcasts"] = hindcasts
            s.rollback()  # read-only: end the snapshot
        return int(requested or 0), members

    @staticmethod
    def _current_fit(s: Session, series_id: int) -> dict[str, Any] | None:
        """The series' latest fit (with intervals) when no change is waiting for a refit; read
        after its points, so a fit newer than them shows in its point count (the caller
        checks that it describes exactly the points read)."""
        row = s.execute(
            select(Series.refit_requested, Series.refit_done, Series.latest_fit_id)
            .where(Series.id == series_id)
        ).first()
        if row is None or row[0] != row[1] or row[2] is None:
            return None
        fit = s.execute(select(Fit.result, Fit.has_intervals).where(Fit.id == row[2])).first()
        return dict(fit[0]) if fit is not None and fit[1] and fit[0] else None

    def finish_group_refit(
        self,
        group_series_id: int,
        owner: str,
        requested: int,
        result: FitRecord | None,
        has_intervals: bool,
        n_members: int = 0,
    ) -> int | None:
        """Store a group fit (if any), mark the group done up to `requested`, drop the lease.
        Only the lease holder's fit counts: a worker whose lease expired stores nothing."""
        with self.session() as s:
            gs = s.get(GroupSeries, group_series_id)
            if gs is None or gs.lease_owner != owner:
                return None
            fit_id = None
            if result is not None:
                fit = GroupFit(
                    group_series_id=group_series_id,
                    project_id=gs.project_id,
                    group_name=gs.group_name,
                    metric=gs.metric,
                    created_at=utcnow(),
                    requested=requested,
                    n_members=n_members,
                    **fit_columns(result, has_intervals),
                )
                s.add(fit)
                s.flush()
                fit_id = fit.id
                fit.result = {**result, "fit_id": fit_id, "fitted_at": iso(fit.created_at)}
                fit.summary = {**(fit_summary(fit.result) or {}),
                               "seed_spread": result.get("seed_spread")}
            values: dict[str, Any] = {"lease_owner": None, "lease_until": None,
                                      "refit_done": requested}
            if fit_id is not None:
                values["latest_fit_id"] = fit_id
            s.execute(update(GroupSeries).where(GroupSeries.id == group_series_id,
                                                GroupSeries.lease_owner == owner).values(**values))
            return fit_id

    def request_group_fit(self, project: str, group: str, metric: str) -> bool:
        """Queue a fit of (group, metric) unless one is queued or the latest is current
        (stored after every member's newest points of `metric`); False when no member has
        points of it. The read path of `GET /groups/fit`, like `request_fit`."""
        with self.session() as s:
            pid = self._project_id_of(s, project)
            member_ids = select(Run.id).where(Run.project_id == pid, Run.group_name == group)
            changed_at = s.scalar(
                select(func.max(Series.updated_at))
                .where(Series.run_id.in_(member_ids), Series.name == metric)
            )
            if changed_at is None:
                return False
            row = s.execute(
                select(GroupSeries.id, GroupSeries.refit_requested > GroupSeries.refit_done,
                       GroupFit.created_at)
                .join(GroupFit, GroupFit.id == GroupSeries.latest_fit_id, isouter=True)
                .where(GroupSeries.project_id == pid, GroupSeries.group_name == group,
                       GroupSeries.metric == metric)
            ).first()
            if row is not None:
                gid, queued, fitted_at = row
                if queued or (fitted_at is not None and changed_at <= fitted_at):
                    return True  # nothing to write
                # Compare-and-set: concurrent readers queue it once.
                s.execute(
                    update(GroupSeries)
                    .where(GroupSeries.id == gid,
                           GroupSeries.refit_requested <= GroupSeries.refit_done)
                    .values(refit_requested=GroupSeries.refit_requested + 1, updated_at=utcnow())
                )
                return True
            mark_group_dirty(s, pid, group, [metric], every=False)
            return True

    # ---- reading group fits ----------------------------------------------------------------
    def _group_series_id(self, s: Session, project: str, group: str, metric: str) -> int | None:
        pid = self._project_id_of(s, project)
        return s.scalar(select(GroupSeries.id).where(
            GroupSeries.project_id == pid, GroupSeries.group_name == group,
            GroupSeries.metric == metric))

    def latest_group_fit(self, project: str, group: str, metric: str) -> FitRecord | None:
        with self.session() as s:
            gid = self._group_series_id(s, project, group, metric)
            if gid is None:
                return None
            return s.scalar(
                select(GroupFit.result)
                .join(GroupSeries, GroupSeries.latest_fit_id == GroupFit.id)
                .where(GroupSeries.id == gid)
            )

    def group_fit_history(
        self, project: str, group: str, metric: str, limit: int = 1000
    ) -> list[FitHistoryEntry]:
        """Every stored fit of (group, metric), oldest first."""
        with self.session() as s:
            gid = self._group_series_id(s, project, group, metric)
            if gid is None:
                return []
            rows = s.execute(
                select(GroupFit.id, GroupFit.created_at, GroupFit.status, GroupFit.n_points,
                       GroupFit.max_compute, GroupFit.A, GroupFit.A_lo, GroupFit.A_hi,
                       GroupFit.has_intervals, GroupFit.result)
                .where(GroupFit.group_series_id == gid)
                .order_by(GroupFit.id.desc())
                .limit(limit)
            ).all()
            return [history_entry(r) for r in reversed(rows)]

    def best_ok_group_fit(self, group_series_id: int) -> FitRecord | None:
        """The group's `ok` fit with the highest A interval lower end (`asymptote_drop`)."""
        with self.session() as s:
            return s.scalar(
                select(GroupFit.result)
                .where(GroupFit.group_series_id == group_series_id, GroupFit.status == "ok",
                       GroupFit.A_lo.is_not(None))
                .order_by(GroupFit.A_lo.desc(), GroupFit.id.desc())
                .limit(1)
            )
