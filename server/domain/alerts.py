"""Alert rules, alerts and their webhook deliveries: one shape each.

The store returns these, the alert service and the dashboard read them, and the API's response
schemas (``server/api/schemas/alerts.py``) derive from them, so a field is declared once.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field


# Every member has exactly one entry in the kind registry (``server/alerts/kinds.py``, checked
# when it is imported): its verdicts, its parameters, its description.
class AlertKind(str, Enum):
    """What an alert rule watches. Members are named by their value (the stored string)."""

    asymptote_drop = "asymptote_drop"
    asymptote_below = "asymptote_below"
    below_baseline = "below_baseline"
    stalled = "stalled"
    off_curve = "off_curve"
    seed_off_curve = "seed_off_curve"


AlertState = Literal["open", "acknowledged", "resolved"]
DeliveryState = Literal["pending", "delivered", "failed"]
# How one delivery attempt moved its delivery on.
DeliveryOutcome = Literal["delivered", "retry", "failed"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class AlertRule(Frozen):
    """A rule as stored (its webhook secret is never read out: ``has_secret`` says if set)."""

    id: int
    project: str
    run_id: int | None
    group: str | None = None
    kind: AlertKind
    params: dict[str, Any]
    webhook_url: str | None
    has_secret: bool = Field(description="a webhook secret is set (it is never returned)")
    enabled: bool
    created_at: str | None
    updated_at: str | None


class Alert(Frozen):
    id: int
    rule_id: int
    run_id: int | None = Field(description="the run; null for an alert on a group's pooled fit")
    run_name: str | None
    group: str | None = Field(None, description="the group of a group rule's alert")
    project: str
    kind: AlertKind
    state: AlertState
    message: str
    created_at: str | None
    acknowledged_at: str | None
    resolved_at: str | None
    fit_id: int | None
    details: dict[str, Any]


# One attempt of a delivery, as its log shows it. (The API's schemas show a model's docstring:
# these two have none, as before they were shared.)
class DeliveryAttempt(Frozen):
    attempt: int
    at: str | None
    duration_ms: float
    status_code: int | None
    error: str | None
    ok: bool


# A webhook delivery of an alert event, with every attempt.
class Delivery(Frozen):
    id: int
    alert_id: int
    event: str = Field(description="alert.opened or alert.resolved")
    delivery_id: str
    url: str
    state: DeliveryState
    attempts: int
    created_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    last_error: str | None
    attempt_log: list[DeliveryAttempt]


class ClaimedDelivery(Frozen):
    """A delivery leased to a sender: what it posts, where, and with which secret."""

    id: int
    alert_id: int
    delivery_key: str
    url: str
    body: str
    attempts: int
    created_at: datetime
    event: str
    secret: str | None


class AttemptRecord(Frozen):
    """What a sender records of one attempt (``OutboxStore.record_delivery_attempt``)."""

    started_at: datetime
    duration_ms: float
    status_code: int | None
    error: str | None
    ok: bool


class WatchedRun(Frozen):
    """A run as a timer rule (``stalled``) sees it."""

    id: int
    name: str
    status: str
    last_seen_at: datetime | None
    project: str


class RuleChanges(TypedDict, total=False):
    """The fields of a rule a change sets (only those present), already validated."""

    project: str
    run_id: int | None
    group: str | None
    kind: AlertKind
    params: dict[str, Any]
    webhook_url: str | None
    webhook_secret: str | None
    enabled: bool
