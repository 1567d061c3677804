"""Request limits the client and the server share (standard library only).

The server enforces these (``server/limits.py`` imports them from here, next to its server-only
limits); the client checks the same numbers at the call site, so a bad point raises in
``log()`` instead of getting a whole batch rejected later. One module, so the two cannot drift.
"""

from __future__ import annotations

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_CONFIG_BYTES",
    "MAX_GROUP_LENGTH",
    "MAX_METRICS_PER_POINT",
    "MAX_METRIC_NAME_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_POINTS_PER_REQUEST",
    "MAX_STEP",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "MAX_UNIT_LENGTH",
    "VALUE_RANGE_LIMIT",
    "VALUE_RANGE_WIDTH",
]

MAX_POINTS_PER_REQUEST = 10_000
MAX_METRICS_PER_POINT = 100
# Raw request body cap, compressed or not.
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_NAME_LENGTH = 200  # project and run names
# Metric names: as long as MLflow's metric keys (its MAX_ENTITY_KEY_LENGTH), so no key an MLflow
# client logs gets its batch refused.
MAX_METRIC_NAME_LENGTH = 250
MAX_TAGS = 50
MAX_TAG_LENGTH = 100
# A run's group (its recipe, e.g. "cispo-768"): a short label shown beside run names.
MAX_GROUP_LENGTH = 100
MAX_UNIT_LENGTH = 32  # a run's compute_unit ("gpu_hours", "flops", a counter's name)
MAX_CONFIG_BYTES = 256 * 1024  # a run's config, as JSON
MAX_STEP = 2**62  # steps are stored as BIGINT
# A run's value_range (the range its fitted metric lives in): the fit's thresholds scale with
# its width, and the engine gives the decisions of the same run in [0, 1] for widths in this
# span (tests/fitting/test_value_scale.py); narrower or wider, its noise floors and float
# arithmetic no longer do.  Its ends lie within +-VALUE_RANGE_LIMIT.
VALUE_RANGE_WIDTH = (1e-3, 1e9)
VALUE_RANGE_LIMIT = 1e12
