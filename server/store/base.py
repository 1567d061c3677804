"""The storage interface: what the API, refitter, alerts and dashboard may ask of the database.

One `Store` made of one Protocol per concern, so a caller that needs one concern can say so:
`RunStore` (runs, projects, points), `FitStore` (the refit queue, fit history, the fit reads of
alert evaluation), `GroupStore` (groups of runs: their refit queue and fit history),
`AlertStore` (rules, alerts), `OutboxStore` (webhook deliveries) and
`TokenStore` (API tokens). `SqlStore` implements all of them.

Everything returns the shared shapes of `scalewatch.server.domain` (frozen models) or plain
dataclasses, never ORM objects, so callers cannot lazily load rows outside a transaction and
the web layer stays independent of SQLAlchemy. The store only stores: what a change means
(which fields a PATCH merges, what triggers a refit, a project's defaults) is decided by
`scalewatch.server.services` and handed over as a decided change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from scalewatch.server import limits
from scalewatch.server.domain.alerts import (
    Alert,
    AlertRule,
    AttemptRecord,
    ClaimedDelivery,
    Delivery,
    DeliveryOutcome,
    RuleChanges,
    WatchedRun,
)
from scalewatch.server.domain.runs import (
    FitContext,
    GroupMember,
    GroupSummary,
    Project,
    ProjectDefaults,
    Run,
    RunChange,
    RunSettings,
)
from scalewatch.server.domain.tokens import Token
from scalewatch.server.ingest import Batch, IngestError, PointRow
from scalewatch.server.store.fit_records import FitHistoryEntry, FitRecord

if TYPE_CHECKING:
    from sqlalchemy import Engine

# (alert, event, delivery id) -> (url, body) or None: how the alert service turns an alert into
# a webhook; the store calls it inside the transaction that opens/resolves the alert.
EventBuilder = Callable[[Alert, str, str], "tuple[str, str] | None"]


class NotFound(LookupError):
    pass


class InvalidName(ValueError):
    """A name a run cannot have (`run_names.check_run_name`); the message says why."""


class NameTaken(ValueError):
    """Another run of the project already has the name (runs are named within a project)."""


class UnitConflict(ValueError):
    """A resume names another compute unit than the run's, which has points in its own: one
    run's compute is in one unit (its fit's x axis); the message says both."""


class TooManySeries(IngestError):
    """A batch would bring its run past `limits.MAX_SERIES_PER_RUN` distinct metric names:
    refused whole, before anything of it is written. An `IngestError` (422), so every ingest
    surface answers it as it answers a batch it refuses: the points API a 422 in the API's error
    shape, the MLflow-compatible API a 400 INVALID_PARAMETER_VALUE."""

    def __init__(self, run_id: int, stored: int, new: Sequence[str], limit: int) -> None:
        names = ", ".join(repr(n if len(n) <= 40 else n[:40] + "...") for n in sorted(new)[:3])
        more = f" and {len(new) - 3:,} more" if len(new) > 3 else ""
        super().__init__(
            422,
            f"run {run_id} has {stored:,} metric series and this batch brings {len(new):,} new "
            f"metric name(s) ({names}{more}): a run may have at most {limit:,} distinct metric "
            "names, so nothing of the batch was stored (points of the run's existing metrics "
            "are still accepted)",
        )
        self.run_id, self.stored, self.new, self.limit = run_id, stored, len(new), limit


def check_series_room(run_id: int, stored: int, new: Sequence[str]) -> None:
    """`TooManySeries` unless a run holding `stored` series may add the names `new` (those it
    does not have yet). The one check of the series bound, wherever series are created; the
    limit is read at each call, so tests can lower it."""
    if new and stored + len(new) > limits.MAX_SERIES_PER_RUN:
        raise TooManySeries(run_id, stored, new, limits.MAX_SERIES_PER_RUN)


@dataclass(frozen=True)
class RunQuery:
    project: str | None = None
    tag: str | None = None
    status: str | None = None
    group: str | None = None
    name: str | None = None
    limit: int = 100
    offset: int = 0
    # Only runs of these projects (a project-scoped token's list); None: every project.
    projects: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PointsPage:
    metric: str
    steps: list[int]
    compute: list[float]
    values: list[float]
    downsampled: bool
    total: int
    # Each point's wall-clock time (seconds since the epoch; None where the sender gave none),
    # read only when asked (`get_points(wall_times=True)`, raw pages): MLflow's metric history.
    wall_times: list[float | None] | None = None


class Ingested(tuple[int, int]):
    """What `ingest_points` returns: (accepted, updated), unpacked as a pair, and whether the
    batch queued a refit (`refit`: it had the run's fit metric), so the caller wakes the
    refitter only then (a pass finding nothing to do, per request, cost ~10% of an ingest)."""

    refit: bool

    def __new__(cls, accepted: int, updated: int, refit: bool) -> Ingested:
        self = super().__new__(cls, (accepted, updated))
        self.refit = refit
        return self


@dataclass(frozen=True)
class DirtySeries:
    series_id: int
    run_id: int
    metric: str
    requested: int
    # Arrival of the oldest point no fit has seen (None: unknown, e.g. a series already dirty
    # when migration 0014 ran, or a read that queued a fit): where the refit lag starts.
    dirty_since: datetime | None = None


@dataclass(frozen=True)
class DirtyGroup:
    """A leased (group, metric) whose members' points, membership or settings changed."""

    group_series_id: int
    project_id: int
    project: str
    group: str
    metric: str
    requested: int


class RunStore(Protocol):
    """Runs, projects and their points."""

    def get_or_create_run(self, project: str, name: str, **fields: Any) -> tuple[Run, bool]: ...
    def list_projects(self) -> list[str]: ...
    def list_runs(self, query: RunQuery) -> tuple[list[Run], int]: ...
    def create_run_unique(self, project: str, name: str, **fields: Any) -> Run: ...
    def get_project(
        self, name: str | None = None, project_id: int | None = None
    ) -> Project | None: ...
    def create_project(self, name: str) -> tuple[Project, bool]: ...
    def update_project(
        self, name: str, defaults: ProjectDefaults,
        refits: Callable[[RunSettings], bool] | None = None,
    ) -> Project: ...
    def get_run(self, run_id: int) -> Run: ...
    def get_runs(self, run_ids: list[int]) -> list[Run]: ...
    def run_projects(self, run_ids: list[int]) -> dict[int, str]: ...
    def update_run(self, run_id: int, decide: Callable[[Run], RunChange]) -> Run: ...
    def delete_run(self, run_id: int) -> None: ...
    def ingest_points(self, run_id: int, rows: list[PointRow]) -> Ingested: ...
    def ingest_batch(self, run_id: int, by_metric: Batch) -> Ingested: ...
    def check_new_series(self, run_id: int, names: Sequence[str]) -> None: ...
    def get_points(
        self,
        run_id: int,
        metric: str,
        *,
        since_step: int | None = None,
        max_points: int | None = None,
        x_range: tuple[float, float] | None = None,
        x: str = "compute",
        limit: int | None = None,
        rollup: bool = False,
        wall_times: bool = False,
    ) -> PointsPage: ...
    def get_points_many(
        self,
        run_ids: list[int],
        metric: str,
        *,
        max_points: int,
        x_range: tuple[float, float] | None = None,
    ) -> dict[int, PointsPage]: ...
    def last_points(self, series_id: int, n: int) -> tuple[list[float], list[float]]: ...


class FitStore(Protocol):
    """The refit queue (leased dirty series), stored fits, and the fit reads of evaluation."""

    def claim_dirty_series(
        self, owner: str, lease_seconds: float = 120, limit: int = 8
    ) -> list[DirtySeries]: ...
    def series_snapshot(
        self, series_id: int
    ) -> tuple[int, list[float], list[float], list[int]]: ...
    def fit_context(self, run_id: int) -> FitContext: ...
    def finish_refit(
        self,
        series_id: int,
        owner: str,
        requested: int,
        result: FitRecord | None,
        has_intervals: bool,
        earlier: Sequence[FitRecord] = (),
        snapshot_at: datetime | None = None,
    ) -> int | None: ...
    def request_fit(self, run_id: int, metric: str, force: bool = False) -> bool: ...
    def refit_backlog(self) -> tuple[int, datetime | None]: ...
    def refit_wait(self, run_id: int, metric: str) -> float | None: ...
    def latest_fits(
        self, run_ids: list[int], metric: str
    ) -> dict[int, tuple[FitRecord | None, bool]]: ...
    def latest_fit(
        self, run_id: int, metric: str | None = None
    ) -> tuple[str, FitRecord | None]: ...
    def fit_history(
        self, run_id: int, metric: str | None = None, limit: int = 1000
    ) -> tuple[str, list[FitHistoryEntry]]: ...
    def best_ok_fit(self, series_id: int) -> FitRecord | None: ...
    def last_ok_fit_before(self, series_id: int, before_compute: float) -> FitRecord | None: ...
    def latest_ok_fit_of_run(self, run_id: int) -> tuple[str | None, FitRecord | None]: ...


class GroupStore(Protocol):
    """Groups (the runs of a project sharing `group`): listing, the group refit queue (leased
    like series), group fit history and the fit reads of group alerts."""

    def list_groups(self, project: str) -> list[GroupSummary]: ...
    def group_members(self, project: str, group: str) -> list[GroupMember]: ...
    def claim_dirty_groups(
        self, owner: str, lease_seconds: float = 120, limit: int = 4
    ) -> list[DirtyGroup]: ...
    def group_snapshot(self, group_series_id: int) -> tuple[int, list[dict[str, Any]]]: ...
    def finish_group_refit(
        self,
        group_series_id: int,
        owner: str,
        requested: int,
        result: FitRecord | None,
        has_intervals: bool,
        n_members: int = 0,
    ) -> int | None: ...
    def request_group_fit(self, project: str, group: str, metric: str) -> bool: ...
    def latest_group_fit(self, project: str, group: str, metric: str) -> FitRecord | None: ...
    def group_fit_history(
        self, project: str, group: str, metric: str, limit: int = 1000
    ) -> list[FitHistoryEntry]: ...
    def best_ok_group_fit(self, group_series_id: int) -> FitRecord | None: ...


class AlertStore(Protocol):
    """Alert rules and alerts (one active alert per rule and run)."""

    def create_alert_rule(
        self,
        project: str,
        kind: str,
        params: dict[str, Any],
        run_id: int | None = None,
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        enabled: bool = True,
        group: str | None = None,
    ) -> AlertRule: ...
    def get_alert_rule(self, rule_id: int) -> AlertRule: ...
    def list_alert_rules(
        self,
        project: str | None = None,
        run_id: int | None = None,
        projects: Sequence[str] | None = None,
    ) -> list[AlertRule]: ...
    def rule_project(self, rule_id: int) -> str | None: ...
    def alert_project(self, alert_id: int) -> str | None: ...
    def update_alert_rule(self, rule_id: int, changes: RuleChanges,
                          webhook: EventBuilder | None = None) -> AlertRule: ...
    def delete_alert_rule(self, rule_id: int) -> None: ...
    def rules_for_run(
        self, project: str, run_id: int, kinds: tuple[str, ...]
    ) -> list[AlertRule]: ...
    def rules_for_group(
        self, project: str, group: str, kinds: tuple[str, ...]
    ) -> list[AlertRule]: ...
    def active_alert_rules(self, run_id: int) -> set[int]: ...
    def active_group_alerts(
        self, project: str, group: str
    ) -> set[tuple[int, int | None]]: ...
    def timer_candidates(
        self, kinds: tuple[str, ...]
    ) -> list[tuple[AlertRule, WatchedRun]]: ...
    def open_alert(
        self,
        rule: AlertRule,
        run_id: int | None,
        message: str,
        details: dict[str, Any],
        fit_id: int | None,
        webhook: EventBuilder | None = None,
        group: str | None = None,
    ) -> Alert | None: ...
    def resolve_alert(
        self,
        rule: AlertRule,
        run_id: int | None,
        details: dict[str, Any] | None = None,
        webhook: EventBuilder | None = None,
        group: str | None = None,
    ) -> Alert | None: ...
    def list_alerts(
        self,
        project: str | None = None,
        run_id: int | None = None,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        group: str | None = None,
        projects: Sequence[str] | None = None,
    ) -> tuple[list[Alert], int]: ...
    def get_alert(self, alert_id: int) -> Alert: ...
    def ack_alert(self, alert_id: int) -> Alert: ...
    def open_alert_counts(self, run_ids: list[int]) -> dict[int, int]: ...


class OutboxStore(Protocol):
    """Webhook deliveries: claimed with a lease by senders, every attempt recorded."""

    def alert_deliveries(self, alert_id: int) -> list[Delivery]: ...
    def claim_deliveries(
        self, owner: str, lease_seconds: float = 60.0, limit: int = 8
    ) -> list[ClaimedDelivery]: ...
    def renew_delivery_leases(
        self, delivery_ids: list[int], owner: str, seconds: float
    ) -> int: ...
    def record_delivery_attempt(
        self,
        delivery_id: int,
        owner: str,
        attempt: AttemptRecord,
        outcome: DeliveryOutcome,
        next_attempt_at: datetime | None = None,
    ) -> bool: ...


class TokenStore(Protocol):
    """API tokens, stored hashed, and the dashboard sessions opened with them."""

    def create_token(
        self, name: str, scope: str, projects: list[str] | None = None
    ) -> tuple[Token, str]: ...
    def lookup_token(self, token: str) -> Token | None: ...
    def list_tokens(self) -> list[Token]: ...
    def revoke_token(self, token_id: int) -> bool: ...
    def count_tokens(self) -> int: ...
    def create_session(self, token: str, seconds: float) -> tuple[str, Token] | None: ...
    def lookup_session(self, session_id: str) -> Token | None: ...
    def end_session(self, session_id: str) -> bool: ...


class Store(RunStore, FitStore, GroupStore, AlertStore, OutboxStore, TokenStore, Protocol):
    """Everything, plus the database handle readiness checks and shutdown need."""

    @property
    def engine(self) -> Engine: ...
    @property
    def dialect(self) -> str: ...
    def ping(self) -> None: ...
    def check_writable(self) -> None: ...
