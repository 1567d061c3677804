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


ALERT_KINDS: tuple[str, ...] = tuple(k.value for k in AlertKind)
# Kinds evaluated after every stored fit (`stalled` runs on a timer instead).
FIT_KINDS: tuple[str, ...] = tuple(k.value for k in AlertKind if k is not AlertKind.stalled)
