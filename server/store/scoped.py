"""The store as a project-scoped token sees it: every read and write limited to its projects.

A token may be limited to a list of project names (`api_tokens.projects`). Every surface that
acts for a token (REST handlers and the services they call, the MLflow-compatible API, the
dashboard's pages and callbacks) is handed this wrapper instead of the store, so the limit
holds in one place rather than in every handler:

* a project outside the list, named by the caller (a run's project, an experiment name, a
  rule's project, a group's project), is refused with `ProjectDenied` (403: the answer depends
  on the name alone, so it reveals nothing about what exists);
* a run, alert or alert rule of another project is `NotFound`, answered exactly like an id that
  does not exist (ids are sequential: a 403 would confirm which exist elsewhere);
* lists (runs, projects, alerts, rules) only hold the token's projects;
* anything else the wrapper does not know (tokens, the refit queue, raw sessions) is refused:
  a method added to the store later stays closed until it is given its rule here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from scalewatch.server.domain.alerts import Alert, AlertRule, Delivery, RuleChanges
from scalewatch.server.domain.runs import (
    GroupMember,
    GroupSummary,
    Project,
    ProjectDefaults,
    Run,
    RunChange,
    RunSettings,
)
from scalewatch.server.domain.tokens import Token
from scalewatch.server.store.base import EventBuilder, NotFound, RunQuery, Store


class ProjectDenied(NotFound):
    """A project-scoped token named a project outside its list (REST 403, MLflow
    PERMISSION_DENIED). A `NotFound` subclass so code that shows "not there" for a missing
    project (the dashboard) shows the same for a refused one."""


def token_projects(info: Token | None) -> tuple[str, ...] | None:
    """The projects a token record is limited to; None: every project (or auth is off)."""
    if info is None or info.projects is None:
        return None
    return tuple(info.projects)


def scoped(store: Any, info: Token | None) -> Any:
    """The store as the token of `info` may use it: the store itself for an unscoped token."""
    projects = token_projects(info)
    return store if projects is None else ScopedStore(store, projects)


# Methods that touch no project's data: passed through as they are.
_NEUTRAL = frozenset({"ping", "dialect", "engine"})


class ScopedStore:
    """`Store`'s methods that surfaces acting for a token call, limited to `projects`."""

    def __init__(self, inner: Store, projects: Sequence[str]) -> None:
        self.inner = inner
        self.projects = tuple(projects)
        # Ids already found in the token's projects: one wrapper serves one request, and a
        # run, alert or rule never changes project, so each is looked up once per request
        # (the API's guard checks the path's ids, then the handler's reads skip them).
        self._seen: set[tuple[str, int]] = set()

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not defined below: closed unless known to be neutral.
        if name.startswith("__"):  # Python's own protocol lookups (copy, pickle, hasattr)
            raise AttributeError(name)
        if name in _NEUTRAL:
            return getattr(self.inner, name)
        raise ProjectDenied(f"a project-scoped token cannot do this ({name})")

    # ---- the checks ---------------------------------------------------------------------------
    def allows(self, project: str | None) -> bool:
        return project is not None and project in self.projects

    def check_project(self, project: str) -> None:
        if not self.allows(project):
            raise ProjectDenied(
                f"this token is limited to projects {list(self.projects)}; "
                f"project {project!r} is not one of them"
            )

    def check_runs(self, run_ids: Iterable[int]) -> None:
        """NotFound for a run of another project, worded as for a run that does not exist
        (a run that does not exist is left to the store, which says the same)."""
        ids = [i for i in dict.fromkeys(int(i) for i in run_ids) if ("run", i) not in self._seen]
        if not ids:
            return
        found = self.inner.run_projects(ids)
        for i in ids:
            if i in found and found[i] not in self.projects:
                raise NotFound(f"run {i} not found")
        self._seen.update(("run", i) for i in ids if i in found)

    def check_rule(self, rule_id: int) -> None:
        if ("rule", rule_id) not in self._seen:
            project = self.inner.rule_project(rule_id)
            if project is not None and project not in self.projects:
                raise NotFound(f"alert rule {rule_id} not found")
            if project is not None:
                self._seen.add(("rule", rule_id))

    def check_alert(self, alert_id: int) -> None:
        if ("alert", alert_id) not in self._seen:
            project = self.inner.alert_project(alert_id)
            if project is not None and project not in self.projects:
                raise NotFound(f"alert {alert_id} not found")
            if project is not None:
                self._seen.add(("alert", alert_id))

    def _within(self, asked: Sequence[str] | None) -> tuple[str, ...]:
        return self.projects if asked is None else tuple(p for p in asked if p in self.projects)

    # ---- projects -----------------------------------------------------------------------------
    def list_projects(self) -> list[str]:
        return [p for p in self.inner.list_projects() if p in self.projects]

    def get_project(
        self, name: str | None = None, project_id: int | None = None
    ) -> Project | None:
        found = self.inner.get_project(name=name, project_id=project_id)
        return found if found is not None and self.allows(found.name) else None

    def create_project(self, name: str) -> tuple[Project, bool]:
        self.check_project(name)
        return self.inner.create_project(name)

    def update_project(
        self, name: str, defaults: ProjectDefaults,
        refits: Callable[[RunSettings], bool] | None = None,
    ) -> Project:
        self.check_project(name)
        return self.inner.update_project(name, defaults, refits)

    # ---- runs and points ----------------------------------------------------------------------
    def get_or_create_run(self, project: str, name: str, **fields: Any) -> tuple[Run, bool]:
        self.check_project(project)
        return self.inner.get_or_create_run(project, name, **fields)

    def create_run_unique(self, project: str, name: str, **fields: Any) -> Run:
        self.check_project(project)
        return self.inner.create_run_unique(project, name, **fields)

    def list_runs(self, query: RunQuery) -> tuple[list[Run], int]:
        return self.inner.list_runs(replace(query, projects=self._within(query.projects)))

    def run_projects(self, run_ids: list[int]) -> dict[int, str]:
        found = self.inner.run_projects(run_ids)
        return {i: p for i, p in found.items() if p in self.projects}

    def get_run(self, run_id: int) -> Run:
        self.check_runs([run_id])
        return self.inner.get_run(run_id)

    def get_runs(self, run_ids: list[int]) -> list[Run]:
        self.check_runs(run_ids)
        return self.inner.get_runs(run_ids)

    def update_run(self, run_id: int, decide: Callable[[Run], RunChange]) -> Run:
        self.check_runs([run_id])
        return self.inner.update_run(run_id, decide)

    def delete_run(self, run_id: int) -> None:
        self.check_runs([run_id])
        self.inner.delete_run(run_id)

    def ingest_points(self, run_id: int, rows: Any) -> Any:
        self.check_runs([run_id])
        return self.inner.ingest_points(run_id, rows)

    def ingest_batch(self, run_id: int, by_metric: Any) -> Any:
        self.check_runs([run_id])
        return self.inner.ingest_batch(run_id, by_metric)

    def check_new_series(self, run_id: int, names: Sequence[str]) -> None:
        self.check_runs([run_id])
        self.inner.check_new_series(run_id, names)

    def get_points(self, run_id: int, metric: str, **kwargs: Any) -> Any:
        self.check_runs([run_id])
        return self.inner.get_points(run_id, metric, **kwargs)

    def get_points_many(self, run_ids: list[int], metric: str, **kwargs: Any) -> Any:
        self.check_runs(run_ids)
        return self.inner.get_points_many(run_ids, metric, **kwargs)

    # ---- fits ---------------------------------------------------------------------------------
    def request_fit(self, run_id: int, metric: str, force: bool = False) -> bool:
        self.check_runs([run_id])
        return self.inner.request_fit(run_id, metric, force)

    def latest_fit(self, run_id: int, metric: str | None = None) -> Any:
        self.check_runs([run_id])
        return self.inner.latest_fit(run_id, metric)

    def latest_fits(self, run_ids: list[int], metric: str) -> Any:
        self.check_runs(run_ids)
        return self.inner.latest_fits(run_ids, metric)

    def refit_wait(self, run_id: int, metric: str) -> float | None:
        self.check_runs([run_id])
        return self.inner.refit_wait(run_id, metric)

    def fit_history(self, run_id: int, metric: str | None = None, limit: int = 1000) -> Any:
        self.check_runs([run_id])
        return self.inner.fit_history(run_id, metric, limit)

    # ---- groups -------------------------------------------------------------------------------
    def list_groups(self, project: str) -> list[GroupSummary]:
        # A list, filtered like the others (the REST route refuses the name itself first).
        return self.inner.list_groups(project) if self.allows(project) else []

    def group_members(self, project: str, group: str) -> list[GroupMember]:
        self.check_project(project)
        return self.inner.group_members(project, group)

    def request_group_fit(self, project: str, group: str, metric: str) -> bool:
        self.check_project(project)
        return self.inner.request_group_fit(project, group, metric)

    def latest_group_fit(self, project: str, group: str, metric: str) -> Any:
        self.check_project(project)
        return self.inner.latest_group_fit(project, group, metric)

    def group_fit_history(self, project: str, group: str, metric: str, limit: int = 1000) -> Any:
        self.check_project(project)
        return self.inner.group_fit_history(project, group, metric, limit)

    # ---- alert rules and alerts ---------------------------------------------------------------
    def create_alert_rule(self, project: str, kind: str, params: dict[str, Any],
                          run_id: int | None = None, webhook_url: str | None = None,
                          webhook_secret: str | None = None, enabled: bool = True,
                          group: str | None = None) -> AlertRule:
        self.check_project(project)
        return self.inner.create_alert_rule(project, kind, params, run_id=run_id,
                                            webhook_url=webhook_url,
                                            webhook_secret=webhook_secret, enabled=enabled,
                                            group=group)

    def get_alert_rule(self, rule_id: int) -> AlertRule:
        self.check_rule(rule_id)
        return self.inner.get_alert_rule(rule_id)

    def list_alert_rules(self, project: str | None = None, run_id: int | None = None,
                         projects: Sequence[str] | None = None) -> list[AlertRule]:
        return self.inner.list_alert_rules(project, run_id, projects=self._within(projects))

    def update_alert_rule(self, rule_id: int, changes: RuleChanges,
                          webhook: EventBuilder | None = None) -> AlertRule:
        self.check_rule(rule_id)
        if changes.get("project") is not None:  # moving a rule into another project
            self.check_project(changes["project"])
        return self.inner.update_alert_rule(rule_id, changes, webhook)

    def delete_alert_rule(self, rule_id: int) -> None:
        self.check_rule(rule_id)
        self.inner.delete_alert_rule(rule_id)

    def list_alerts(self, project: str | None = None, run_id: int | None = None,
                    state: str | None = None, limit: int = 100, offset: int = 0,
                    group: str | None = None,
                    projects: Sequence[str] | None = None) -> tuple[list[Alert], int]:
        return self.inner.list_alerts(project, run_id, state, limit, offset, group,
                                      projects=self._within(projects))

    def get_alert(self, alert_id: int) -> Alert:
        self.check_alert(alert_id)
        return self.inner.get_alert(alert_id)

    def ack_alert(self, alert_id: int) -> Alert:
        self.check_alert(alert_id)
        return self.inner.ack_alert(alert_id)

    def alert_deliveries(self, alert_id: int) -> list[Delivery]:
        self.check_alert(alert_id)
        return self.inner.alert_deliveries(alert_id)

    def open_alert_counts(self, run_ids: list[int]) -> dict[int, int]:
        allowed = self.run_projects(run_ids)
        return self.inner.open_alert_counts([i for i in run_ids if i in allowed])
