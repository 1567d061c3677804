"""Alert rules, alerts and the webhook outbox (SqlStore mixin).

Invariants kept by the database, not by the caller:
* one active (open or acknowledged) alert per (rule, run): the unique `alerts.open_key`;
* a webhook delivery exists iff the transaction that opened/resolved its alert committed;
* a delivery is sent by one worker at a time: compare-and-set lease like `claim_dirty_series`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from server.db.alert_models import Alert, AlertDelivery, AlertRule, DeliveryAttempt
from server.db.models import Fit, Point, Project, Run, utcnow
from server.store.base import NotFound
from server.store.common import dialect_insert, iso

# (alert dict, event) -> (url, body) or None: how the service turns an alert into a webhook.
EventBuilder = Callable[[dict[str, Any], str], "tuple[str, str] | None"]
ACTIVE = ("open", "acknowledged")


def open_key(rule_id: int, run_id: int) -> str:
    return f"{rule_id}:{run_id}"


def _rule_dict(r: AlertRule) -> dict[str, Any]:
    return {
        "id": r.id,
        "project": r.project,
        "run_id": r.run_id,
        "kind": r.kind,
        "params": dict(r.params or {}),
        "webhook_url": r.webhook_url,
        "has_secret": bool(r.webhook_secret),
        "enabled": r.enabled,
        "created_at": iso(r.created_at),
        "updated_at": iso(r.updated_at),
    }


def _alert_dict(a: Alert, run_name: str | None) -> dict[str, Any]:
    return {
        "id": a.id,
        "rule_id": a.rule_id,
        "run_id": a.run_id,
        "run_name": run_name,
        "project": a.project,
        "kind": a.kind,
        "state": a.state,
        "message": a.message,
        "created_at": iso(a.created_at),
        "acknowledged_at": iso(a.acknowledged_at),
        "resolved_at": iso(a.resolved_at),
        "fit_id": a.fit_id,
        "details": dict(a.details or {}),
    }


class AlertsMixin:
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
    ) -> dict:
        now = utcnow()
        with self.session() as s:  # type: ignore[attr-defined]
            rule = AlertRule(
                project=project,
                run_id=run_id,
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
            return _rule_dict(rule)

    def get_alert_rule(self, rule_id: int) -> dict:
        with self.session() as s:  # type: ignore[attr-defined]
            rule = s.get(AlertRule, rule_id)
            if rule is None:
                raise NotFound(f"alert rule {rule_id} not found")
            return _rule_dict(rule)

    def list_alert_rules(self, project: str | None = None, run_id: int | None = None) -> list[dict]:
        with self.session() as s:  # type: ignore[attr-defined]
            q = select(AlertRule).order_by(AlertRule.id)
            if project is not None:
                q = q.where(AlertRule.project == project)
            if run_id is not None:
                q = q.where(or_(AlertRule.run_id == run_id, AlertRule.run_id.is_(None)))
            return [_rule_dict(r) for r in s.scalars(q).all()]

    def update_alert_rule(self, rule_id: int, changes: dict[str, Any]) -> dict:
        """Apply `changes` (already validated). Changing what a rule means (kind, params, run)
        resolves its active alerts: the next evaluation opens them again if still true."""
        with self.session() as s:  # type: ignore[attr-defined]
            rule = s.get(AlertRule, rule_id, with_for_update=True)
            if rule is None:
                raise NotFound(f"alert rule {rule_id} not found")
            meaning = False
            for key in ("project", "run_id", "kind", "params"):
                if key in changes and changes[key] != getattr(rule, key):
                    setattr(rule, key, changes[key])
                    meaning = True
            for key in ("webhook_url", "webhook_secret", "enabled"):
                if key in changes:
                    setattr(rule, key, changes[key])
            rule.updated_at = utcnow()
            if meaning or changes.get("enabled") is False:
                s.execute(
                    update(Alert)
                    .where(Alert.rule_id == rule_id, Alert.open_key.is_not(None))
                    .values(state="resolved", resolved_at=utcnow(), open_key=None)
                )
            s.flush()
            return _rule_dict(rule)

    def delete_alert_rule(self, rule_id: int) -> None:
        with self.session() as s:  # type: ignore[attr-defined]
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
        super()._delete_run_dependents(s, run_id)  # type: ignore[misc]

    def rules_for_run(self, project: str, run_id: int, kinds: tuple[str, ...]) -> list[dict]:
        """Enabled rules of these kinds that apply to a run (its own, and project-wide)."""
        with self.session() as s:  # type: ignore[attr-defined]
            rules = s.scalars(
                select(AlertRule).where(
                    AlertRule.project == project,
                    AlertRule.enabled,
                    AlertRule.kind.in_(kinds),
                    or_(AlertRule.run_id == run_id, AlertRule.run_id.is_(None)),
                )
            ).all()
            return [_rule_dict(r) for r in rules]

    # ---- inputs of an evaluation -----------------------------------------------------------
    def active_alert_rules(self, run_id: int) -> set[int]:
        """Ids of the rules with an active (open or acknowledged) alert on this run."""
        with self.session() as s:  # type: ignore[attr-defined]
            return set(
                s.scalars(
                    select(Alert.rule_id).where(Alert.run_id == run_id, Alert.open_key.is_not(None))
                ).all()
            )

    def best_ok_fit(self, series_id: int) -> dict | None:
        """The `ok` fit with the highest A interval lower end: the run's best claim on A."""
        with self.session() as s:  # type: ignore[attr-defined]
            return s.scalar(
                select(Fit.result)
                .where(Fit.series_id == series_id, Fit.status == "ok", Fit.A_lo.is_not(None))
                .order_by(Fit.A_lo.desc(), Fit.id.desc())
                .limit(1)
            )

    def last_ok_fit_before(self, series_id: int, before_compute: float) -> dict | None:
        """The latest `ok` fit that had only seen compute below `before_compute`."""
        with self.session() as s:  # type: ignore[attr-defined]
            return s.scalar(
                select(Fit.result)
                .where(
                    Fit.series_id == series_id,
                    Fit.status == "ok",
                    Fit.max_compute < before_compute,
                )
                .order_by(Fit.id.desc())
                .limit(1)
            )

    def previous_ok_fit(self, series_id: int, before_fit_id: int) -> dict | None:
        with self.session() as s:  # type: ignore[attr-defined]
            return s.scalar(
                select(Fit.result)
                .where(Fit.series_id == series_id, Fit.status == "ok", Fit.id < before_fit_id)
                .order_by(Fit.id.desc())
                .limit(1)
            )

    def last_points(self, series_id: int, n: int) -> tuple[list[float], list[float]]:
        """The newest `n` points of a series by step, oldest first."""
        with self.session() as s:  # type: ignore[attr-defined]
            rows = s.execute(
                select(Point.compute, Point.value)
                .where(Point.series_id == series_id)
                .order_by(Point.step.desc())
                .limit(n)
            ).all()
        rows = rows[::-1]
        return [r[0] for r in rows], [r[1] for r in rows]

    def latest_ok_fit_of_run(self, run_id: int) -> tuple[str | None, dict | None]:
        """(run name, latest fit of its fit metric) for baselines; (None, None) if no run."""
        try:
            run = self.get_run(run_id)  # type: ignore[attr-defined]
            _, fit = self.latest_fit(run_id)  # type: ignore[attr-defined]
        except NotFound:
            return None, None
        return run["name"], fit

    def stalled_candidates(self) -> list[tuple[dict, dict]]:
        """(rule, run) pairs a `stalled` rule covers: running runs, plus runs that still have
        an active stalled alert of that rule (so it resolves when the run finishes)."""
        out = []
        with self.session() as s:  # type: ignore[attr-defined]
            rules = s.scalars(
                select(AlertRule).where(AlertRule.kind == "stalled", AlertRule.enabled)
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
                    out.append(
                        (
                            _rule_dict(rule),
                            {
                                "id": rid,
                                "name": name,
                                "status": status,
                                "last_seen_at": seen,
                                "project": project,
                            },
                        )
                    )
        return out

    # ---- opening and resolving -------------------------------------------------------------
    def open_alert(
        self,
        rule: dict,
        run_id: int,
        message: str,
        details: dict[str, Any],
        fit_id: int | None,
        webhook: EventBuilder | None = None,
    ) -> dict | None:
        """Open an alert unless one is active for (rule, run); returns it only when opened.

        The insert and its outbox row commit together; the unique `open_key` makes a second
        process's concurrent insert a no-op instead of a duplicate.
        """
        with self.session() as s:  # type: ignore[attr-defined]
            run = s.get(Run, run_id)
            if run is None:
                return None
            now = utcnow()
            new_id = s.scalar(
                dialect_insert(s)(Alert)
                .values(
                    rule_id=rule["id"],
                    run_id=run_id,
                    project=rule["project"],
                    kind=rule["kind"],
                    state="open",
                    open_key=open_key(rule["id"], run_id),
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
            alert = _alert_dict(s.get(Alert, new_id), run.name)  # type: ignore[arg-type]
            self._enqueue(s, alert, "alert.opened", webhook)
            return alert

    def resolve_alert(
        self,
        rule: dict,
        run_id: int,
        details: dict[str, Any] | None = None,
        webhook: EventBuilder | None = None,
    ) -> dict | None:
        """Resolve the active alert of (rule, run), if any; returns it only when resolved."""
        with self.session() as s:  # type: ignore[attr-defined]
            now = utcnow()
            row = s.execute(
                update(Alert)
                .where(Alert.open_key == open_key(rule["id"], run_id))
                .values(state="resolved", resolved_at=now, open_key=None)
                .returning(Alert.id)
            ).first()
            if row is None:
                return None
            a = s.get(Alert, row[0])
            if a is None:  # pragma: no cover - just updated in this transaction
                return None
            if details:
                a.details = {**(a.details or {}), "resolution": details}
            s.flush()
            alert = _alert_dict(a, s.scalar(select(Run.name).where(Run.id == run_id)))
            self._enqueue(s, alert, "alert.resolved", webhook)
            return alert

    def _enqueue(self, s: Session, alert: dict, event: str, webhook: EventBuilder | None) -> None:
        if webhook is None:
            return
        key = uuid.uuid4().hex
        built = webhook({**alert, "delivery_id": key}, event)
        if built is None:
            return
        url, body = built
        now = utcnow()
        s.add(
            AlertDelivery(
                alert_id=alert["id"],
                event=event,
                delivery_key=key,
                url=url,
                body=body,
                state="pending",
                attempts=0,
                next_attempt_at=now,
                created_at=now,
            )
        )

    # ---- reading alerts (API and dashboard) ------------------------------------------------
    def list_alerts(
        self,
        project: str | None = None,
        run_id: int | None = None,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[dict], int]:
        """Alerts, newest first. `state`: open | acknowledged | resolved | active (open+ack)."""
        with self.session() as s:  # type: ignore[attr-defined]
            q = select(Alert.id)
            if project is not None:
                q = q.where(Alert.project == project)
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
            return [_alert_dict(a, name) for a, name in rows], total

    def get_alert(self, alert_id: int) -> dict:
        with self.session() as s:  # type: ignore[attr-defined]
            a = s.get(Alert, alert_id)
            if a is None:
                raise NotFound(f"alert {alert_id} not found")
            return _alert_dict(a, s.scalar(select(Run.name).where(Run.id == a.run_id)))

    def ack_alert(self, alert_id: int) -> dict:
        """Acknowledge an open alert (idempotent; a resolved alert stays resolved)."""
        with self.session() as s:  # type: ignore[attr-defined]
            s.execute(
                update(Alert)
                .where(Alert.id == alert_id, Alert.state == "open")
                .values(state="acknowledged", acknowledged_at=utcnow())
            )
            a = s.get(Alert, alert_id)
            if a is None:
                raise NotFound(f"alert {alert_id} not found")
            return _alert_dict(a, s.scalar(select(Run.name).where(Run.id == a.run_id)))

    def open_alert_counts(self, run_ids: list[int]) -> dict[int, int]:
        """Unacknowledged open alerts per run (runs without any are left out)."""
        if not run_ids:
            return {}
        with self.session() as s:  # type: ignore[attr-defined]
            rows = s.execute(
                select(Alert.run_id, func.count())
                .where(Alert.run_id.in_(run_ids), Alert.state == "open")
                .group_by(Alert.run_id)
            ).all()
            return {int(r): int(n) for r, n in rows}

    def alert_deliveries(self, alert_id: int) -> list[dict]:
        """Webhook deliveries of an alert with every attempt, oldest first."""
        with self.session() as s:  # type: ignore[attr-defined]
            if s.get(Alert, alert_id) is None:
                raise NotFound(f"alert {alert_id} not found")
            deliveries = s.scalars(
                select(AlertDelivery)
                .where(AlertDelivery.alert_id == alert_id)
                .order_by(AlertDelivery.id)
            ).all()
            attempts: dict[int, list[dict]] = {d.id: [] for d in deliveries}
            if deliveries:
                for a in s.scalars(
                    select(DeliveryAttempt)
                    .where(DeliveryAttempt.delivery_id.in_(list(attempts)))
                    .order_by(DeliveryAttempt.id)
                ).all():
                    attempts[a.delivery_id].append(
                        {
                            "attempt": a.attempt,
                            "at": iso(a.started_at),
                            "duration_ms": round(a.duration_ms, 2),
                            "status_code": a.status_code,
                            "error": a.error,
                            "ok": a.ok,
                        }
                    )
            return [
                {
                    "id": d.id,
                    "alert_id": d.alert_id,
                    "event": d.event,
                    "delivery_id": d.delivery_key,
                    "url": d.url,
                    "state": d.state,
                    "attempts": d.attempts,
                    "created_at": iso(d.created_at),
                    "next_attempt_at": iso(d.next_attempt_at) if d.state == "pending" else None,
                    "delivered_at": iso(d.delivered_at),
                    "last_error": d.last_error,
                    "attempt_log": attempts[d.id],
                }
                for d in deliveries
            ]

    # ---- the outbox sender -----------------------------------------------------------------
    def claim_deliveries(
        self, owner: str, lease_seconds: float = 60.0, limit: int = 8
    ) -> list[dict]:
        """Lease due pending deliveries (compare-and-set, safe across processes)."""
        now = utcnow()
        with self.session() as s:  # type: ignore[attr-defined]
            candidates = s.scalars(
                select(AlertDelivery.id)
                .where(
                    AlertDelivery.state == "pending",
                    AlertDelivery.next_attempt_at <= now,
                    or_(AlertDelivery.lease_until.is_(None), AlertDelivery.lease_until < now),
                )
                .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
                .limit(limit)
            ).all()
        claimed = []
        for did in candidates:
            with self.session() as s:  # type: ignore[attr-defined]
                res = s.execute(
                    update(AlertDelivery)
                    .where(
                        AlertDelivery.id == did,
                        AlertDelivery.state == "pending",
                        or_(AlertDelivery.lease_until.is_(None), AlertDelivery.lease_until < now),
                    )
                    .values(lease_owner=owner, lease_until=now + timedelta(seconds=lease_seconds))
                    .returning(
                        AlertDelivery.alert_id,
                        AlertDelivery.delivery_key,
                        AlertDelivery.url,
                        AlertDelivery.body,
                        AlertDelivery.attempts,
                        AlertDelivery.created_at,
                        AlertDelivery.event,
                    )
                ).first()
                if res is None:
                    continue
                secret = s.scalar(
                    select(AlertRule.webhook_secret)
                    .join(Alert, Alert.rule_id == AlertRule.id)
                    .where(Alert.id == res[0])
                )
                created = res[5]
                claimed.append(
                    {
                        "id": did,
                        "alert_id": res[0],
                        "delivery_key": res[1],
                        "url": res[2],
                        "body": res[3],
                        "attempts": res[4],
                        "created_at": created,
                        "event": res[6],
                        "secret": secret,
                    }
                )
        return claimed

    def record_delivery_attempt(
        self,
        delivery_id: int,
        owner: str,
        attempt: dict[str, Any],
        outcome: str,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        """Log an attempt and move the delivery on (delivered / pending again / failed).

        Only the lease holder may do so; returns False when the lease was lost (another worker
        took over an expired lease), in which case nothing is changed.
        """
        with self.session() as s:  # type: ignore[attr-defined]
            values: dict[str, Any] = {
                "attempts": AlertDelivery.attempts + 1,
                "lease_owner": None,
                "lease_until": None,
                "last_error": attempt.get("error")
                or (None if attempt.get("ok") else f"HTTP {attempt.get('status_code')}"),
            }
            if outcome == "delivered":
                values.update(state="delivered", delivered_at=utcnow())
            elif outcome == "failed":
                values.update(state="failed")
            else:
                values.update(next_attempt_at=next_attempt_at or utcnow())
            res = s.execute(
                update(AlertDelivery)
                .where(AlertDelivery.id == delivery_id, AlertDelivery.lease_owner == owner)
                .values(**values)
                .returning(AlertDelivery.attempts)
            ).first()
            if res is None:
                return False
            s.add(
                DeliveryAttempt(
                    delivery_id=delivery_id,
                    attempt=int(res[0]),
                    started_at=attempt["started_at"],
                    duration_ms=float(attempt["duration_ms"]),
                    status_code=attempt.get("status_code"),
                    error=attempt.get("error"),
                    ok=bool(attempt.get("ok")),
                )
            )
            return True
