"""Alert tables: rules, alerts (one active per rule and run), and the webhook outbox.

They extend the shared `Base` of `scalewatch.server.db.models` (this module imports that one,
never the other way round); whatever needs the whole schema on `Base.metadata` imports both (the
store's alert mixins, `migrations/env.py`).

* `alerts.open_key` is `"<rule_id>:<run_id>"` (a group rule: `"<rule_id>:g<hash of the
  group>"`, plus `":<run_id>"` for one seed) while an alert is active (open or acknowledged)
  and NULL once resolved. Its unique index is what makes "one active alert per (rule, run)" hold
  even with several server processes evaluating at once; NULLs never collide in a unique index
  on SQLite or PostgreSQL, so any number of resolved alerts may share a (rule, run).
* `alert_deliveries` is an outbox: a row is inserted in the transaction that opens (or resolves)
  the alert, and a background sender claims due rows with a lease, so a delivery survives a
  crash or restart between the database commit and the HTTP request.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from scalewatch.server.db.models import Base, utcnow

ALERT_STATES = ("open", "acknowledged", "resolved")
DELIVERY_STATES = ("pending", "delivered", "failed")


class AlertRule(Base):
    __tablename__ = "alert_rules"
    # Ids never reused (migration 0016; see Run): a script's PATCH of a deleted rule is a 404.
    __table_args__ = (Index("ix_alert_rules_project", "project", "run_id"),
                      {"sqlite_autoincrement": True})
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project: Mapped[str] = mapped_column(String(200))
    # NULL: every run of the project
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), nullable=True
    )
    # A group rule (migration 0008): watches the group's pooled fit and its seeds; run_id NULL.
    group_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    webhook_url: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    webhook_secret: Mapped[str | None] = mapped_column(String(500), nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Alert(Base):
    __tablename__ = "alerts"
    __table_args__ = (
        Index("ix_alerts_open_key", "open_key", unique=True),
        Index("ix_alerts_run_state", "run_id", "state"),
        Index("ix_alerts_project_created", "project", "created_at"),
        Index("ix_alerts_rule", "rule_id"),
        {"sqlite_autoincrement": True},  # ids never reused (migration 0016; see Run)
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("alert_rules.id", ondelete="CASCADE"))
    # NULL for an alert on a group's pooled fit; a seed's alert names its run and its group.
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), nullable=True
    )
    group_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    project: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16), default="open")
    open_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The fit whose evaluation opened the alert (fits of a deleted run go with its alerts).
    fit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    acknowledged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class AlertDelivery(Base):
    """One webhook event (alert opened / resolved) to send, with its retry state."""

    __tablename__ = "alert_deliveries"
    __table_args__ = (
        Index("ix_alert_deliveries_due", "state", "next_attempt_at"),
        Index("ix_alert_deliveries_alert", "alert_id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(32))  # alert.opened | alert.resolved
    # Sent as X-Scalewatch-Delivery: the same on every retry, so receivers can deduplicate.
    delivery_key: Mapped[str] = mapped_column(String(64), unique=True)
    url: Mapped[str] = mapped_column(String(2000))
    body: Mapped[str] = mapped_column(Text)  # the exact JSON sent (the HMAC covers these bytes)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class DeliveryAttempt(Base):
    __tablename__ = "alert_delivery_attempts"
    __table_args__ = (Index("ix_alert_delivery_attempts_delivery", "delivery_id", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(ForeignKey("alert_deliveries.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    duration_ms: Mapped[float] = mapped_column(Float)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    ok: Mapped[bool] = mapped_column(Boolean, default=False)
