"""Alert rules (CRUD) and alerts (list, read, acknowledge, webhook deliveries)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Response

from scalewatch.server import limits
from scalewatch.server.alerts import rule_service
from scalewatch.server.alerts.checks import InvalidRule
from scalewatch.server.alerts.rule_service import ProjectCheck, RuleDraft
from scalewatch.server.api.deps import (
    AUTH_RESPONSES,
    PROJECTS,
    READ,
    WRITE,
    SettingsDep,
    StoreDep,
    check_project,
)
from scalewatch.server.api.schemas import (
    ID_MAX,
    AlertList,
    AlertOut,
    DeliveryList,
    PathId,
    RuleCreate,
    RuleList,
    RuleOut,
    RulePatch,
    not_found,
)
from scalewatch.server.domain.alerts import Alert, AlertRule
from scalewatch.server.domain.tokens import Token
from scalewatch.server.scopes import redact_delivery, webhook_host_only
from scalewatch.server.store import Store

router = APIRouter(
    prefix="/api/v1", tags=["alerts"], responses=AUTH_RESPONSES, dependencies=[PROJECTS]
)
State = Literal["open", "acknowledged", "resolved", "active"]
TokenInfo = Token | None  # the caller's token record (None: auth is off)
RULE_404 = not_found("alert rule")
ALERT_404 = not_found("alert")


def _invalid(field: str, msg: str) -> HTTPException:
    return HTTPException(422, [{"loc": ["body", field], "msg": msg, "type": "value_error"}])


def _query_nul(project: str | None) -> None:
    if project is not None and "\x00" in project:
        raise HTTPException(
            422,
            [{"loc": ["query", "project"], "msg": "must not contain NUL", "type": "value_error"}],
        )


def _scope(info: Token | None) -> str:
    return "admin" if info is None else info.scope  # None: auth is off


def _rule_out(rule: AlertRule, scope: str) -> AlertRule:
    # A webhook URL is often a secret (Slack's is): below admin, only its host is shown.
    if scope == "admin":
        return rule
    return rule.model_copy(update={"webhook_url": webhook_host_only(rule.webhook_url)})


def _project_check(store: Store) -> ProjectCheck:
    return lambda project: check_project(store, project)


@router.post("/alert-rules", response_model=RuleOut, status_code=201)
def create_rule(
    body: RuleCreate, store: StoreDep, settings: SettingsDep, info: TokenInfo = WRITE
) -> AlertRule:
    """Create an alert rule for one run, for a group (`group`; not with `run_id`), or for
    every run of a project (both null). `seed_off_curve` needs a group.

    The webhook URL must resolve to public addresses only (unless the server runs with
    `SCALEWATCH_WEBHOOK_ALLOW_PRIVATE=1`); below admin scope only its host is returned."""
    draft = RuleDraft(
        body.project, body.kind.value, body.params, run_id=body.run_id, group=body.group,
        webhook_url=body.webhook_url, webhook_secret=body.webhook_secret, enabled=body.enabled,
    )
    # An unknown run here is a bad field of the rule (422), not an unknown resource (404).
    try:
        rule = rule_service.create_rule(store, draft, settings.webhook_allow_private,
                                        _project_check(store))
    except InvalidRule as exc:
        raise _invalid(exc.field, str(exc)) from exc
    return _rule_out(rule, _scope(info))


@router.get("/alert-rules", response_model=RuleList)
def list_rules(
    store: StoreDep,
    info: TokenInfo = READ,
    project: Annotated[str | None, Query(max_length=limits.MAX_NAME_LENGTH)] = None,
    run: Annotated[int | None, Query(ge=1, le=ID_MAX, description="rules covering run")] = None,
) -> RuleList:
    """Rules (webhook secrets are never returned: see `has_secret`)."""
    _query_nul(project)
    rules = [
        _rule_out(r, _scope(info)) for r in store.list_alert_rules(project=project, run_id=run)
    ]
    return RuleList(rules=[RuleOut.of(r) for r in rules], total=len(rules))


@router.get("/alert-rules/{rule_id}", response_model=RuleOut, responses=RULE_404)
def get_rule(rule_id: PathId, store: StoreDep, info: TokenInfo = READ) -> AlertRule:
    return _rule_out(store.get_alert_rule(rule_id), _scope(info))


@router.patch("/alert-rules/{rule_id}", response_model=RuleOut, responses=RULE_404)
def patch_rule(
    rule_id: PathId,
    body: RulePatch,
    store: StoreDep,
    settings: SettingsDep,
    info: TokenInfo = WRITE,
) -> AlertRule:
    """Change a rule. Changing kind, params, project or run resolves its active alerts."""
    try:
        rule = rule_service.update_rule(
            store, rule_id, body.model_dump(exclude_unset=True),
            settings.webhook_allow_private, _project_check(store), settings.base_url,
        )
    except InvalidRule as exc:
        raise _invalid(exc.field, str(exc)) from exc
    return _rule_out(rule, _scope(info))


@router.delete("/alert-rules/{rule_id}", status_code=204, dependencies=[WRITE], responses=RULE_404)
def delete_rule(rule_id: PathId, store: StoreDep) -> Response:
    """Delete a rule with its alerts and their delivery history."""
    rule_service.delete_rule(store, rule_id)
    return Response(status_code=204)


@router.get("/alerts", response_model=AlertList, dependencies=[READ])
def list_alerts(
    store: StoreDep,
    project: Annotated[str | None, Query(max_length=limits.MAX_NAME_LENGTH)] = None,
    run: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,
    group: Annotated[str | None, Query(min_length=1, max_length=limits.MAX_GROUP_LENGTH)] = None,
    state: Annotated[
        State | None, Query(description="active = open or acknowledged (not yet resolved)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)] = limits.DEFAULT_PAGE_SIZE,
    offset: Annotated[int, Query(ge=0, le=ID_MAX)] = 0,
) -> AlertList:
    """Alerts, newest first."""
    _query_nul(project)
    alerts, total = store.list_alerts(
        project=project, run_id=run, state=state, limit=limit, offset=offset, group=group
    )
    return AlertList(alerts=[AlertOut.of(a) for a in alerts], total=total)


@router.get("/alerts/{alert_id}", response_model=AlertOut, dependencies=[READ], responses=ALERT_404)
def get_alert(alert_id: PathId, store: StoreDep) -> Alert:
    return store.get_alert(alert_id)


@router.post(
    "/alerts/{alert_id}/ack", response_model=AlertOut, dependencies=[WRITE], responses=ALERT_404
)
def ack_alert(alert_id: PathId, store: StoreDep) -> Alert:
    """Acknowledge: the alert stays active until its condition clears (then it resolves)."""
    return rule_service.acknowledge(store, alert_id)


@router.get(
    "/alerts/{alert_id}/deliveries",
    response_model=DeliveryList,
    responses=ALERT_404,
)
def deliveries(alert_id: PathId, store: StoreDep, info: TokenInfo = READ) -> DeliveryList:
    """Webhook deliveries of an alert (opened / resolved events) with every attempt.

    Below admin the URL shows its host only; read scope sees a generic error per failed
    attempt instead of the receiver's or the socket's message."""
    scope = _scope(info)
    found = [redact_delivery(d, scope) for d in store.alert_deliveries(alert_id)]
    return DeliveryList(alert_id=alert_id, deliveries=found)
