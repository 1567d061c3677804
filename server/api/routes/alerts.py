"""Alert rules (CRUD) and alerts (list, read, acknowledge, webhook deliveries)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from server import limits
from server.alerts.rules import KIND_HELP, RuleError, normalize_params
from server.api.deps import AUTH_RESPONSES, READ, WRITE, StoreDep
from server.api.schemas import ErrorOut
from server.store import NotFound

router = APIRouter(prefix="/api/v1", tags=["alerts"], responses=AUTH_RESPONSES)
Kind = Literal["asymptote_drop", "asymptote_below", "below_baseline", "stalled", "off_curve"]
State = Literal["open", "acknowledged", "resolved", "active"]
Id = Annotated[int, Path(ge=1, le=2**31 - 1)]
RULE_404 = {404: {"model": ErrorOut, "description": "Unknown alert rule"}}
ALERT_404 = {404: {"model": ErrorOut, "description": "Unknown alert"}}
MAX_URL = 2000
MAX_SECRET = 500


def _no_nul(v: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL: a clear 422 instead of a failed INSERT.
    if v is not None and "\x00" in v:
        raise ValueError("must not contain NUL characters")
    return v


def _check_url(v: str | None) -> str | None:
    _no_nul(v)
    if v is not None and not v.lower().startswith(("http://", "https://")):
        raise ValueError("webhook_url must be an http:// or https:// URL")
    return v


class RuleCreate(BaseModel):
    """`params` per kind: """ + "; ".join(f"**{k}**: {v}" for k, v in KIND_HELP.items())

    model_config = ConfigDict(extra="forbid")
    project: str = Field(min_length=1, max_length=limits.MAX_NAME_LENGTH)
    run_id: int | None = Field(None, ge=1, le=2**31 - 1, description="null: every run")
    kind: Kind
    params: dict[str, Any] = Field(default_factory=dict)
    webhook_url: str | None = Field(None, max_length=MAX_URL)
    webhook_secret: str | None = Field(None, min_length=1, max_length=MAX_SECRET)
    enabled: bool = True

    _url = field_validator("webhook_url")(_check_url)
    _nul = field_validator("project", "webhook_secret")(_no_nul)


class RulePatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_LENGTH)
    run_id: int | None = Field(None, ge=1, le=2**31 - 1)
    kind: Kind | None = None
    params: dict[str, Any] | None = None
    webhook_url: str | None = Field(None, max_length=MAX_URL)
    webhook_secret: str | None = Field(None, min_length=1, max_length=MAX_SECRET)
    enabled: bool | None = None

    _url = field_validator("webhook_url")(_check_url)
    _nul = field_validator("project", "webhook_secret")(_no_nul)


def _invalid(field: str, msg: str) -> HTTPException:
    return HTTPException(422, [{"loc": ["body", field], "msg": msg, "type": "value_error"}])


def _query_nul(project: str | None) -> None:
    if project is not None and "\x00" in project:
        raise HTTPException(
            422,
            [{"loc": ["query", "project"], "msg": "must not contain NUL", "type": "value_error"}],
        )


def _validated(store: Any, project: str, run_id: int | None, kind: str, params: dict) -> dict:
    try:
        clean = normalize_params(kind, params)
    except RuleError as exc:
        raise _invalid("params", str(exc)) from exc
    if run_id is not None:
        try:
            run = store.get_run(run_id)
        except NotFound as exc:
            raise _invalid("run_id", f"run {run_id} does not exist") from exc
        if run["project"] != project:
            raise _invalid(
                "run_id", f"run {run_id} belongs to project {run['project']!r}, not {project!r}"
            )
    if kind == "below_baseline":
        try:
            store.get_run(clean["baseline_run_id"])
        except NotFound as exc:
            raise _invalid(
                "params", f"baseline run {clean['baseline_run_id']} does not exist"
            ) from exc
    return clean


@router.post("/alert-rules", status_code=201, dependencies=[WRITE])
def create_rule(body: RuleCreate, store: StoreDep) -> dict:
    """Create an alert rule for one run, or (run_id null) for every run of a project."""
    params = _validated(store, body.project, body.run_id, body.kind, body.params)
    return store.create_alert_rule(
        body.project,
        body.kind,
        params,
        run_id=body.run_id,
        webhook_url=body.webhook_url,
        webhook_secret=body.webhook_secret,
        enabled=body.enabled,
    )


@router.get("/alert-rules", dependencies=[READ])
def list_rules(
    store: StoreDep,
    project: Annotated[str | None, Query(max_length=limits.MAX_NAME_LENGTH)] = None,
    run: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="rules covering run")] = None,
) -> dict:
    """Rules (webhook secrets are never returned: see `has_secret`)."""
    _query_nul(project)
    rules = store.list_alert_rules(project=project, run_id=run)
    return {"rules": rules, "total": len(rules)}


@router.get("/alert-rules/{rule_id}", dependencies=[READ], responses=RULE_404)
def get_rule(rule_id: Id, store: StoreDep) -> dict:
    try:
        return store.get_alert_rule(rule_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.patch("/alert-rules/{rule_id}", dependencies=[WRITE], responses=RULE_404)
def patch_rule(rule_id: Id, body: RulePatch, store: StoreDep) -> dict:
    """Change a rule. Changing kind, params, project or run resolves its active alerts."""
    try:
        rule = store.get_alert_rule(rule_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    changes = body.model_dump(exclude_unset=True)
    for key in ("project", "kind", "enabled"):
        if key in changes and changes[key] is None:
            raise _invalid(key, f"{key} cannot be null")
    kind = changes.get("kind") or rule["kind"]
    if "params" in changes:
        params = changes["params"] or {}
    else:
        params = rule["params"] if kind == rule["kind"] else {}
    project = changes.get("project") or rule["project"]
    run_id = changes["run_id"] if "run_id" in changes else rule["run_id"]
    changes["params"] = _validated(store, project, run_id, kind, params)
    try:
        return store.update_alert_rule(rule_id, changes)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.delete("/alert-rules/{rule_id}", status_code=204, dependencies=[WRITE], responses=RULE_404)
def delete_rule(rule_id: Id, store: StoreDep) -> Response:
    """Delete a rule with its alerts and their delivery history."""
    try:
        store.delete_alert_rule(rule_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    return Response(status_code=204)


@router.get("/alerts", dependencies=[READ])
def list_alerts(
    store: StoreDep,
    project: Annotated[str | None, Query(max_length=limits.MAX_NAME_LENGTH)] = None,
    run: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    state: Annotated[
        State | None, Query(description="active = open or acknowledged (not yet resolved)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)] = limits.DEFAULT_PAGE_SIZE,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> dict:
    """Alerts, newest first."""
    _query_nul(project)
    alerts, total = store.list_alerts(
        project=project, run_id=run, state=state, limit=limit, offset=offset
    )
    return {"alerts": alerts, "total": total}


@router.get("/alerts/{alert_id}", dependencies=[READ], responses=ALERT_404)
def get_alert(alert_id: Id, store: StoreDep) -> dict:
    try:
        return store.get_alert(alert_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.post("/alerts/{alert_id}/ack", dependencies=[WRITE], responses=ALERT_404)
def ack_alert(alert_id: Id, store: StoreDep) -> dict:
    """Acknowledge: the alert stays active until its condition clears (then it resolves)."""
    try:
        return store.ack_alert(alert_id)
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc


@router.get("/alerts/{alert_id}/deliveries", dependencies=[READ], responses=ALERT_404)
def deliveries(alert_id: Id, store: StoreDep) -> dict:
    """Webhook deliveries of an alert (opened / resolved events) with every attempt."""
    try:
        return {"alert_id": alert_id, "deliveries": store.alert_deliveries(alert_id)}
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
