"""Alert rules, alerts and their webhook deliveries: request and response models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from typing_extensions import Self

from scalewatch.server import limits
from scalewatch.server.alerts.checks import MAX_SECRET, MAX_URL, url_problem
from scalewatch.server.alerts.kinds import KINDS, AlertKind
from scalewatch.server.api.schemas.common import (
    ID_MAX,
    check_free_text,
    check_group,
    check_json,
)
from scalewatch.server.domain.alerts import Alert, AlertRule, Delivery

# ---- alerts ------------------------------------------------------------------------------------

PARAMS_HELP = "Parameters of the kind (defaults filled in): " + "; ".join(
    f"**{spec.name}**: {spec.help}" for spec in KINDS.values()
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


class _FromDomain(BaseModel):
    @classmethod
    def of(cls, value: BaseModel) -> Self:
        """The response for a domain model this schema derives from."""
        return cls.model_validate(value, from_attributes=True)


# The responses are the domain's shapes (server/domain/alerts.py), named as the API has
# always named them.
class RuleOut(AlertRule, _FromDomain):
    pass


class RuleList(BaseModel):
    rules: list[RuleOut]
    total: int


class AlertOut(Alert, _FromDomain):
    pass


class AlertList(BaseModel):
    alerts: list[AlertOut]
    total: int


class DeliveryList(BaseModel):
    alert_id: int
    deliveries: list[Delivery]
