"""Every request limit of the API, in one module (as MLflow keeps its own).

The limits the trainer client checks too live in :mod:`trainer_client.limits` (standard library
only, so the client can ship without the server) and are re-exported here; the rest are
server-only.
"""

from __future__ import annotations

from trainer_client.limits import (
    MAX_BODY_BYTES,
    MAX_CONFIG_BYTES,
    MAX_GROUP_LENGTH,
    MAX_METRICS_PER_POINT,
    MAX_NAME_LENGTH,
    MAX_POINTS_PER_REQUEST,
    MAX_STEP,
    MAX_TAG_LENGTH,
    MAX_TAGS,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_BODY_BYTES",
    "MAX_COMPARE_RUNS",
    "MAX_CONFIG_BYTES",
    "MAX_GROUP_LENGTH",
    "MAX_DOWNSAMPLE_POINTS",
    "MAX_FIT_POINTS",
    "MAX_INFLATED_BYTES",
    "MAX_METRICS_PER_POINT",
    "MAX_NAME_LENGTH",
    "MAX_NOTES_LENGTH",
    "MAX_PAGE_SIZE",
    "MAX_PAPER_FIT_POINTS",
    "MAX_POINTS_PAGE",
    "MAX_POINTS_PER_REQUEST",
    "MAX_RAW_POINTS",
    "MAX_STEP",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
]

# Cap on what a gzip body may inflate to (zip bombs); the raw cap is MAX_BODY_BYTES.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
MAX_NOTES_LENGTH = 20_000
MAX_PAGE_SIZE = 1_000
DEFAULT_PAGE_SIZE = 100
MAX_DOWNSAMPLE_POINTS = 100_000
MAX_RAW_POINTS = 1_000_000  # a points query without max_points returns at most this many
# GET /runs/{id}/points without max_points: one page of at most this many points, ordered by
# step; `next_since_step` in the answer continues it.
MAX_POINTS_PAGE = 10_000
MAX_FIT_POINTS = 100_000  # POST /api/v1/fit
# POST /api/v1/fit with method "paper": its grid of curve fits costs milliseconds per point, so
# larger requests are thinned to this many points (evenly spaced in compute order).
MAX_PAPER_FIT_POINTS = 500
MAX_COMPARE_RUNS = 20

# Dashboard callbacks (`dashboard/callback_guard.py` checks every `_dash-update-component`
# request against these before Dash runs it).
MAX_ID = 2**31 - 1  # every id column is 32-bit (as the API's ID_MAX)
MAX_DASHBOARD_ROWS = 5_000  # rows of a dashboard table sent back with a callback (CSV export)
MAX_BUDGET = 1e30  # a compute budget typed on the Compare page (FLOPs of the largest runs ~1e26)
