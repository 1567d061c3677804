"""The alert rule kinds: one enum for the API, the rule validator, the evaluator and the dashboard.

Standard library only, so every layer (database models, API schemas, dashboard) can import it.
"""

from __future__ import annotations

from enum import Enum


class AlertKind(str, Enum):
    """What an alert rule watches. Members are named by their value (the stored string)."""

    asymptote_drop = "asymptote_drop"
    asymptote_below = "asymptote_below"
    below_baseline = "below_baseline"
    stalled = "stalled"
    off_curve = "off_curve"
    seed_off_curve = "seed_off_curve"


ALERT_KINDS: tuple[str, ...] = tuple(k.value for k in AlertKind)
# Kinds evaluated after every stored fit of a run (`stalled` runs on a timer instead;
# `seed_off_curve` watches a group).
FIT_KINDS: tuple[str, ...] = tuple(
    k.value for k in AlertKind if k not in (AlertKind.stalled, AlertKind.seed_off_curve)
)
# Kinds a rule naming a group may have: evaluated after every stored fit of the group (the
# A rules on its pooled fit, `seed_off_curve` on each member).
GROUP_KINDS: tuple[str, ...] = (
    AlertKind.asymptote_drop.value, AlertKind.asymptote_below.value,
    AlertKind.seed_off_curve.value,
)
# Kinds that only make sense for a group.
GROUP_ONLY_KINDS: tuple[str, ...] = (AlertKind.seed_off_curve.value,)
