"""Writing alert rules and acknowledging alerts: one way in for the API and the dashboard.

``POST``/``PATCH``/``DELETE /alert-rules``, ``POST /alerts/{id}/ack`` and the Alerts page's
Rules panel and Acknowledge button all call these, so a rule is checked the same way (and
refused with the same `InvalidRule`) whichever surface wrote it; each surface only maps the
error to its own answer (a 422 naming the field, a message under the form).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from scalewatch.server.alerts.checks import (
    InvalidRule,
    check_fields,
    check_webhook,
    validated_params,
)
from scalewatch.server.alerts.kinds import ALERT_KINDS, AlertKind
from scalewatch.server.alerts.webhooks import event_builder
from scalewatch.server.domain.alerts import Alert, AlertRule, RuleChanges
from scalewatch.server.store.base import AlertStore, RunStore


class RuleWriteStore(AlertStore, RunStore, Protocol):
    """What writing a rule needs: the rules, and the runs a rule may name."""


# Called with the project a rule will belong to before it is checked further (the API's
# project-scoped token check, so that its refusal is the first answer).
ProjectCheck = Callable[[str], None]


def _no_check(_project: str) -> None:
    return None


@dataclass(frozen=True)
class RuleDraft:
    """A new rule as a surface received it, not yet checked."""

    project: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    run_id: int | None = None
    group: str | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None
    enabled: bool = True


def _kind(kind: str) -> AlertKind:
    if kind not in ALERT_KINDS:
        expected = ", ".join(ALERT_KINDS)
        raise InvalidRule("kind", f"unknown kind {kind!r}; expected one of {expected}")
    return AlertKind(kind)


def check_new_rule(
    store: RunStore, draft: RuleDraft, allow_private: bool,
    check_project: ProjectCheck = _no_check,
) -> RuleDraft:
    """The draft checked (its text fields, where its webhook points, how its kind, params and
    what it watches fit together), its params with defaults filled in; raises `InvalidRule`."""
    check_project(draft.project)
    check_fields(draft.project, draft.group, draft.webhook_url, draft.webhook_secret)
    check_webhook(draft.webhook_url, allow_private)
    kind = _kind(draft.kind)
    params = validated_params(store, draft.project, draft.run_id, kind.value, draft.params,
                              draft.group)
    return replace(draft, kind=kind.value, params=params)


def create_rule(
    store: RuleWriteStore, draft: RuleDraft, allow_private: bool,
    check_project: ProjectCheck = _no_check,
) -> AlertRule:
    """Check a new rule (`check_new_rule`) and store it; raises `InvalidRule`."""
    rule = check_new_rule(store, draft, allow_private, check_project)
    return store.create_alert_rule(
        rule.project, rule.kind, rule.params, run_id=rule.run_id, webhook_url=rule.webhook_url,
        webhook_secret=rule.webhook_secret, enabled=rule.enabled, group=rule.group,
    )


def update_rule(
    store: RuleWriteStore, rule_id: int, patch: Mapping[str, Any], allow_private: bool,
    check_project: ProjectCheck = _no_check, base_url: str = "",
) -> AlertRule:
    """Apply the fields `patch` sets, the rule as a whole checked again as if created (its
    params only when the patch touches what they depend on: switching off a rule whose
    baseline run was deleted must not need the run).

    Changing kind without params resets params to the kind's defaults; changing kind, params,
    project or what it watches, or switching it off, resolves its active alerts (the store
    does), each an `alert.resolved` event for the rule's webhook as it was (``base_url``: the
    server's, for the event's links)."""
    check_webhook(patch.get("webhook_url"), allow_private)
    rule = store.get_alert_rule(rule_id)
    for key in ("project", "kind", "enabled"):
        if key in patch and patch[key] is None:
            raise InvalidRule(key, f"{key} cannot be null")
    kind = _kind(patch["kind"]) if "kind" in patch else rule.kind
    if "params" in patch:
        params = patch["params"] or {}
    else:
        params = rule.params if kind == rule.kind else {}
    project = patch.get("project") or rule.project
    check_project(project)
    run_id = patch.get("run_id", rule.run_id)
    group = patch.get("group", rule.group)
    changes = RuleChanges()
    if MEANING & patch.keys():
        changes["params"] = validated_params(store, project, run_id, kind.value, params, group)
    if "kind" in patch:
        changes["kind"] = kind
    if "project" in patch:
        changes["project"] = project
    if "run_id" in patch:
        changes["run_id"] = run_id
    if "group" in patch:
        changes["group"] = group
    for key in ("webhook_url", "webhook_secret"):
        if key in patch:
            changes[key] = patch[key]  # type: ignore[literal-required]  # keys listed above
    if "enabled" in patch:
        changes["enabled"] = bool(patch["enabled"])
    return store.update_alert_rule(rule_id, changes,
                                   event_builder(rule.webhook_url, base_url))


# The fields a rule's params are checked against (a baseline run, a group, the kind's specs).
MEANING = frozenset({"kind", "params", "project", "run_id", "group"})


def set_rule_enabled(store: RuleWriteStore, rule_id: int, enabled: bool,
                     allow_private: bool, base_url: str = "") -> AlertRule:
    """Switch a rule on or off (a PATCH of ``enabled`` alone)."""
    return update_rule(store, rule_id, {"enabled": enabled}, allow_private, base_url=base_url)


def delete_rule(store: AlertStore, rule_id: int) -> None:
    """Delete a rule with its alerts and their delivery history."""
    store.delete_alert_rule(rule_id)


def acknowledge(store: AlertStore, alert_id: int) -> Alert:
    """Acknowledge an open alert: it stays active until its condition clears."""
    return store.ack_alert(alert_id)
