"""Every request limit of the API, in one module (as MLflow keeps its own)."""

from __future__ import annotations

MAX_POINTS_PER_REQUEST = 10_000
MAX_METRICS_PER_POINT = 100
# Raw body cap, compressed or not, and cap on what a gzip body may inflate to (zip bombs).
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_INFLATED_BYTES = 64 * 1024 * 1024
MAX_NAME_LENGTH = 200  # project, run and metric names
MAX_TAGS = 50
MAX_TAG_LENGTH = 100
MAX_CONFIG_BYTES = 256 * 1024
MAX_NOTES_LENGTH = 20_000
MAX_PAGE_SIZE = 1_000
DEFAULT_PAGE_SIZE = 100
MAX_DOWNSAMPLE_POINTS = 100_000
MAX_RAW_POINTS = 1_000_000  # a points query without max_points returns at most this many
MAX_STEP = 2**62  # steps are stored as BIGINT
MAX_FIT_POINTS = 100_000  # POST /api/v1/fit
MAX_COMPARE_RUNS = 20
