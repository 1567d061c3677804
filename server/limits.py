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
    MAX_METRIC_NAME_LENGTH,
    MAX_METRICS_PER_POINT,
    MAX_NAME_LENGTH,
    MAX_POINTS_PER_REQUEST,
    MAX_STEP,
    MAX_TAG_LENGTH,
    MAX_TAGS,
    MAX_UNIT_LENGTH,
    VALUE_RANGE_LIMIT,
    VALUE_RANGE_WIDTH,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_BODY_BYTES",
    "MAX_COMPARE_RUNS",
    "MAX_CONFIG_BYTES",
    "MAX_DOWNSAMPLE_POINTS",
    "MAX_EXPENSIVE_READS_PER_TOKEN",
    "MAX_FIT_POINTS",
    "MAX_GROUP_LENGTH",
    "MAX_GZIP_MEMBERS",
    "MAX_INFLATED_BYTES",
    "MAX_JSON_CONTAINERS",
    "MAX_JSON_DEPTH",
    "MAX_JSON_VALUES",
    "MAX_METRICS_PER_POINT",
    "MAX_METRIC_NAME_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_NOTES_LENGTH",
    "MAX_PAGE_SIZE",
    "MAX_PAPER_FIT_POINTS",
    "MAX_POINTS_PAGE",
    "MAX_POINTS_PER_REQUEST",
    "MAX_RAW_POINTS",
    "MAX_SERIES_PER_RUN",
    "MAX_STEP",
    "MAX_TAGS",
    "MAX_TAG_LENGTH",
    "MAX_TOKEN_PROJECTS",
    "MAX_UNIT_LENGTH",
    "VALUE_RANGE_LIMIT",
    "VALUE_RANGE_WIDTH",
]

# Cap on what a gzip body may inflate to (zip bombs); the raw cap is MAX_BODY_BYTES.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
# Members of one gzip body (RFC 1952: a body may be several, all read). A client compresses a
# batch as one, or a few when it streams; each member costs a copy of the rest of the body, so
# 800k empty members (16 MB of 20-byte ones) would take minutes.
MAX_GZIP_MEMBERS = 16
# The shape of a JSON body, checked on its bytes (as it is inflated) before it is parsed
# (server/jsonbounds.py): a parser builds an object per bracket, so 62 MB of brackets became
# 3 GB. An ingest batch nests 4 deep and holds 2 containers and at most
# MAX_METRICS_PER_POINT + 4 values a point; these bounds leave room for every valid batch.
MAX_JSON_DEPTH = 32
MAX_JSON_CONTAINERS = 4 * MAX_POINTS_PER_REQUEST
MAX_JSON_VALUES = 2 * MAX_POINTS_PER_REQUEST * (MAX_METRICS_PER_POINT + 4)
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
# Distinct metric names (series) one run may hold. Nothing else bounds them: a client that makes
# up a new name per step (`loss/step_123`) would add a series row, its index entries, a summary
# to update, fit work and dashboard memory per name, without end. A real trainer logs tens to a
# few hundred metrics. Checked by the store where series are created (`points_sql`), so every
# ingest path (the points API and its trainer client and followers, MLflow's log-metric and
# log-batch) meets it: a batch that would bring the run past it is refused whole (REST 422,
# MLflow 400 INVALID_PARAMETER_VALUE); points of names the run already has are always taken.
# Read at call time (`limits.MAX_SERIES_PER_RUN`), so tests may lower it.
MAX_SERIES_PER_RUN = 10_000
# POST /api/v1/tokens and `scalewatch token create --project`: projects one token may be limited to.
MAX_TOKEN_PROJECTS = 100

# The MLflow-compatible API (/api/2.0/mlflow). MLflow's own limits where it has them
# (mlflow/utils/validation.py, mlflow/store/tracking), so its official client never meets them;
# ours where it sets none. Larger inputs are a 400 INVALID_PARAMETER_VALUE.
MAX_MLFLOW_KEY_LENGTH = 250  # param, tag and metric keys (MAX_ENTITY_KEY_LENGTH)
MAX_MLFLOW_PARAM_VALUE_LENGTH = 6_000  # MAX_PARAM_VAL_LENGTH
MAX_MLFLOW_TAG_VALUE_LENGTH = 8_000  # MAX_TAG_VAL_LENGTH
# Tags of one runs/create: MLflow sets no count (its autologging can create a run with
# hundreds); the body's size and object caps bound it. 100 refused a start_run(tags=...)
# of 97 user tags, to which the client adds its 4 system tags.
MAX_MLFLOW_RUN_TAGS = 1000
MAX_MLFLOW_SEARCH_EXPERIMENTS = 100  # experiment_ids of one runs/search (MLflow sets none)
MAX_MLFLOW_SEARCH_RESULTS = 50_000  # max_results above is a 400 (SEARCH_MAX_RESULTS_THRESHOLD)
MAX_MLFLOW_FILTER_LENGTH = 4_096  # runs/search filter string
# Artifacts (mlflow-artifacts:/ uploads) are accepted and discarded, streamed: no size cap is
# needed for memory or disk, and a refusal would raise in the trainer (see routes/mlflow.py).

# Stateless fits and comparisons one token may run at once (the default of
# SCALEWATCH_EXPENSIVE_READS_PER_TOKEN); more at once are a 429 with Retry-After.
MAX_EXPENSIVE_READS_PER_TOKEN = 2

# Dashboard callbacks (`dashboard/callback_guard.py` checks every `_dash-update-component`
# request against these before Dash runs it).
MAX_ID = 2**31 - 1  # every id column is 32-bit (as the API's ID_MAX)
MAX_DASHBOARD_ROWS = 5_000  # rows of a dashboard table sent back with a callback (CSV export)
MAX_BUDGET = 1e30  # a compute budget typed on the Compare page (FLOPs of the largest runs ~1e26)
