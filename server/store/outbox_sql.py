"""The webhook outbox (SqlStore mixin): deliveries written with their alert, claimed by senders.

* a delivery is written in the transaction that opened/resolved its alert (`enqueue_delivery`);
* a delivery is sent by one worker at a time: compare-and-set lease like `claim_dirty_series`;
* every attempt is recorded, and only the lease holder may record one.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session, aliased

from scalewatch.server.db.alert_models import Alert, AlertDelivery, AlertRule, DeliveryAttempt
from scalewatch.server.db.models import utcnow
from scalewatch.server.domain import alerts as domain
from scalewatch.server.store.base import EventBuilder, NotFound
from scalewatch.server.store.common import SqlBase, iso


def enqueue_delivery(
    s: Session, alert: domain.Alert, event: str, webhook: EventBuilder | None
) -> None:
    """Add the outbox row of an alert event inside the caller's transaction (so the delivery
    exists iff the alert change commits); nothing when the rule has no webhook."""
    if webhook is None:
        return
    key = uuid.uuid4().hex
    built = webhook(alert, event, key)
    if built is None:
        return
    url, body = built
    now = utcnow()
    s.add(
        AlertDelivery(
            alert_id=alert.id,
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


class OutboxMixin(SqlBase):
    def alert_deliveries(self, alert_id: int) -> list[domain.Delivery]:
        """Webhook deliveries of an alert with every attempt, oldest first."""
        with self.session() as s:
            if s.get(Alert, alert_id) is None:
                raise NotFound(f"alert {alert_id} not found")
            deliveries = s.scalars(
                select(AlertDelivery)
                .where(AlertDelivery.alert_id == alert_id)
                .order_by(AlertDelivery.id)
            ).all()
            attempts: dict[int, list[domain.DeliveryAttempt]] = {d.id: [] for d in deliveries}
            if deliveries:
                for a in s.scalars(
                    select(DeliveryAttempt)
                    .where(DeliveryAttempt.delivery_id.in_(list(attempts)))
                    .order_by(DeliveryAttempt.id)
                ).all():
                    attempts[a.delivery_id].append(
                        domain.DeliveryAttempt(
                            attempt=a.attempt,
                            at=iso(a.started_at),
                            duration_ms=round(a.duration_ms, 2),
                            status_code=a.status_code,
                            error=a.error,
                            ok=a.ok,
                        )
                    )
            return [
                domain.Delivery(
                    id=d.id,
                    alert_id=d.alert_id,
                    event=d.event,
                    delivery_id=d.delivery_key,
                    url=d.url,
                    state=d.state,
                    attempts=d.attempts,
                    created_at=iso(d.created_at),
                    next_attempt_at=iso(d.next_attempt_at) if d.state == "pending" else None,
                    delivered_at=iso(d.delivered_at),
                    last_error=d.last_error,
                    attempt_log=attempts[d.id],
                )
                for d in deliveries
            ]

    # ---- the outbox sender -----------------------------------------------------------------
    def claim_deliveries(
        self, owner: str, lease_seconds: float = 60.0, limit: int = 8
    ) -> list[domain.ClaimedDelivery]:
        """Lease due pending deliveries (compare-and-set, safe across processes)."""
        now = utcnow()
        # An alert's events go out in the order they happened: a delivery waits while an
        # older one of its alert is pending (backing off, or in flight). By next_attempt_at
        # alone a "resolved" went out before the "opened" that was still being retried.
        older = aliased(AlertDelivery)
        waits_for_older = exists().where(
            older.alert_id == AlertDelivery.alert_id,
            older.id < AlertDelivery.id,
            older.state == "pending",
        )
        with self.session() as s:
            candidates = s.scalars(
                select(AlertDelivery.id)
                .where(
                    AlertDelivery.state == "pending",
                    AlertDelivery.next_attempt_at <= now,
                    or_(AlertDelivery.lease_until.is_(None), AlertDelivery.lease_until < now),
                    ~waits_for_older,
                )
                .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
                .limit(limit)
            ).all()
        claimed = []
        for did in candidates:
            with self.session() as s:
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
                # The rule's webhook as it is now: a URL fixed after a delivery was written
                # (a typo, a moved receiver) takes the deliveries still waiting, as its secret
                # does; a rule whose webhook was removed keeps the URL each was written for.
                current = s.execute(
                    select(AlertRule.webhook_url, AlertRule.webhook_secret)
                    .join(Alert, Alert.rule_id == AlertRule.id)
                    .where(Alert.id == res[0])
                ).first()
                url, secret = (current[0] or res[2], current[1]) if current else (res[2], None)
                claimed.append(
                    domain.ClaimedDelivery(
                        id=did,
                        alert_id=res[0],
                        delivery_key=res[1],
                        url=url,
                        body=res[3],
                        attempts=res[4],
                        created_at=res[5],
                        event=res[6],
                        secret=secret,
                    )
                )
        return claimed

    def renew_delivery_leases(self, delivery_ids: list[int], owner: str, seconds: float) -> int:
        """Extend this owner's leases (a sender still busy with them); returns how many."""
        if not delivery_ids:
            return 0
        with self.session() as s:
            res = s.execute(
                update(AlertDelivery)
                .where(
                    AlertDelivery.id.in_(delivery_ids),
                    AlertDelivery.lease_owner == owner,
                    AlertDelivery.state == "pending",
                )
                .values(lease_until=utcnow() + timedelta(seconds=seconds))
            )
            return int(getattr(res, "rowcount", 0) or 0)

    def record_delivery_attempt(
        self,
        delivery_id: int,
        owner: str,
        attempt: domain.AttemptRecord,
        outcome: domain.DeliveryOutcome,
        next_attempt_at: datetime | None = None,
    ) -> bool:
        """Log an attempt and move the delivery on (delivered / pending again / failed).

        Only the lease holder may do so; returns False when the lease was lost (another worker
        took over an expired lease), in which case nothing is changed.
        """
        with self.session() as s:
            values: dict[str, Any] = {
                "attempts": AlertDelivery.attempts + 1,
                "lease_owner": None,
                "lease_until": None,
                "last_error": attempt.error
                or (None if attempt.ok else f"HTTP {attempt.status_code}"),
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
                    started_at=attempt.started_at,
                    duration_ms=float(attempt.duration_ms),
                    status_code=attempt.status_code,
                    error=attempt.error,
                    ok=attempt.ok,
                )
            )
            return True
