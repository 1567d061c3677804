"""Group rules: the verdict on one seed (the evaluation itself is `service.on_group_fit`).

Group rules are evaluated after every stored fit of a group (`GroupRefits` listeners):

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
from typing import Any

from scalewatch.server.alerts import evaluate as ev


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
