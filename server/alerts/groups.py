"""Group rules: evaluated after every stored fit of a group (`GroupRefits` listeners).

* `asymptote_drop` / `asymptote_below` on the group's pooled fit: the same verdicts as for a
  run (`evaluate.py`), measured against the group's own best fit; one alert per (rule, group).
* `seed_off_curve`: one alert per (rule, group, seed), opened when the group fit reports the
  seed off the recipe's curve (`member_info[i]["off_curve"]`: it broke, or its ceiling is
  clearly off the pooled A) and resolved when it no longer is, or the seed left the group.

The unique `alerts.open_key` (`alerts_sql.open_key`) keeps each of those open once across
processes, exactly as for runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from scalewatch.server.alerts import evaluate as ev
from scalewatch.server.alerts.kinds import GROUP_KINDS
from scalewatch.server.store.base import DirtyGroup, Store


class Applier(Protocol):
    def __call__(self, rule: dict[str, Any], run_id: int | None, verdict: ev.Verdict,
                 fit_id: int | None, group: str | None = None) -> str | None: ...


def _r(v: Any) -> float | None:
    return None if v is None else round(float(v), 6)


def seed_off_curve(member: Mapping[str, Any], pooled: Mapping[str, Any]) -> ev.Verdict:
    """Fire while the group fit reports this seed off the recipe's curve; clear when not."""
    cur = ev.a_interval(member)
    details = {
        "run_id": member.get("run_id"),
        "run_name": member.get("name"),
        "offset": _r(member.get("offset")),
        "offset_ci": [_r(v) for v in member.get("offset_ci") or []] or None,
        "reason": member.get("reason") or "",
        "included": member.get("included"),
        "group_A": _r(pooled.get("A")),
        "A_before": _r(pooled.get("A")),  # the recipe's A, beside the seed's own
        "A_after": _r(cur[0]) if cur else None,
    }
    if member.get("off_curve"):
        why = member.get("reason") or "it is off the recipe's curve"
        return ev.Verdict(True, f"seed {member.get('name')} fell off the group's curve: {why}",
                          details)
    return ev.Verdict(False, "", details)


def evaluate_group(
    store: Store,
    apply: Applier,
    item: DirtyGroup,
    members: list[dict[str, Any]],
    fit: dict[str, Any],
    previous: dict[str, Any] | None,
) -> None:
    """Evaluate every rule naming this group on its new fit of the members' fit metric."""
    if {m.get("fit_metric") for m in members} != {item.metric}:
        return  # a fit of another metric someone looked at, not the group's own
    rules = store.rules_for_group(item.project, item.group, GROUP_KINDS)
    if not rules:
        return
    active = store.active_group_alerts(item.project, item.group)
    fit_id = fit.get("fit_id")
    for rule in rules:
        params, kind = rule["params"], rule["kind"]
        on = (rule["id"], None) in active
        if kind == "asymptote_drop":
            best = store.best_ok_group_fit(item.group_series_id)
            apply(rule, None, ev.asymptote_drop(params, fit, best, on), fit_id, item.group)
        elif kind == "asymptote_below":
            apply(rule, None, ev.asymptote_below(params, fit, previous, on), fit_id, item.group)
        elif kind == "seed_off_curve":
            seen = set()
            for member in fit.get("members") or []:
                if member.get("run_id") is None:
                    continue
                seen.add(int(member["run_id"]))
                apply(rule, int(member["run_id"]), seed_off_curve(member, fit), fit_id,
                      item.group)
            # A seed that left the group (or was deleted) no longer belongs to its alert.
            for rule_id, run_id in active:
                if rule_id == rule["id"] and run_id is not None and run_id not in seen:
                    apply(rule, run_id, ev.Verdict(False, "", {"reason": "left the group"}),
                          fit_id, item.group)
