"""Alert rule kinds and their parameters: defaults, and validation with readable errors."""

from __future__ import annotations

import math
from typing import Any

from scalewatch.server.alerts.kinds import ALERT_KINDS, AlertKind

# kind -> {param: (default or None when required, minimum exclusive, maximum inclusive, type)}
PARAMS: dict[AlertKind, dict[str, tuple[Any, float, float, type]]] = {
    # The paper's margin for "different asymptote".
    AlertKind.asymptote_drop: {"delta": (0.02, 0.0, 1e6, float)},
    AlertKind.asymptote_below: {"threshold": (None, -1e12, 1e12, float)},
    AlertKind.below_baseline: {"baseline_run_id": (None, 0, 2**31 - 1, int)},
    AlertKind.stalled: {"minutes": (None, 0.0, 60 * 24 * 365, float)},
    AlertKind.off_curve: {"n": (3, 0, 1000, int), "k": (4.0, 0.0, 1e6, float)},
    AlertKind.seed_off_curve: {},
}
KIND_HELP: dict[AlertKind, str] = {
    AlertKind.asymptote_drop: "the fitted A fell at least `delta` below the best A of the run, "
    "beyond noise (the A intervals no longer overlap)",
    AlertKind.asymptote_below: "the upper end of A's 95% interval is below `threshold`",
    AlertKind.below_baseline: "A's interval lies wholly below the A of `baseline_run_id`",
    AlertKind.stalled: "a running run has logged no points for `minutes`",
    AlertKind.off_curve: "the last `n` points are more than `k` residual scales off the last good "
    "fit, all on the same side (collapse, divergence)",
    AlertKind.seed_off_curve: "(a group rule) one seed of the group fell off the recipe's curve: "
    "it broke, or its ceiling is clearly off the group's pooled A; one alert per seed",
}
assert set(PARAMS) == set(KIND_HELP) == set(AlertKind)


class RuleError(ValueError):
    """A rule that cannot work; the message says why (an API 422)."""


def normalize_params(kind: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """Params of `kind` with defaults filled in; raises RuleError naming every problem."""
    if kind not in ALERT_KINDS:
        raise RuleError(f"unknown kind {kind!r}; expected one of {', '.join(ALERT_KINDS)}")
    kind = AlertKind(kind).value  # a plain string in the messages below, member or not
    spec = PARAMS[AlertKind(kind)]
    params = dict(params or {})
    problems = []
    unknown = sorted(set(params) - set(spec))
    if unknown:
        problems.append(
            f"unknown parameter(s) {', '.join(map(ascii, unknown))} for kind {kind} "
            f"(allowed: {', '.join(spec) or 'none'})"
        )
    out: dict[str, Any] = {}
    for name, (default, low, high, typ) in spec.items():
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
