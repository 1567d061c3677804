"""Alert rules and alerts (SqlStore mixin); their webhook outbox is `outbox_sql.py`.

Invariants kept by the database, not by the caller:
* one active (open or acknowledged) alert per (rule, run): the unique `alerts.open_key`;
* a webhook delivery exists iff the transaction that opened/resolved its alert committed
  (`enqueue_delivery` runs inside that transaction).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from scalewatch.server.db.alert_models import Alert, AlertDelivery, AlertRule, DeliveryAttempt
from scalewatch.server.db.models import Project, Run, utcnow
from scalewatch.server.domain import alerts as domain
from scalewatch.server.store.base import EventBuilder, NotFound
from scalewatch.server.store.common import SqlBase, dialect_insert, iso
from scalewatch.server.store.outbox_sql import enqueue_delivery

ACTIVE = ("open", "acknowledged")


def open_key(rule_id: int, run_id: int | None, group: str | None = None) -> str:
    """`rule:run`; a group rule's: `rule:g<hash>` on the pooled fit, `rule:g<hash>:run` for
    one seed (a hash: a group name may be longer than the column)."""
    if group is None:
        return f"{rule_id}:{run_id}"
    tag = hashlib.sha256(group.encode()).hexdigest()[:16]
    return f"{rule_id}:g{tag}" + ("" if run_id is None else f":{run_id}")


def _rule(r: AlertRule) -> domain.AlertRule:
    return domain.AlertRule(
        id=r.id,
        project=r.project,
        run_id=r.run_id,
        group=r.group_name,
        kind=domain.AlertKind(r.kind),
        params=dict(r.params or {}),
        webhook_url=r.webhook_url,
        has_secret=bool(r.webhook_secret),
        enabled=r.enabled,
        created_at=iso(r.created_at),
        updated_at=iso(r.updated_at),
    )


def _announce_resolved(s: Session, a: Alert, resolution: dict[str, Any] | None,
                       webhook: EventBuilder | None) -> domain.Alert:
    """An alert resolved in this transaction: why noted in its details, its `alert.resolved`
    event queued beside it."""
    if resolution:
        a.details = {**(a.details or {}), "resolution": resolution}
    s.flush()
    name = s.scalar(select(Run.name).where(Run.id == a.run_id)) if a.run_id else None
    alert = _alert(a, name)
    enqueue_delivery(s, alert, "alert.resolved", webhook)
    return alert


def _alert(a: Alert, run_name: str | None) -> domain.Alert:
    return domain.Alert(
        id=a.id,
        rule_id=a.rule_id,
        run_id=a.run_id,
        run_name=run_name,
        group=a.group_name,
        project=a.project,
        kind=domain.AlertKind(a.kind),
        state=a.state,
        message=a.message,
        created_at=iso(a.created_at),
        acknowledged_at=iso(a.acknowledged_at),
        resolved_at=iso(a.resolved_at),
        fit_id=a.fit_id,
        details=dict(a.details or {}),
    )


class AlertsMixin(SqlBase):
    # ---- rules -----------------------------------------------------------------------------
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
    ) -> domain.AlertRule:
        now = utcnow()
        with self.session() as s:
            rule = AlertRule(
                project=project,
                run_id=run_id,
                group_name=group,
                kind=kind,
                params=params,
                webhook_url=webhook_url,
                webhook_secret=webhook_secret,
                enabled=enabled,
                created_at=now,
                updated_at=now,
            )
            s.add(rule)
            s.flush()
            return _rule(rule)

    def get_alert_rule(self, rule_id: int) -> domain.AlertRule:
        with self.session() as s:
            rule = s.get(AlertRule, rule_id)
            if rule is None:
                raise NotFound(f"alert rule {rule_id} not found")
            return _rule(rule)

    def list_alert_rules(
        self,
        project: str | None = None,
        run_id: int | None = None,
        projects: Sequence[str] | None = None,
    ) -> list[domain.AlertRule]:
        with self.session() as s:
            q = select(AlertRule).order_by(AlertRule.id)
            if project is not None:
                q = q.where(AlertRule.project == project)
            if projects is not None:  # a project-scoped token's list
                q = q.where(AlertRule.project.in_(list(projects)))
            if run_id is not None:
                # Its own rules, the project-wide ones and its group's.
                group = select(Run.group_name).where(Run.id == run_id).scalar_subquery()
                q = q.where(or_(
                    AlertRule.run_id == run_id,
                    and_(AlertRule.run_id.is_(None), AlertRule.group_name.is_(None)),
                    AlertRule.group_name == group,
                ))
            return [_rule(r) for r in s.scalars(q).all()]

    def update_alert_rule(
        self, rule_id: int, changes: domain.RuleChanges, webhook: EventBuilder | None = None
    ) -> domain.AlertRule:
        """Apply `changes` (already validated). Changing what a rule means (kind, params, run)
        or switching it off resolves its active alerts: the next evaluation opens them again
        if still true. Each resolution is an `alert.resolved` event for `webhook` (the rule's
        receiver as it was: the one that was told the alert opened), in this transaction."""
        with self.session() as s:
            rule = s.get(AlertRule, rule_id, with_for_update=True)
            if rule is None:
                raise NotFound(f"alert rule {rule_id} not found")
            meaning = False
            values: dict[str, Any] = {
                ("group_name" if key == "group" else key): value
                for key, value in changes.items()
            }
            if "kind" in values:
                values["kind"] = domain.AlertKind(values["kind"]).value  # a plain string
            for key in ("project", "run_id", "group_name", "kind", "params"):
                if key in values and values[key] != getattr(rule, key):
                    setattr(rule, key, values[key])
                    meaning = True
            for key in ("webhook_url", "webhook_secret", "enabled"):
                if key in values:
                    setattr(rule, key, values[key])
            rule.updated_at = utcnow()
            if meaning or changes.get("enabled") is False:
                why = "the rule was changed" if meaning else "the rule was switched off"
                self._resolve_all(s, rule_id, why, webhook)
            s.flush()
            return _rule(rule)

    def _resolve_all(self, s: Session, rule_id: int, why: str,
                     webhook: EventBuilder | None) -> None:
        """Resolve every active alert of the rule, each with its `alert.resolved` event."""
        now = utcnow()
        for a in s.scalars(select(Alert).where(Alert.rule_id == rule_id,
                                               Alert.open_key.is_not(None))).all():
            a.state, a.resolved_at, a.open_key = "resolved", now, None
            _announce_resolved(s, a, {"reason": why}, webhook)

    def delete_alert_rule(self, rule_id: int) -> None:
        with self.session() as s:
            if s.get(AlertRule, rule_id) is None:
                raise NotFound(f"alert rule {rule_id} not found")
            alert_ids = select(Alert.id).where(Alert.rule_id == rule_id)
            self._delete_alerts(s, alert_ids)
            s.execute(delete(AlertRule).where(AlertRule.id == rule_id))

    def _delete_alerts(self, s: Session, alert_ids: Any) -> None:
        delivery_ids = select(AlertDelivery.id).where(AlertDelivery.alert_id.in_(alert_ids))
        s.execute(delete(DeliveryAttempt).where(DeliveryAttempt.delivery_id.in_(delivery_ids)))
        s.execute(delete(AlertDelivery).where(AlertDelivery.alert_id.in_(alert_ids)))
        s.execute(delete(Alert).where(Alert.id.in_(alert_ids)))

    def _delete_run_dependents(self, s: Session, run_id: int) -> None:
        """Alerts of a deleted run and the rules scoped to it (explicit: FK cascades may be off)."""
        rule_ids = select(AlertRule.id).where(AlertRule.run_id == run_id)
        self._delete_alerts(
            s, select(Alert.id).where(or_(Alert.run_id == run_id, Alert.rule_id.in_(rule_ids)))
        )
        s.execute(delete(AlertRule).where(AlertRule.run_id == run_id))
        super()._delete_run_dependents(s, run_id)

    def rules_for_run(
        self, project: str, run_id: int, kinds: tuple[str, ...]
    ) -> list[domain.AlertRule]:
        """Enabled rules of these kinds that apply to a run (its own, and project-wide)."""
        with self.session() as s:
            rules = s.scalars(
                select(AlertRule).where(
                    AlertRule.project == project,
                    AlertRule.enabled,
                    AlertRule.kind.in_(kinds),
                    AlertRule.group_name.is_(None),  # group rules watch group fits
                    or_(AlertRule.run_id == run_id, AlertRule.run_id.is_(None)),
                )
            ).all()
            return [_rule(r) for r in rules]

    def rules_for_group(
        self, project: str, group: str, kinds: tuple[str, ...]
    ) -> list[domain.AlertRule]:
        """Enabled rules of these kinds that name this group of this project."""
        with self.session() as s:
            rules = s.scalars(
                select(AlertRule).where(
                    AlertRule.project == project,
                    AlertRule.enabled,
                    AlertRule.kind.in_(kinds),
                    AlertRule.group_name == group,
                )
            ).all()
            return [_rule(r) for r in rules]

    def active_group_alerts(self, project: str, group: str) -> set[tuple[int, int | None]]:
        """(rule id, run id) of the active alerts on a group (run None) and on its seeds."""
        with self.session() as s:
            return {
                (int(rule), run) for rule, run in s.execute(
                    select(Alert.rule_id, Alert.run_id).where(Alert.project == project,
                                                              Alert.group_name == group,
                                                              Alert.open_key.is_not(None))
                ).all()
            }

    # ---- inputs of an evaluation -----------------------------------------------------------
    def active_alert_rules(self, run_id: int) -> set[int]:
        """Ids of the rules with an active (open or acknowledged) alert on this run."""
        with self.session() as s:
            return set(
                s.scalars(
                    select(Alert.rule_id).where(Alert.run_id == run_id, Alert.open_key.is_not(None))
                ).all()
            )

    def timer_candidates(
        self, kinds: tuple[str, ...]
    ) -> list[tuple[domain.AlertRule, domain.WatchedRun]]:
        """(rule, run) pairs the enabled rules of these timer kinds (`stalled`) cover: running
        runs, plus runs that still have an active alert of that rule (so it resolves when the
        run finishes)."""
        out = []
        with self.session() as s:
            rules = s.scalars(
                select(AlertRule).where(AlertRule.kind.in_(kinds), AlertRule.enabled)
            ).all()
            for rule in rules:
                q = (
                    select(Run.id, Run.name, Run.status, Run.last_seen_at, Project.name)
                    .join(Project, Project.id == Run.project_id)
                    .where(Project.name == rule.project)
                )
                if rule.run_id is not None:
                    q = q.where(Run.id == rule.run_id)
                active = select(Alert.run_id).where(
                    Alert.rule_id == rule.id, Alert.open_key.is_not(None)
                )
                q = q.where(or_(Run.status == "running", Run.id.in_(active)))
                for rid, name, status, seen, project in s.execute(q).all():
                    run = domain.WatchedRun(
                        id=rid, name=name, status=status, last_seen_at=seen, project=project
                    )
                    out.append((_rule(rule), run))
        return out

    # ---- opening and resolving -------------------------------------------------------------
    def open_alert(
        self,
        rule: domain.AlertRule,
        run_id: int | None,
        message: str,
        details: dict[str, Any],
        fit_id: int | None,
        webhook: EventBuilder | None = None,
        group: str | None = None,
    ) -> domain.Alert | None:
        """Open an alert unless one is active for (rule, run) - for a group rule (rule,
        group) or (rule, group, seed) - and return it only when opened; `run_id` is None for
        an alert on a group's pooled fit.

        The insert and its outbox row commit together; the unique `open_key` makes a second
        process's concurrent insert a no-op instead of a duplicate.
        """
        with self.session() as s:
            run = s.get(Run, run_id) if run_id is not None else None
            if run_id is not None and run is None:
                return None
            now = utcnow()
            new_id = s.scalar(
                dialect_insert(s)(Alert)
                .values(
                    rule_id=rule.id,
                    run_id=run_id,
                    group_name=group,
                    project=rule.project,
                    kind=rule.kind.value,
                    state="open",
                    open_key=open_key(rule.id, run_id, group),
                    message=message,
                    details=details,
                    fit_id=fit_id,
                    created_at=now,
                )
                .on_conflict_do_nothing()
                .returning(Alert.id)
            )
            if new_id is None:
                return None
            created = s.get(Alert, new_id)
            assert created is not None  # inserted by this transaction
            alert = _alert(created, run.name if run is not None else None)
            enqueue_delivery(s, alert, "alert.opened", webhook)
            return alert

    def resolve_alert(
        self,
        rule: domain.AlertRule,
        run_id: int | None,
        details: dict[str, Any] | None = None,
        webhook: EventBuilder | None = None,
        group: str | None = None,
    ) -> domain.Alert | None:
        """Resolve the active alert of (rule, run) - or of (rule, group[, seed]) - if any;
        returns it only when resolved."""
        with self.session() as s:
            now = utcnow()
            row = s.execute(
                update(Alert)
                .where(Alert.open_key == open_key(rule.id, run_id, group))
                .values(state="resolved", resolved_at=now, open_key=None)
                .returning(Alert.id)
            ).first()
            if row is None:
                return None
            a = s.get(Alert, row[0])
            if a is None:  # pragma: no cover - just updated in this transaction
                return None
            return _announce_resolved(s, a, details, webhook)

    # ---- reading alerts (API and dashboard) ------------------------------------------------
    def list_alerts(
        self,
        project: str | None = None,
        run_id: int | None = None,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        group: str | None = None,
        projects: Sequence[str] | None = None,
    ) -> tuple[list[domain.Alert], int]:
        """Alerts, newest first. `state`: open | acknowledged | resolved | active (open+ack).
        `projects`: only alerts of these projects (a project-scoped token's list)."""
        with self.session() as s:
            q = select(Alert.id)
            if project is not None:
                q = q.where(Alert.project == project)
            if projects is not None:
                q = q.where(Alert.project.in_(list(projects)))
            if group is not None:
                q = q.where(Alert.group_name == group)
            if run_id is not None:
                q = q.where(Alert.run_id == run_id)
            if state == "active":
                q = q.where(Alert.state.in_(ACTIVE))
            elif state is not None:
                q = q.where(Alert.state == state)
            total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
            rows = s.execute(
                select(Alert, Run.name)
                .join(Run, Run.id == Alert.run_id, isouter=True)
                .where(Alert.id.in_(q.order_by(Alert.id.desc()).limit(limit).offset(offset)))
                .order_by(Alert.id.desc())
            ).all()
            return [_alert(a, name) for a, name in rows], total

    def rule_project(self, rule_id: int) -> str | None:
        """The project of an alert rule (None: no such rule)."""
        with self.session() as s:
            return s.scalar(select(AlertRule.project).where(AlertRule.id == rule_id))

    def alert_project(self, alert_id: int) -> str | None:
        """The project of an alert (None: no such alert)."""
        with self.session() as s:
            return s.scalar(select(Alert.project).where(Alert.id == alert_id))

    def get_alert(self, alert_id: int) -> domain.Alert:
        with self.session() as s:
            a = s.get(Alert, alert_id)
            if a is None:
                raise NotFound(f"alert {alert_id} not found")
            return _alert(a, s.scalar(select(Run.name).where(Run.id == a.run_id)))

    def ack_alert(self, alert_id: int) -> domain.Alert:
        """Acknowledge an open alert (idempotent; a resolved alert stays resolved)."""
        with self.session() as s:
            s.execute(
                update(Alert)
                .where(Alert.id == alert_id, Alert.state == "open")
                .values(state="acknowledged", acknowledged_at=utcnow())
            )
            a = s.get(Alert, alert_id)
            if a is None:
                raise NotFound(f"alert {alert_id} not found")
            return _alert(a, s.scalar(select(Run.name).where(Run.id == a.run_id)))

    def open_alert_counts(self, run_ids: list[int]) -> dict[int, int]:
        """Unacknowledged open alerts per run (runs without any are left out)."""
        if not run_ids:
            return {}
        with self.session() as s:
            rows = s.execute(
                select(Alert.run_id, func.count())
                .where(Alert.run_id.in_(run_ids), Alert.state == "open")
                .group_by(Alert.run_id)
            ).all()
            return {int(r): int(n) for r, n in rows if r is not None}
