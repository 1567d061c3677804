"""MLflow tracking objects <-> scalewatch runs: the mapping the `/api/2.0/mlflow` routes share.

Experiment -> project (experiment id = the project's id; "0", MLflow's Default experiment, is
the project "Default"), MLflow run id = the scalewatch run id (as a string), run name -> run
name, params -> config, tags -> tags ("key=value"; `mlflow.*` system tags are not kept),
metrics -> points at their step with compute = step (unit "steps"), `runs/update` status ->
status. Pure functions: no web or database here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from scalewatch.server import limits
from scalewatch.server.api.schemas.common import check_free_text, clean_text
from scalewatch.server.domain.checks import parse_id
from scalewatch.server.domain.runs import Project, Run
from scalewatch.server.ingest import PointRow, check_name

# MLflow's own request limits (mlflow/utils/validation.py, `_validate_batch_log_limits`):
# the official client splits larger calls into batches of these sizes (pairing up to 100
# params with up to 100 tags in one request), so a larger batch is not from it.
MAX_BATCH_METRICS = 1000
MAX_BATCH_PARAMS = 100
MAX_BATCH_TAGS = 100
MAX_BATCH_ENTITIES = 1000

DEFAULT_EXPERIMENT_ID = "0"
# Artifact URIs the official client resolves against its tracking URI: uploads go to
# `<tracking URI>/api/2.0/mlflow-artifacts/artifacts/<path>` with the tracking credentials.
ARTIFACT_SCHEME = "mlflow-artifacts:"
DEFAULT_EXPERIMENT_NAME = "Default"
COMPUTE_UNIT = "steps"

# Tags that steer scalewatch rather than label the run.
TAG_FIT_METRIC = "scalewatch.fit_metric"
TAG_TARGET_COMPUTE = "scalewatch.target_compute"
# The run's group (its recipe). Only this tag: a plain `group` tag stays a `group=...` label,
# since moving runs into pooled fits is not something a label someone set should do by itself.
TAG_GROUP = "scalewatch.group"

# MLflow's error codes and the HTTP status its server answers them with.
STATUS_OF = {
    "INVALID_PARAMETER_VALUE": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "BAD_REQUEST": 400,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "INTERNAL_ERROR": 500,
    "TEMPORARILY_UNAVAILABLE": 503,
}

# runs/update status -> ours; SCHEDULED/RUNNING keep a run running.
RUN_STATUS = {
    "RUNNING": "running",
    "SCHEDULED": "running",
    "FINISHED": "finished",
    "FAILED": "failed",
    "KILLED": "failed",
}
MLFLOW_STATUS = {"running": "RUNNING", "finished": "FINISHED", "failed": "FAILED"}


class MlflowError(Exception):
    """Answered as MLflow's `{"error_code", "message"}` with its HTTP status."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = STATUS_OF.get(error_code, 400)

    def body(self) -> dict[str, str]:
        return {"error_code": self.error_code, "message": printable(self.message)}


def printable(message: str) -> str:
    """`message` as text JSON can carry: a message that quotes the request (an unknown run id,
    a bad key) may hold a lone surrogate, which would fail the response itself (a 500)."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def invalid(message: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def checked_text(value: Any, what: str, max_length: int, blank: bool = False) -> str:
    """A text field of an MLflow request, under the REST API's text checks: valid UTF-8 (no
    lone surrogate, which would turn every later response showing it into a 500), no NUL
    (PostgreSQL text cannot hold it), at most `max_length` characters, not blank unless
    `blank`. Numbers are taken as their text, as MLflow's client sends some values."""
    if value is None:
        value = ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise invalid(f"{what} must be a string")
    text = str(value)
    if len(text) > max_length:
        raise invalid(f"{what} is longer than {max_length} characters")
    try:
        if blank:
            check_free_text(text, what)
        else:
            clean_text(text, what)
    except ValueError as exc:
        raise invalid(str(exc)) from None
    return text


def experiment_json(project: Project) -> dict[str, Any]:
    exp_id = (
        DEFAULT_EXPERIMENT_ID
        if project.name == DEFAULT_EXPERIMENT_NAME
        else str(project.id)
    )
    return {
        "experiment_id": exp_id,
        "name": project.name,
        # MLflow's proxied artifact scheme: the client sends artifacts to this server's
        # /api/2.0/mlflow-artifacts routes, which accept and discard them (routes/mlflow.py).
        "artifact_location": f"{ARTIFACT_SCHEME}/{exp_id}",
        "lifecycle_stage": "active",
        "tags": [],
    }


def parse_run_id(raw: Any) -> int:
    """The scalewatch run id behind an MLflow run id (RESOURCE_DOES_NOT_EXIST otherwise)."""
    text = str(raw or "")
    run_id = parse_id(text)
    if run_id is None:
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run '{text}' not found")
    return run_id


def _millis(iso_time: str | None) -> int | None:
    if not iso_time:
        return None
    from datetime import datetime

    return int(datetime.fromisoformat(iso_time).timestamp() * 1000)


def tag_pairs(run: Run) -> list[dict[str, str]]:
    """The run's tags as MLflow key/value pairs ("k=v" -> k, v; a bare tag has value "")."""
    out = []
    for tag in run.tags:
        key, _, value = str(tag).partition("=")
        out.append({"key": key, "value": value})
    out.append({"key": "mlflow.runName", "value": run.name})
    out.append({"key": TAG_FIT_METRIC, "value": run.fit_metric})
    if run.group:
        out.append({"key": TAG_GROUP, "value": run.group})
    return out


def run_info(run: Run, experiment_id: str) -> dict[str, Any]:
    run_id = str(run.id)
    info: dict[str, Any] = {
        "run_id": run_id,
        "run_uuid": run_id,
        "run_name": run.name,
        "experiment_id": experiment_id,
        "user_id": "",
        "status": MLFLOW_STATUS.get(run.status, "RUNNING"),
        "start_time": _millis(run.created_at) or 0,
        "artifact_uri": f"{ARTIFACT_SCHEME}/{experiment_id}/{run_id}/artifacts",
        "lifecycle_stage": "active",
    }
    if run.status != "running":
        info["end_time"] = _millis(run.last_seen_at) or 0
    return info


def run_json(run: Run, experiment_id: str) -> dict[str, Any]:
    step = run.last_step or 0
    return {
        "info": run_info(run, experiment_id),
        "data": {
            "metrics": [
                {"key": k, "value": v, "timestamp": 0, "step": step}
                for k, v in run.latest.items()
                if v is not None
            ],
            "params": [
                {"key": str(k), "value": v if isinstance(v, str) else json.dumps(v)}
                for k, v in run.config.items()
            ],
            "tags": tag_pairs(run),
        },
        "inputs": {},
    }


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise invalid(f"{what} must be an integer")
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        # int() would truncate 1.7 to 1 and overwrite step 1 (MLflow refuses it: an int64)
        raise invalid(f"{what} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: Infinity
        raise invalid(f"{what} must be an integer, got {value!r}") from None


def _wall_time(ts: Any, what: str) -> float | None:
    """A metric's timestamp (ms since the epoch) as seconds; None when absent or not positive
    (MLflow's client always sends one; a missing one must not fail logging)."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts <= 0:
        return None
    try:
        wall = float(ts) / 1000.0
    except OverflowError:  # an integer beyond float range, e.g. 10**400
        raise invalid(f"{what} must be milliseconds since the epoch") from None
    if not math.isfinite(wall):
        raise invalid(f"{what} must be a finite number")
    return wall


def metric_rows(metrics: Iterable[Any]) -> tuple[list[PointRow], int]:
    """MLflow metrics -> one point per (key, step), the last one of the batch winning (as a
    repeated log does on the server's upsert), compute = step. Non-finite values are skipped
    and counted: MLflow stores NaN, our series cannot, and a NaN loss must not fail logging."""
    rows: dict[tuple[str, int], PointRow] = {}
    skipped = 0
    for i, m in enumerate(metrics):
        if not isinstance(m, Mapping):
            raise invalid(f"metrics[{i}] must be an object")
        key = m.get("key")
        if not isinstance(key, str) or not key:
            raise invalid(f"metrics[{i}].key is required")
        problem = check_name(key)  # the REST API's checks of a metric name
        if problem is not None:
            raise invalid(f"metrics[{i}].key: {problem}")
        # Absent (or null) is step 0, as MLflow's client and server have it; anything else
        # must be an integer (a `[]` or `""` read as 0 overwrote step 0).
        step = 0 if m.get("step") is None else _int(m["step"], f"metrics[{i}].step")
        if not 0 <= step <= limits.MAX_STEP:
            raise invalid(f"metrics[{i}].step must be between 0 and {limits.MAX_STEP}")
        raw = m.get("value")
        if isinstance(raw, bool):  # float(True) is 1.0: a flag, not a measurement
            raise invalid(f"metrics[{i}].value must be a number, got {raw!r}")
        try:
            value = float(raw)  # type: ignore[arg-type]  # checked just below
        except (TypeError, ValueError, OverflowError):  # OverflowError: 10**400
            raise invalid(f"metrics[{i}].value must be a number within float range") from None
        if not math.isfinite(value):
            skipped += 1
            continue
        wall = _wall_time(m.get("timestamp"), f"metrics[{i}].timestamp")
        rows[(key, step)] = PointRow(key, step, float(step), value, wall)
    return list(rows.values()), skipped


def _key_value(i: int, item: Any, kind: str, max_value: int) -> dict[str, str]:
    if not isinstance(item, Mapping) or not isinstance(item.get("key"), str) or not item["key"]:
        raise invalid(f"{kind}[{i}] needs a key")
    key = checked_text(item["key"], f"{kind}[{i}].key", limits.MAX_MLFLOW_KEY_LENGTH)
    value = checked_text(item.get("value"), f"{kind}[{i}].value", max_value, blank=True)
    return {"key": key, "value": value}


def check_params(params: Iterable[Any]) -> list[dict[str, str]]:
    """MLflow params as checked key/value pairs (a missing value is "")."""
    return [_key_value(i, p, "params", limits.MAX_MLFLOW_PARAM_VALUE_LENGTH)
            for i, p in enumerate(params)]


def check_tags(tags: Iterable[Any]) -> list[dict[str, str]]:
    """MLflow tags as checked key/value pairs (a missing value is "")."""
    return [_key_value(i, t, "tags", limits.MAX_MLFLOW_TAG_VALUE_LENGTH)
            for i, t in enumerate(tags)]


def _same_param(stored: Any, value: str) -> bool:
    """A config value (a param, or a value the REST API or a follower stored) read as a param:
    MLflow's client sends str(value), so 0.001 stored as a number is the param "0.001"."""
    return stored == value or (not isinstance(stored, str) and str(stored) == value)


def merged_config(config: Mapping[str, Any], params: Iterable[Any], run_id: int
                  ) -> dict[str, Any] | None:
    """The run's config with the params added (None when nothing changes).

    A param is logged once: a different value for a key the run (or the same batch) already
    has is refused, as MLflow's server refuses it (INVALID_PARAMETER_VALUE), so a resumed
    run with a changed learning rate is not silently recorded as the new value alone."""
    out = dict(config)
    changed = False
    for p in check_params(params):
        key, value = p["key"], p["value"]
        if key in out and not _same_param(out[key], value):
            raise invalid(
                f"Changing param values is not allowed. Param with key='{key}' was already "
                f"logged with value='{out[key]}' for run ID='{run_id}'. Attempted logging new "
                f"value '{value}'.")
        if key not in out:
            out[key] = value
            changed = True
    if not changed:
        return None
    if len(json.dumps(out)) > limits.MAX_CONFIG_BYTES:
        raise invalid(f"params exceed the run's config limit ({limits.MAX_CONFIG_BYTES} bytes)")
    return out


def tag_changes(run: Run | None, tags: Iterable[Any]) -> dict[str, Any]:
    """What MLflow tags change on the run: `tags` (k=v labels), `fit_metric`, `target_compute`,
    `group` (`scalewatch.group`; an empty value takes the run out of its group).

    `mlflow.*` tags (user, source, git commit, run name) are the client's bookkeeping, not
    labels anyone filters runs by, and would use up the run's 50 tags: not kept. A label that
    would not fit a tag (100 characters) keeps its key only. `run`: None for a run about to
    be created."""
    current = list(run.tags) if run is not None else []
    by_key = {str(t).partition("=")[0]: n for n, t in enumerate(current)}
    changes: dict[str, Any] = {}
    for t in check_tags(tags):
        key, value = t["key"], t["value"]
        if key == TAG_FIT_METRIC:
            if check_name(value) is not None:
                raise invalid(f"{TAG_FIT_METRIC} must be a metric name")
            changes["fit_metric"] = value
            continue
        if key == TAG_GROUP:
            if len(value) > limits.MAX_GROUP_LENGTH or "\x00" in value:
                raise invalid(f"{TAG_GROUP} must be at most {limits.MAX_GROUP_LENGTH} characters")
            if value and not value.strip():
                raise invalid(f"{TAG_GROUP} must not be blank")
            if value != ((run.group if run is not None else None) or ""):
                changes["group"] = value or None
            continue
        if key == TAG_TARGET_COMPUTE:
            try:
                target = float(value)
            except ValueError:
                raise invalid(f"{TAG_TARGET_COMPUTE} must be a number") from None
            if not (math.isfinite(target) and target > 0):
                raise invalid(f"{TAG_TARGET_COMPUTE} must be positive")
            changes["target_compute"] = target
            continue
        if key.startswith("mlflow."):
            continue
        label = f"{key}={value}" if value else key
        if len(label) > limits.MAX_TAG_LENGTH:
            label = key[: limits.MAX_TAG_LENGTH]
        if key in by_key:
            if current[by_key[key]] == label:
                continue
            current[by_key[key]] = label
        elif len(current) >= limits.MAX_TAGS:
            continue  # the run's tag budget is spent; metrics never fail over a label
        else:
            by_key[key] = len(current)
            current.append(label)
        changes["tags"] = current
    return changes
