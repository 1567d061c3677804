"""Wiring: evaluate rules after every stored fit, timer kinds (`stalled`) on a timer, webhooks.

Which verdict a rule gets is its kind's entry in the registry (`kinds.KINDS`); this module
finds the rules a fit or a tick concerns, gives each verdict the evidence it asks for (a run's
or a group's, `RunEvidence` / `GroupEvidence`) and opens or resolves the alert.

`scalewatch.server.refit_process.start_background` builds them (the webhook sender, the stalled
timer and the service whose listeners the refitter calls), in the server process or its refit
child.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scalewatch.server.alerts import evaluate as ev
from scalewatch.server.alerts.kinds import (
    FIT_KINDS,
    GROUP_KINDS,
    TIMER_KINDS,
    Fit,
    spec_of,
)
from scalewatch.server.alerts.webhooks import WebhookSender, event_builder
from scalewatch.server.background import PollingWorker
from scalewatch.server.db.models import utcnow
from scalewatch.server.domain.alerts import AlertRule
from scalewatch.server.domain.runs import FitContext
from scalewatch.server.store.base import (
    AlertStore,
    DirtyGroup,
    EventBuilder,
    FitStore,
    GroupStore,
    RunStore,
)

log = logging.getLogger("scalewatch.alerts")


class EvaluationStore(AlertStore, FitStore, GroupStore, RunStore, Protocol):
    """What evaluation reads and writes: rules and alerts, and the fits and points verdicts
    compare."""


@dataclass(frozen=True)
class RunEvidence:
    """A run's new fit, with the run's own reads (`kinds.FitEvidence`)."""

    store: EvaluationStore
    series_id: int
    fit: Fit
    previous: Fit | None
    active: bool

    def best_ok_fit(self) -> Fit | None:
        return self.store.best_ok_fit(self.series_id)

    def baseline(self, run_id: int) -> tuple[str | None, Fit | None]:
        return self.store.latest_ok_fit_of_run(run_id)

    def last_points(self, n: int) -> tuple[list[float], list[float]]:
        return self.store.last_points(self.series_id, n)

    def last_ok_fit_before(self, compute: float) -> Fit | None:
        return self.store.last_ok_fit_before(self.series_id, compute)


@dataclass(frozen=True)
class GroupEvidence:
    """A group's new pooled fit, measured against the group's own best fit. A group has no
    points or baseline of its own: only kinds whose group verdict needs neither register one."""

    store: GroupStore
    group_series_id: int
    fit: Fit
    previous: Fit | None
    active: bool

    def best_ok_fit(self) -> Fit | None:
        return self.store.best_ok_group_fit(self.group_series_id)

    def baseline(self, run_id: int) -> tuple[str | None, Fit | None]:
        raise LookupError("a group's pooled fit has no baseline run")

    def last_points(self, n: int) -> tuple[list[float], list[float]]:
        raise LookupError("a group's pooled fit has no points of its own")

    def last_ok_fit_before(self, compute: float) -> Fit | None:
        raise LookupError("a group's pooled fit has no points of its own")


class AlertService:
    def __init__(
        self, store: EvaluationStore, base_url: str, sender: WebhookSender | None = None
    ) -> None:
        self.store = store
        self.base_url = base_url
        self.sender = sender

    # ---- applying a verdict ------------------------------------------------------------------
    def _webhook(self, rule: AlertRule) -> EventBuilder | None:
        return event_builder(rule.webhook_url, self.base_url)

    def apply(
        self,
        rule: AlertRule,
        run_id: int | None,
        verdict: ev.Verdict,
        fit_id: int | None,
        group: str | None = None,
    ) -> str | None:
        """Open or resolve the (rule, run) alert - for a group rule the (rule, group) alert,
        or with `run_id` one seed's; returns "opened" / "resolved" / None."""
        if verdict.fire is None:
            return None
        webhook = self._webhook(rule)
        if verdict.fire:
            done = self.store.open_alert(
                rule, run_id, verdict.message, verdict.details, fit_id, webhook, group=group
            )
            what = "opened"
        else:
            done = self.store.resolve_alert(rule, run_id, verdict.details, webhook, group=group)
            what = "resolved"
        if done is None:
            return None
        log.info(
            "alert %s %s: rule %s run %s group %s %s",
            done.id, what, rule.id, run_id, group, done.message,
        )
        if webhook is not None and self.sender is not None:
            self.sender.notify()
        return what

    # ---- after each fit ----------------------------------------------------------------------
    def verdict_for(self, rule: AlertRule, evidence: RunEvidence) -> ev.Verdict:
        """The rule's verdict on a run's new fit; a kind not evaluated on runs' fits is an
        error, never a silent "no verdict"."""
        judge = spec_of(rule.kind).on_run_fit
        if judge is None:
            raise ValueError(f"alert kind {rule.kind.value} is not evaluated on a run's fits")
        return judge(rule.params, evidence)

    def on_fit(
        self, context: FitContext, series_id: int, fit: Fit, previous: Fit | None
    ) -> None:
        """The refit listener: evaluate every rule of the run on its fit metric's new fit."""
        if fit.get("metric") != context.fit_metric:
            return
        run_id = context.run_id
        rules = self.store.rules_for_run(context.project, run_id, FIT_KINDS)
        if not rules:
            return
        active = self.store.active_alert_rules(run_id)
        for rule in rules:
            try:
                evidence = RunEvidence(self.store, series_id, fit, previous, rule.id in active)
                self.apply(rule, run_id, self.verdict_for(rule, evidence), fit.get("fit_id"))
            except Exception:  # noqa: BLE001 - one broken rule must not hide the others
                log.exception("alert rule %s on run %s failed", rule.id, run_id)

    def on_group_fit(
        self,
        item: DirtyGroup,
        members: Sequence[Mapping[str, Any]],
        fit: Fit,
        previous: Fit | None,
    ) -> None:
        """The group refit listener: evaluate every rule naming this group on its new fit of
        the members' fit metric (on the pooled fit, and on each seed; `groups.py`)."""
        if {m.get("fit_metric") for m in members} != {item.metric}:
            return  # a fit of another metric someone looked at, not the group's own
        rules = self.store.rules_for_group(item.project, item.group, GROUP_KINDS)
        if not rules:
            return
        active = self.store.active_group_alerts(item.project, item.group)
        for rule in rules:
            try:
                self._judge_group(rule, item, fit, previous, active)
            except Exception:  # noqa: BLE001 - one broken rule must not hide the others
                log.exception("alert rule %s on group %s failed", rule.id, item.group)

    def _judge_group(
        self,
        rule: AlertRule,
        item: DirtyGroup,
        fit: Fit,
        previous: Fit | None,
        active: set[tuple[int, int | None]],
    ) -> None:
        spec = spec_of(rule.kind)
        fit_id = fit.get("fit_id")
        if spec.on_group_fit is not None:
            evidence = GroupEvidence(self.store, item.group_series_id, fit, previous,
                                     (rule.id, None) in active)
            self.apply(rule, None, spec.on_group_fit(rule.params, evidence), fit_id, item.group)
        if spec.on_group_seeds is not None:
            seen = set()
            for member in fit.get("members") or []:
                if member.get("run_id") is None:
                    continue
                seen.add(int(member["run_id"]))
                verdict = spec.on_group_seeds(rule.params, member, fit)
                self.apply(rule, int(member["run_id"]), verdict, fit_id, item.group)
            # A seed that left the group (or was deleted) no longer belongs to its alert.
            for rule_id, run_id in active:
                if rule_id == rule.id and run_id is not None and run_id not in seen:
                    self.apply(rule, run_id, ev.Verdict(False, "", {"reason": "left the group"}),
                               fit_id, item.group)

    # ---- on a timer --------------------------------------------------------------------------
    def check_stalled(self) -> int:
        """Evaluate the timer kinds' rules on the runs they cover; returns alerts changed."""
        changed = 0
        now = utcnow()
        for rule, run in self.store.timer_candidates(TIMER_KINDS):
            judge = spec_of(rule.kind).on_timer
            if judge is None:  # pragma: no cover - timer_candidates returns timer kinds only
                raise ValueError(f"alert kind {rule.kind.value} has no timer verdict")
            if self.apply(rule, run.id, judge(rule.params, run, now), None):
                changed += 1
        return changed


class StalledTimer(PollingWorker):
    """Checks `stalled` rules every `interval` seconds (there is no event to wait for)."""

    thread_name = "scalewatch-stalled"

    def __init__(self, service: AlertService, interval: float) -> None:
        super().__init__(interval)
        self.service = service

    def run_once(self) -> int:
        self.service.check_stalled()
        return 0  # always wait a full interval before the next check
