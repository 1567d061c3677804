"""Alert rules, alerts and their webhook deliveries: request and response models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from scalewatch.server import limits
from scalewatch.server.alerts.checks import MAX_SECRET, MAX_URL, url_problem
from scalewatch.server.alerts.kinds import AlertKind
from scalewatch.server.alerts.rules import KIND_HELP
from scalewatch.server.api.schemas.common import (
    ID_MAX,
    AlertState,
    check_free_text,
    check_group,
    check_json,
)

# ---- alerts ------------------------------------------------------------------------------------

PARAMS_HELP = "Parameters of the kind (defaults filled in): " + "; ".join(
    f"**{k.value}**: {v}" for k, v in KIND_HELP.items()
)


def _check_url(v: str | None) -> str | None:
    problem = None if v is None else url_problem(v)  # the same check as the dashboard's form
    if problem:
        raise ValueError(problem)
    return v


class RuleChecked(BaseModel):
    """The checks a rule's fields get, whether it is created or patched."""

    _group = field_validator("group", check_fields=False)(
        classmethod(lambda cls, v: check_group(v)))
    _url = field_validator("webhook_url", check_fields=False)(_check_url)

    @field_validator("project", "webhook_secret", check_fields=False)
    @classmethod
    def _text(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_free_text(v, str(info.field_name))

    @field_validator("params", check_fields=False)
    @classmethod
    def _params(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else check_json(v, "params")


class RuleCreate(RuleChecked):
    """An alert rule for one run, for a group (`group`: its pooled fit and its seeds), or
    (`run_id` and `group` null) for every run of a project. The `params` each `kind` takes
    are listed under `params`."""

    model_config = ConfigDict(extra="forbid")
    project: str = Field(min_length=1, max_length=limits.MAX_NAME_LENGTH)
    run_id: int | None = Field(None, ge=1, le=ID_MAX, description="null: every run")
    group: str | None = Field(
        None, min_length=1, max_length=limits.MAX_GROUP_LENGTH,
        description="a group of the project (not with run_id): asymptote_drop and "
        "asymptote_below watch its pooled fit, seed_off_curve each of its seeds",
    )
    kind: AlertKind
    params: dict[str, Any] = Field(default_factory=dict, description=PARAMS_HELP)
    webhook_url: str | None = Field(None, max_length=MAX_URL)
    webhook_secret: str | None = Field(None, min_length=1, max_length=MAX_SECRET)
    enabled: bool = True


class RulePatch(RuleChecked):
    """Fields to change; changing kind without params resets params to the kind's defaults."""

    model_config = ConfigDict(extra="forbid")
    project: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_LENGTH)
    run_id: int | None = Field(None, ge=1, le=ID_MAX)
    group: str | None = Field(None, min_length=1, max_length=limits.MAX_GROUP_LENGTH)
    kind: AlertKind | None = None
    params: dict[str, Any] | None = Field(None, description=PARAMS_HELP)
    webhook_url: str | None = Field(None, max_length=MAX_URL)
    webhook_secret: str | None = Field(None, min_length=1, max_length=MAX_SECRET)
    enabled: bool | None = None


class RuleOut(BaseModel):
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


class RuleList(BaseModel):
    rules: list[RuleOut]
    total: int


class AlertOut(BaseModel):
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


class AlertList(BaseModel):
    alerts: list[AlertOut]
    total: int


class DeliveryAttempt(BaseModel):
    attempt: int
    at: str | None
    duration_ms: float
    status_code: int | None
    error: str | None
    ok: bool


class Delivery(BaseModel):
    id: int
    alert_id: int
    event: str = Field(description="alert.opened or alert.resolved")
    delivery_id: str
    url: str
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    created_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    last_error: str | None
    attempt_log: list[DeliveryAttempt]


class DeliveryList(BaseModel):
    alert_id: int
    deliveries: list[Delivery]
