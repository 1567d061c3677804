"""A rule's parameters checked against its kind's entry (`kinds.KINDS`), with readable errors."""

from __future__ import annotations

import math
from typing import Any

from scalewatch.server.alerts.kinds import ALERT_KINDS, spec_of


class RuleError(ValueError):
    """A rule that cannot work; the message says why (an API 422)."""


def normalize_params(kind: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """Params of `kind` with defaults filled in; raises RuleError naming every problem."""
    if kind not in ALERT_KINDS:
        raise RuleError(f"unknown kind {kind!r}; expected one of {', '.join(ALERT_KINDS)}")
    entry = spec_of(kind)
    kind, spec = entry.name, entry.params  # a plain string in the messages below
    params = dict(params or {})
    problems = []
    unknown = sorted(set(params) - set(spec))
    if unknown:
        problems.append(
            f"unknown parameter(s) {', '.join(map(ascii, unknown))} for kind {kind} "
            f"(allowed: {', '.join(spec) or 'none'})"
        )
    out: dict[str, Any] = {}
    for name, param in spec.items():
        default, low, high, typ = param.default, param.low, param.high, param.type
        value = params.get(name)
        if value is None:
            if default is None:
                problems.append(f"{kind} needs parameter {name!r}")
                continue
            out[name] = default
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{name} must be a number, got {value!r}")
            continue
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            # Beyond any column and beyond float range (float(10**400) raises).
            problems.append(f"{name} must be > {low:g} and <= {high:g}")
            continue
        if typ is int and (not float(value).is_integer()):
            problems.append(f"{name} must be an integer, got {value!r}")
            continue
        if not math.isfinite(float(value)) or not low < value <= high:
            problems.append(f"{name} must be > {low:g} and <= {high:g}, got {value!r}")
            continue
        out[name] = typ(value)
    if problems:
        raise RuleError("; ".join(problems))
    return out
