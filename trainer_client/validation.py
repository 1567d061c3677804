"""Argument checks of ``init()`` and ``log()``: fail at the call site, not in a rejected batch.

Bad argument types or values are programming errors and raise ``TypeError`` / ``ValueError`` at
once; the limits are the server's (:mod:`trainer_client.limits`). The hot path of ``log()``
inlines the cheap checks for plain ``float``/``int`` arguments and calls the helpers here only
for anything else, so these may be slower and precise.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

from .compute import ComputeMeter
from .limits import (
    MAX_CONFIG_BYTES,
    MAX_GROUP_LENGTH,
    MAX_METRIC_NAME_LENGTH,
    MAX_NAME_LENGTH,
    MAX_STEP,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    MAX_UNIT_LENGTH,
    VALUE_RANGE_LIMIT,
    VALUE_RANGE_WIDTH,
)

__all__ = [
    "RateLimitedWarning",
    "bad_metric_name",
    "metric_name_problem",
    "name_problem",
    "check_group",
    "check_name",
    "check_tags",
    "check_unit",
    "check_value_range",
    "json_config",
    "to_compute",
    "to_float",
    "to_step",
]

logger = logging.getLogger("scalewatch")


class RateLimitedWarning:
    """Log a warning at most once per ``period`` seconds, with the count since the last one."""

    def __init__(self, template: str, period: float = 60.0) -> None:
        self.template = template
        self.period = period
        self.count = 0
        self.next_at = 0.0

    def hit(self, **kw: Any) -> None:
        self.count += 1
        now = time.monotonic()
        if now >= self.next_at:
            self.next_at = now + self.period
            logger.warning(self.template.format(count=self.count, **kw))
            self.count = 0


def check_name(label: str, value: Any, most: int = MAX_NAME_LENGTH) -> str:
    """A project or run name (or, with ``most``, a metric name) the server will take (its
    `run_names.check_run_name`): refused here, at `init`, rather than by the server later,
    when the run's points are already spooled under a name no server accepts."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{label} must be a non-empty string, got {value!r}")
    problem = name_problem(value, most)
    if problem:
        raise ValueError(f"{label} {problem}")
    return value


def check_value_range(value_range: Any) -> list[float]:
    """``[low, high]`` if the server accepts ``value_range`` as a run's (finite, low < high);
    raises otherwise."""
    bad = TypeError(f"value_range must be two numbers (low, high), got {value_range!r}")
    try:
        if isinstance(value_range, (str, bytes)):
            raise bad
        pair = list(value_range)
    except TypeError:
        raise bad from None
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, numbers.Real)
                             for v in pair):
        raise bad  # not ("0", "1"), not True: a number each, as the server's JSON takes
    try:
        lo, hi = float(pair[0]), float(pair[1])
    except OverflowError:  # an int beyond float's range, e.g. 10**400
        lo = hi = math.inf
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"value_range must be finite with low < high, got {value_range!r}")
    least, most = VALUE_RANGE_WIDTH
    if not least <= hi - lo <= most or max(abs(lo), abs(hi)) > VALUE_RANGE_LIMIT:
        raise ValueError(f"value_range must be {least:g} to {most:g} wide with ends within "
                         f"+-{VALUE_RANGE_LIMIT:g}, got {value_range!r} (rescale the metric)")
    return [lo, hi]


def check_unit(unit: Any) -> str:
    """``unit`` if the server accepts it as a run's compute_unit; raises otherwise."""
    if not isinstance(unit, str):
        raise TypeError(f"compute_unit must be a string, got {type(unit).__name__}")
    if not unit.strip() or len(unit) > MAX_UNIT_LENGTH or "\x00" in unit:
        raise ValueError(f"compute_unit must be a non-blank string of <= {MAX_UNIT_LENGTH} "
                         f"characters without NUL, got {unit!r}")
    return unit


def check_group(group: Any) -> str:
    """``group`` if the server accepts it as a run's group (its recipe); raises otherwise."""
    if not isinstance(group, str):
        raise TypeError(f"group must be a string, got {type(group).__name__}")
    if not group.strip() or len(group) > MAX_GROUP_LENGTH or "\x00" in group:
        raise ValueError(
            f"group must be a non-blank string of <= {MAX_GROUP_LENGTH} characters without NUL,"
            f" got {group!r}"
        )
    return group


def check_tags(tags: Any) -> list[str]:
    """A copy of ``tags`` if it is a list of strings the server accepts; raises otherwise."""
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise TypeError("tags must be a list of strings")
    if len(tags) > MAX_TAGS or any(
        not t or len(t) > MAX_TAG_LENGTH or "\x00" in t for t in tags
    ):
        raise ValueError(
            f"tags: at most {MAX_TAGS} non-empty strings of <= {MAX_TAG_LENGTH} characters"
        )
    return list(tags)


def name_problem(k: str, most: int) -> str | None:
    """What the server would refuse in the name ``k`` (a metric name with ``most`` =
    ``MAX_METRIC_NAME_LENGTH``; a project or run name with ``MAX_NAME_LENGTH``), or None."""
    if not k:
        return "must not be empty"
    if len(k) > most:
        return f"has {len(k)} characters; at most {most}"
    if "\x00" in k:
        return "must not contain NUL characters"
    if not k.isascii():
        try:
            k.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, e.g. json.loads('"\\udfff"')
            return "must be valid UTF-8 (a lone surrogate?)"
    return None


def metric_name_problem(k: str) -> str | None:
    """What the server would refuse in the metric name ``k``, or None."""
    return name_problem(k, MAX_METRIC_NAME_LENGTH)


def bad_metric_name(k: Any) -> None:
    """Raise the error for ``k`` if it is no valid metric name (``log()`` calls it only when
    its own inline check fails; a new set of names is checked with it directly)."""
    if not isinstance(k, str):
        raise TypeError(f"metric names must be strings, got {type(k).__name__}")
    problem = metric_name_problem(k)
    if problem:
        raise ValueError(f"metric name {k!r} {problem}")


def to_float(key: str, v: Any) -> float:
    """Slow path of ``log()`` for values that are not plain floats."""
    if type(v) is int:
        return float(v)
    if isinstance(v, (str, bytes, bytearray)) or v is None:
        raise TypeError(f"metric {key!r}: value must be a real number, got {type(v).__name__}")
    try:
        return float(v)  # bool, numpy scalars, 0-d tensors, Decimal, Fraction ...
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"metric {key!r}: value must be a real number, got {type(v).__name__}"
        ) from exc


def to_step(step: Any) -> int:
    if isinstance(step, bool):
        raise TypeError("step must be an int, got bool")
    try:
        s = step.__index__()  # int subclasses, numpy integers
    except AttributeError:
        raise TypeError(f"step must be an int, got {type(step).__name__}") from None
    if s < 0 or s > MAX_STEP:
        raise ValueError(f"step must be in [0, 2**62], got {s}")
    return int(s)


def to_compute(compute: Any) -> float:
    if isinstance(compute, ComputeMeter):
        c = compute.value
    elif isinstance(compute, (str, bytes, bool)):
        raise TypeError(f"compute must be a number or a ComputeMeter, got {type(compute).__name__}")
    elif callable(compute):
        c = compute()
    else:
        try:
            c = float(compute)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"compute must be a number or a ComputeMeter, got {type(compute).__name__}"
            ) from exc
    c = float(c)
    if not math.isfinite(c) or c < 0:
        raise ValueError(f"compute must be a finite number >= 0, got {c!r}")
    return c


def json_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy of ``config`` the server accepts (objects -> str, NaN/inf -> None).

    A config larger than the server's 256 KiB limit is cut down to its top-level scalars
    (with a warning) rather than letting the run registration fail.
    """

    def clean(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k).replace("\x00", ""): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            return [clean(x) for x in v]
        if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
            return v.replace("\x00", "") if isinstance(v, str) else v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        try:
            f = float(v)  # numpy scalars
            return f if math.isfinite(f) else None
        except (TypeError, ValueError):
            return str(v).replace("\x00", "")

    out: dict[str, Any] = clean(config)
    if len(json.dumps(out)) > MAX_CONFIG_BYTES:
        logger.warning("scalewatch: config is larger than 256 KiB; only its top-level scalars "
                       "are sent")
        out = {k: v for k, v in out.items()
               if isinstance(v, (int, float, str, bool)) or v is None}
        out = {k: (v[:1000] if isinstance(v, str) else v) for k, v in out.items()}
        out["_scalewatch_truncated"] = True
    return out
