"""Wiring: evaluate rules after every stored fit, `stalled` on a timer, send webhooks.

`scalewatch.server.refit_process.start_background` builds them (the webhook sender, the stalled
timer and the service whose listeners the refitter calls), in the server process or its refit
child.
"""

from __future__ import annotations

import logging
from typing import Any

from scalewatch.server.alerts import evaluate as ev
from scalewatch.server.alerts.groups import evaluate_group
from scalewatch.server.alerts.kinds import FIT_KINDS
from scalewatch.server.alerts.webhooks import WebhookSender, build_body
from scalewatch.server.background import PollingWorker
from scalewatch.server.db.models import utcnow
from scalewatch.server.domain.runs import FitContext
from scalewatch.server.store.base import DirtyGroup, Store

log = logging.getLogger("scalewatch.alerts")


class AlertService:
    def __init__(self, store: Store, base_url: str, sender: WebhookSender | None = None) -> None:
        self.store = store
        self.base_url = base_url
        self.sender = sender

    # ---- applying a verdict ------------------------------------------------------------------
    def _webhook(self, rule: dict[str, Any]) -> Any:
        url = rule.get("webhook_url")
        if not url:
            return None
        return lambda alert, event: (url, build_body(alert, event, self.base_url))

    def apply(
        self,
        rule: dict[str, Any],
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
            done["id"],
            what,
            rule["id"],
            run_id,
            group,
            done.get("message", ""),
        )
        if webhook is not None and self.sender is not None:
            self.sender.notify()
        return what

    # ---- after each fit ----------------------------------------------------------------------
    def verdict_for(
        self,
        rule: dict[str, Any],
        series_id: int,
        fit: dict[str, Any],
        previous: dict[str, Any] | None,
        active: bool = False,
    ) -> ev.Verdict:
        params, kind = rule["params"], rule["kind"]
        if kind == "asymptote_drop":
            return ev.asymptote_drop(params, fit, self.store.best_ok_fit(series_id), active)
        if kind == "asymptote_below":
            return ev.asymptote_below(params, fit, previous, active)
        if kind == "below_baseline":
            name, base = self.store.latest_ok_fit_of_run(int(params["baseline_run_id"]))
            return ev.below_baseline(params, fit, base, name, active)
        if kind == "off_curve":
            compute, values = self.store.last_points(series_id, int(params["n"]))
            if len(compute) < int(params["n"]):
                return ev.NO_VERDICT
            reference = self.store.last_ok_fit_before(series_id, min(compute))
            return ev.off_curve(params, reference, compute, values, fit)
        return ev.NO_VERDICT

    def on_fit(
        self,
        context: FitContext,
        series_id: int,
        fit: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        """The refit listener: evaluate every rule of the run on its fit metric's new fit."""
        if fit.get("metric") != context.fit_metric:
            return
        rules = self.store.rules_for_run(context.project, context.run_id, FIT_KINDS)
        if not rules:
            return
        active = self.store.active_alert_rules(context.run_id)
        for rule in rules:
            try:
                verdict = self.verdict_for(rule, series_id, fit, previous, rule["id"] in active)
                self.apply(rule, context.run_id, verdict, fit.get("fit_id"))
            except Exception:  # noqa: BLE001 - one broken rule must not hide the others
                log.exception("alert rule %s on run %s failed", rule["id"], context.run_id)

    def on_group_fit(
        self,
        item: DirtyGroup,
        members: list[dict[str, Any]],
        fit: dict[str, Any],
        previous: dict[str, Any] | None,
    ) -> None:
        """The group refit listener: evaluate the rules naming the group (`alerts/groups.py`)."""
        evaluate_group(self.store, self.apply, item, members, fit, previous)

    # ---- on a timer --------------------------------------------------------------------------
    def check_stalled(self) -> int:
        changed = 0
        now = utcnow()
        for rule, run in self.store.stalled_candidates():
            verdict = ev.stalled(rule["params"], run["status"], run["last_seen_at"], now)
            if self.apply(rule, run["id"], verdict, None):
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
