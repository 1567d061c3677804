"""Runs and projects: create-or-resume, list with filters, write a decided change, delete.

What a change means (PATCH merging, refit triggers, which runs a project's defaults refit) is
decided by `scalewatch.server.services.runs` / `.projects`; this module stores it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from scalewatch.server.db.models import (
    Fit,
    Point,
    PointChunk,
    Project,
    Run,
    RunTag,
    Series,
    utcnow,
)
from scalewatch.server.domain.fit_metric import choose, choose_fit_metric
from scalewatch.server.domain.runs import (
    Project as ProjectRecord,
)
from scalewatch.server.domain.runs import (
    ProjectDefaults,
    RunChange,
    RunSettings,
)
from scalewatch.server.domain.runs import (
    Run as RunRecord,
)
from scalewatch.server.limits import MAX_NAME_LENGTH
from scalewatch.server.store.base import NotFound, RunQuery, UnitConflict
from scalewatch.server.store.common import SqlBase, dialect_insert, iso
from scalewatch.server.store.group_marks import mark_group_dirty
from scalewatch.server.store.run_names import NameTaken, check_run_name

DEFAULT_FIT_METRICS = ("val_pass_rate", "reward")
T = TypeVar("T")


def resolve_fit_metric(explicit: str | None, metric_names: set[str] | list[str]) -> str:
    """The run's fit_metric, else a recognised validation metric (val_pass_rate, the RL
    frameworks' own: `server/domain/fit_metric.py`), else the training reward, else reward."""
    return choose_fit_metric(explicit, metric_names)


def _first(found: list[T], what: str) -> T:
    if not found:
        raise NotFound(f"{what} not found")
    return found[0]


def explicit_fit_metric(run: Run) -> str | None:
    """The fit metric someone chose for `run`: its own, else its project's default."""
    return run.fit_metric or run.project.fit_metric


class RunsMixin(SqlBase):
    def _project_id(self, s: Session, name: str) -> int:
        found = self._insert_project(s, name)
        if found is None:
            found = s.scalar(select(Project.id).where(Project.name == name))
        assert found is not None  # inserted above unless it existed
        return found

    def _insert_project(self, s: Session, name: str) -> int | None:
        """The new project's id when this call's insert landed; None when the project exists
        (another writer may have made it a moment ago)."""
        insert = dialect_insert(s)
        return s.scalar(insert(Project).values(name=name, created_at=utcnow())
                        .on_conflict_do_nothing().returning(Project.id))

    def get_or_create_run(self, project: str, name: str, **fields: Any) -> tuple[RunRecord, bool]:
        with self.session() as s:
            pid = self._project_id(s, project)
            insert = dialect_insert(s)
            now = utcnow()
            tags = list(dict.fromkeys(fields.get("tags") or []))
            stmt = (
                insert(Run)
                .values(
                    project_id=pid,
                    name=name,
                    config=fields.get("config") or {},
                    tags=tags,
                    notes=fields.get("notes") or "",
                    status="running",
                    compute_unit=fields.get("compute_unit") or "gpu_hours",
                    target_compute=fields.get("target_compute"),
                    fit_metric=fields.get("fit_metric"),
                    fit_settings=fields.get("fit_settings") or {},
                    group_name=fields.get("group"),
                    created_at=now,
                    last_seen_at=now,
                )
                .on_conflict_do_nothing()
                .returning(Run.id)
            )
            new_id = s.scalar(stmt)
            created = new_id is not None
            if created:
                if tags:
                    s.execute(insert(RunTag), [{"run_id": new_id, "tag": t} for t in tags])
                run_id = new_id
                if fields.get("group"):
                    self._set_group(s, s.get(Run, run_id), fields["group"], joined_now=True)
            else:
                run_id = s.scalar(select(Run.id).where(Run.project_id == pid, Run.name == name))
                alive: dict[str, Any] = {"last_seen_at": now, "status": "running"}
                unit = fields.get("compute_unit")
                if unit is not None:
                    alive.update(self._resumed_unit(s, run_id, project, name, unit))
                # A resumed run is alive again.
                s.execute(update(Run).where(Run.id == run_id).values(**alive))
                # A resume naming a group moves the run into it (one without keeps its group).
                if fields.get("group"):
                    self._set_group(s, s.get(Run, run_id), fields["group"])
            return _first(self._runs(s, [run_id]), f"run {run_id}"), created

    def _resumed_unit(self, s: Session, run_id: Any, project: str, name: str, unit: str
                      ) -> dict[str, Any]:
        """The unit a resume names: the run's own (any case), or a new one for a run with no
        points yet (created before its trainer said its unit); else `UnitConflict` (a sync of
        GPU-hours into a run counted in FLOPs mixed the two on one axis)."""
        have = s.scalar(select(Run.compute_unit).where(Run.id == run_id))
        if have is None or have.lower() == unit.lower():
            return {}
        has_points = s.scalar(select(Series.id).where(Series.run_id == run_id,
                                                     Series.n_points > 0).limit(1))
        if has_points is None:
            return {"compute_unit": unit}
        raise UnitConflict(
            f"run {project}/{name} counts compute in {have}, not {unit}: log in its unit, or "
            "resume it under another name")

    def create_run_unique(self, project: str, name: str, **fields: Any) -> RunRecord:
        """A new run, never a resumed one: `name`, else `name (2)`, `name (3)`, ... (MLflow's
        `runs/create` makes a new run each time, even under a name already taken)."""
        for n in range(1, 10_000):
            candidate = name if n == 1 else f"{name} ({n})"
            if len(candidate) > MAX_NAME_LENGTH:  # keep the suffix, shorten the name
                candidate = name[: MAX_NAME_LENGTH - len(candidate)] + candidate[len(name) :]
            with self.session() as s:
                pid = self._project_id(s, project)
                taken = s.scalar(
                    select(Run.id).where(Run.project_id == pid, Run.name == candidate)
                )
            if taken is None:
                try:
                    run, created = self.get_or_create_run(project, candidate, **fields)
                except UnitConflict:  # another request took the name (and logged) meanwhile
                    continue
                if created:  # else another request took the name in between: next one
                    return run
        raise RuntimeError(f"no free run name for {name!r} in {project!r}")

    def get_project(
        self, name: str | None = None, project_id: int | None = None
    ) -> ProjectRecord | None:
        """A project by name or by id (with or without runs); None when there is none."""
        with self.session() as s:
            q = select(Project)
            q = q.where(Project.name == name) if name is not None else q.where(
                Project.id == project_id
            )
            found = s.scalar(q)
            if found is None:
                return None
            return ProjectRecord.model_validate({
                "id": found.id, "name": found.name, "created_at": iso(found.created_at),
                "fit_metric": found.fit_metric, "noise_prior": found.noise_prior,
                "b_prior": found.b_prior})

    def update_project(
        self, name: str, defaults: ProjectDefaults,
        refits: Callable[[RunSettings], bool] | None = None,
    ) -> ProjectRecord:
        """Write the defaults `defaults` sets (None: clear), creating the project when missing;
        the runs `refits` picks (`services.projects.refits_run`) are refitted, in this
        transaction."""
        values = {k: list(v) if isinstance(v, tuple) else v
                  for k, v in defaults.model_dump(include=defaults.model_fields_set).items()}
        with self.session() as s:
            pid = self._project_id(s, name)
            if values:
                s.execute(update(Project).where(Project.id == pid).values(**values))
            s.flush()
            groups: dict[str, set[str]] = {}
            runs = s.scalars(
                select(Run).where(Run.project_id == pid).options(selectinload(Run.project))
            ).all() if refits is not None else []
            for run in runs:
                settings = RunSettings.model_construct(
                    fit_metric=run.fit_metric, fit_settings=run.fit_settings or {})
                if refits is not None and refits(settings):
                    self._request_refit(s, run, groups)
            for group in sorted(groups):
                mark_group_dirty(s, pid, group, groups[group])
        found = self.get_project(name=name)
        assert found is not None  # created above
        return found

    def create_project(self, name: str) -> tuple[ProjectRecord, bool]:
        """The project of that name, created when missing (True when this call created it)."""
        existed = self.get_project(name=name)
        if existed is not None:
            return existed, False
        with self.session() as s:
            # Created by this call only if its own insert landed: another may have made it
            # since the look above (MLflow's experiments/create must then say it exists).
            won = self._insert_project(s, name) is not None
        made = self.get_project(name=name)
        assert made is not None  # inserted above unless it existed
        return made, won

    def get_run(self, run_id: int) -> RunRecord:
        with self.session() as s:
            return _first(self._runs(s, [run_id]), f"run {run_id}")

    def get_runs(self, run_ids: list[int]) -> list[RunRecord]:
        """Several runs in the order asked, in one read (the queries of one `get_run`);
        raises `NotFound` naming the first unknown id."""
        with self.session() as s:
            found = {r.id: r for r in self._runs(s, list(dict.fromkeys(run_ids)))}
        missing = [i for i in run_ids if i not in found]
        if missing:
            raise NotFound(f"run {missing[0]} not found")
        return [found[i] for i in run_ids]

    def run_projects(self, run_ids: list[int]) -> dict[int, str]:
        """The project name of each run that exists (unknown ids are left out): what a
        project-scoped token's check reads, one indexed query."""
        if not run_ids:
            return {}
        with self.session() as s:
            rows = s.execute(
                select(Run.id, Project.name)
                .join(Project, Project.id == Run.project_id)
                .where(Run.id.in_(list(dict.fromkeys(run_ids))))
            ).all()
            return {int(i): str(name) for i, name in rows}

    def list_projects(self) -> list[str]:
        """Names of the projects that have at least one run, sorted."""
        with self.session() as s:
            has_runs = exists().where(Run.project_id == Project.id)
            return list(s.scalars(select(Project.name).where(has_runs).order_by(Project.name)))

    def list_runs(self, query: RunQuery) -> tuple[list[RunRecord], int]:
        with self.session() as s:
            q = select(Run.id)
            if query.project is not None or query.projects is not None:
                q = q.join(Project, Project.id == Run.project_id)
            if query.project is not None:
                q = q.where(Project.name == query.project)
            if query.projects is not None:
                q = q.where(Project.name.in_(query.projects))
            if query.status is not None:
                q = q.where(Run.status == query.status)
            if query.tag is not None:
                q = q.where(Run.id.in_(select(RunTag.run_id).where(RunTag.tag == query.tag)))
            if query.group is not None:
                q = q.where(Run.group_name == query.group)
            if query.name is not None:
                q = q.where(Run.name == query.name)
            total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
            ids = s.scalars(
                q.order_by(Run.created_at.desc(), Run.id.desc())
                .limit(query.limit)
                .offset(query.offset)
            ).all()
            return self._runs(s, list(ids)), total

    def update_run(self, run_id: int, decide: Callable[[RunRecord], RunChange]) -> RunRecord:
        """Write the change `decide` makes of the run as it is under the run's lock
        (`services.runs.decide_run_change`: a read-decide-write that a concurrent update cannot
        make stale). `decide` may raise: nothing is written."""
        with self.session() as s:
            if self.dialect == "sqlite":
                # No row locks on SQLite (FOR UPDATE is ignored) and the transaction begins
                # at its first write: write first, so SQLite's write lock is held before the
                # run is read, and concurrent updates of it serialise.
                s.execute(update(Run).where(Run.id == run_id).values(id=Run.id))
            run = s.get(Run, run_id, with_for_update=True)
            if run is None:
                raise NotFound(f"run {run_id} not found")
            change = decide(_first(self._runs(s, [run_id]), f"run {run_id}"))
            written = change.written()
            if change.name is not None and change.name != run.name:
                self._rename(s, run, check_run_name(change.name))
            if "tags" in written:
                tags = change.tags or []
                run.tags = tags
                s.execute(delete(RunTag).where(RunTag.run_id == run_id))
                if tags:
                    s.execute(
                        dialect_insert(s)(RunTag), [{"run_id": run_id, "tag": t} for t in tags]
                    )
            for key in ("fit_settings", "status", "notes", "config"):
                if key in written and getattr(change, key) is not None:
                    setattr(run, key, getattr(change, key))
            for key in ("target_compute", "fit_metric"):
                if key in written:
                    setattr(run, key, getattr(change, key))
            s.flush()
            if change.refit:
                self._request_refit(s, run)
            if "group" in written:  # last: group rows are locked after the run's series
                self._set_group(s, run, change.group)
            return _first(self._runs(s, [run_id]), f"run {run_id}")

    def _rename(self, s: Session, run: Run, name: str) -> None:
        """Rename within the run's project; NameTaken when another run has the name (checked
        first for a clear message; the unique constraint still guards a concurrent rename)."""
        taken = s.scalar(select(exists().where(
            Run.project_id == run.project_id, Run.name == name, Run.id != run.id)))
        if taken:
            raise NameTaken(f"project {run.project.name!r} already has a run named {name!r}")
        run.name = name
        try:
            with s.begin_nested():
                s.flush()
        except IntegrityError:
            raise NameTaken(
                f"project {run.project.name!r} already has a run named {name!r}") from None

    def _fit_metric_of(self, s: Session, run: Run) -> str:
        names = s.scalars(select(Series.name).where(Series.run_id == run.id)).all()
        return resolve_fit_metric(explicit_fit_metric(run), list(names))

    def _request_refit(
        self, s: Session, run: Run, groups: dict[str, set[str]] | None = None
    ) -> None:
        """Queue a refit of the run's fit metric, and of its group (a member's settings and
        fit metric are inputs of the group's fit); with `groups`, the group is collected there
        (name -> metrics) for the caller to mark after every series (group rows last)."""
        metric = self._fit_metric_of(s, run)
        s.execute(
            update(Series)
            .where(Series.run_id == run.id, Series.name == metric)
            .values(refit_requested=Series.refit_requested + 1)
        )
        if run.group_name and groups is not None:
            groups.setdefault(run.group_name, set()).add(metric)
        elif run.group_name:
            mark_group_dirty(s, run.project_id, run.group_name, [metric])

    def _set_group(self, s: Session, run: Run | None, group: str | None,
                   joined_now: bool = False) -> None:
        """Move `run` into `group` (None: out of any); the group it left and the one it
        joined are both refitted, in this transaction."""
        if run is None or (run.group_name == group and not joined_now):
            return
        old, run.group_name = run.group_name, group
        s.flush()
        # The joined group's row of the run's fit metric, unless that is still a guess (no
        # points, no metric chosen): its first points create the right one (ingest's mark).
        has_points = s.scalar(select(Series.id).where(Series.run_id == run.id).limit(1))
        metrics = ([self._fit_metric_of(s, run)]
                   if has_points is not None or explicit_fit_metric(run) else [])
        # Both groups in name order: two moves in opposite directions lock them alike.
        for name in sorted({g for g in (old, group) if g}):
            mark_group_dirty(s, run.project_id, name, metrics if name == group else [])

    def delete_run(self, run_id: int) -> None:
        with self.session() as s:
            # The run's row lock first, as every ingest takes it: a batch being written
            # commits before any delete below reads, so none of its points (which carry no
            # foreign key) is left behind, and a batch that comes after finds no run (404).
            run = s.get(Run, run_id, with_for_update=True)
            if run is None:
                raise NotFound(f"run {run_id} not found")
            project_id, group = run.project_id, run.group_name
            # Explicit deletes in dependency order: correct even where FK cascades are off.
            series_ids = select(Series.id).where(Series.run_id == run_id)
            s.execute(delete(Point).where(Point.series_id.in_(series_ids)))
            s.execute(delete(PointChunk).where(PointChunk.series_id.in_(series_ids)))
            s.execute(delete(Fit).where(Fit.series_id.in_(series_ids)))
            self._delete_run_dependents(s, run_id)
            s.execute(delete(Series).where(Series.run_id == run_id))
            s.execute(delete(RunTag).where(RunTag.run_id == run_id))
            s.execute(delete(Run).where(Run.id == run_id))
            if group:  # the group lost a member: refit it without this run (group rows last)
                mark_group_dirty(s, project_id, group)

    def _runs(self, s: Session, ids: list[int]) -> list[RunRecord]:
        if not ids:
            return []
        runs = {
            r.id: r
            for r in s.scalars(
                select(Run).where(Run.id.in_(ids)).options(selectinload(Run.project))
            ).all()
        }
        series_rows = s.execute(
            select(Series.run_id, Series.name, Series.last_value, Series.latest_fit_id)
            .where(Series.run_id.in_(ids))
            .order_by(Series.name)
        ).all()
        latest: dict[int, dict[str, float | None]] = {i: {} for i in ids}
        fit_ids: dict[int, dict[str, int | None]] = {i: {} for i in ids}
        for run_id, name, value, fit_id in series_rows:
            latest[run_id][name] = value
            fit_ids[run_id][name] = fit_id
        wanted: dict[int, int] = {}
        for run_id in ids:
            run = runs.get(run_id)
            if run is None:
                continue
            metric = resolve_fit_metric(explicit_fit_metric(run), list(latest[run_id]))
            fit_id = fit_ids[run_id].get(metric)
            if fit_id is not None:
                wanted[run_id] = fit_id
        fits: dict[int, dict[str, Any] | None] = {}
        if wanted:
            # The summary column, written with each fit (migration 0003 filled it for every
            # series' latest fit): a stored result also carries parameter draws (tens of kB),
            # and decoding them for every run of a 1,000-run list dominated the request.
            fits = dict(
                s.execute(select(Fit.id, Fit.summary).where(Fit.id.in_(wanted.values()))).all()
            )
        out = []
        for run_id in ids:
            run = runs.get(run_id)
            if run is None:
                continue
            metric_choice = choose(run.fit_metric, list(latest[run_id]), run.project.fit_metric)
            # Validated (pydantic-core's validation of 1,000 runs costs less than Python-side
            # `model_construct`: measured 11 ms against 18 ms).
            out.append(
                RunRecord.model_validate(dict(
                    id=run.id,
                    project=run.project.name,
                    name=run.name,
                    status=run.status,
                    config=run.config or {},
                    tags=run.tags or [],
                    notes=run.notes or "",
                    compute_unit=run.compute_unit,
                    target_compute=run.target_compute,
                    fit_metric=metric_choice.metric,
                    fit_metric_reason=metric_choice.reason,
                    fit_metric_warning=metric_choice.warning,
                    fit_settings=run.fit_settings or {},
                    group=run.group_name,
                    created_at=iso(run.created_at),
                    last_seen_at=iso(run.last_seen_at),
                    last_step=run.last_step,
                    last_compute=run.last_compute,
                    latest=latest[run_id],
                    fit=fits.get(wanted[run_id]) if run_id in wanted else None,
                ))
            )
        return out
