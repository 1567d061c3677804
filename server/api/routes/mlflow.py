"""The MLflow-compatible tracking API: `MLFLOW_TRACKING_URI=http://scalewatch:8765` is the whole
integration for trainers that log to MLflow (verl, TRL / HF Trainer, NeMo-RL, SkyRL).

Serves the calls the official client makes while tracking (experiments get-by-name / create /
get, runs create / get / update / search / log-batch / log-metric / log-parameter / set-tag,
metrics get-history) in MLflow's wire format and error shape, artifact uploads (accepted and
discarded: `mlflow_artifacts.py`); everything else under `/api/2.0/mlflow` and
`/api/2.0/mlflow-artifacts` answers `ENDPOINT_NOT_FOUND`. The mapping
itself lives in `server/api/mlflow_compat.py`. Auth is the REST API's: `RequestGuard` checks
the token (bearer, or basic with the token as password) before a body is read; each call here
checks its scope (reads: read, logging: write).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, cast

from fastapi import APIRouter, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from scalewatch.server import limits
from scalewatch.server.api.deps import wake_refitter
from scalewatch.server.api.guards import token_from_header
from scalewatch.server.api.mlflow_compat import (
    COMPUTE_UNIT,
    DEFAULT_EXPERIMENT_ID,
    DEFAULT_EXPERIMENT_NAME,
    MAX_BATCH_ENTITIES,
    MAX_BATCH_METRICS,
    MAX_BATCH_PARAMS,
    MAX_BATCH_TAGS,
    RUN_STATUS,
    MlflowError,
    check_params,
    check_tags,
    checked_text,
    experiment_json,
    invalid,
    merged_config,
    metric_rows,
    parse_run_id,
    printable,
    run_info,
    run_json,
    tag_changes,
)
from scalewatch.server.config import Settings
from scalewatch.server.domain.checks import parse_id
from scalewatch.server.domain.runs import Project, Run
from scalewatch.server.ingest import IngestError
from scalewatch.server.scopes import SCOPE_RANK
from scalewatch.server.services.runs import update_run
from scalewatch.server.store import NotFound
from scalewatch.server.store.base import InvalidName, NameTaken, RunQuery, Store
from scalewatch.server.store.scoped import ProjectDenied, scoped

PREFIX = "/api/2.0/mlflow"
router = APIRouter(prefix=PREFIX, include_in_schema=False)
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
MAX_HISTORY_PAGE = 25_000  # what the client asks for per get-history page
MAX_SEARCH_RESULTS = 1_000

Payload = dict[str, Any]
Handler = Callable[[Store, Payload], Payload]


def authorize(request: Request, scope: str) -> Store:
    """MLflowError unless the request's token (bearer or basic) has `scope`; the store as
    that token may use it (limited to its projects when it is project-scoped: an experiment
    of another project does not exist for it)."""
    settings: Settings = request.app.state.settings
    if not settings.auth:
        return request.app.state.store
    token = token_from_header(request.headers.get("authorization"), allow_basic=True)
    info = (
        request.app.state.token_cache.get(request.app.state.store, token) if token else None
    )
    if info is None:
        raise MlflowError("UNAUTHENTICATED", "missing, unknown or revoked token")
    if SCOPE_RANK[info.scope] < SCOPE_RANK[scope]:
        raise MlflowError(
            "PERMISSION_DENIED", f"this token has scope '{info.scope}'; '{scope}' is needed"
        )
    return cast(Store, scoped(request.app.state.store, info))


async def _payload(request: Request) -> Payload:
    if request.method == "GET":
        return dict(request.query_params)
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise invalid("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise invalid("request body must be a JSON object")
    return body


async def _serve(request: Request, scope: str, handler: Handler) -> JSONResponse:
    try:
        payload = await _payload(request)

        def work() -> Payload:
            return handler(authorize(request, scope), payload)

        result = await run_in_threadpool(work)
    except MlflowError as exc:
        return JSONResponse(exc.body(), status_code=exc.status)
    except ProjectDenied as exc:
        return JSONResponse({"error_code": "PERMISSION_DENIED", "message": str(exc)}, 403)
    except NotFound as exc:
        return JSONResponse(
            {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": printable(str(exc))},
            status_code=404,
        )
    except IngestError as exc:
        return JSONResponse(
            {"error_code": "INVALID_PARAMETER_VALUE", "message": printable(exc.message)},
            status_code=400 if exc.status < 500 else exc.status,
        )
    points = result.pop("_points", 0)
    refit = result.pop("_refit", False)
    if points:
        request.app.state.metrics.points_ingested(points)
        if refit:  # else the refitter has nothing new to do
            wake_refitter(request)
    return JSONResponse(result)


def _str(
    payload: Payload, key: str, required: bool = True, max_length: int = limits.MAX_NAME_LENGTH
) -> str:
    """A text parameter, under the REST API's text checks (`checked_text`)."""
    value = payload.get(key)
    if value is None or value == "":
        if required:
            raise invalid(f"Missing value for required parameter '{key}'.")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise invalid(f"'{key}' must be a string")
    return checked_text(value, f"'{key}'", max_length)


# --- experiments -------------------------------------------------------------------------------


def _project_of_experiment(store: Store, experiment_id: str) -> Project:
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        # MLflow's client logs to experiment "0" when none was set: it always exists.
        return store.create_project(DEFAULT_EXPERIMENT_NAME)[0]
    project_id = parse_id(experiment_id)
    found = store.get_project(project_id=project_id) if project_id is not None else None
    if found is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"No Experiment with id={experiment_id} exists"
        )
    return found


def _experiment_id(store: Store, project_name: str) -> str:
    project = store.get_project(name=project_name)
    return experiment_json(project)["experiment_id"] if project else DEFAULT_EXPERIMENT_ID


def _get_by_name(store: Store, p: Payload) -> Payload:
    name = _str(p, "experiment_name")
    if name == DEFAULT_EXPERIMENT_NAME:
        return {"experiment": experiment_json(store.create_project(name)[0])}
    project = store.get_project(name=name)
    if project is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with name '{name}'"
        )
    return {"experiment": experiment_json(project)}


def _create_experiment(store: Store, p: Payload) -> Payload:
    name = _str(p, "name")
    project, created = store.create_project(name)
    if not created:
        raise MlflowError(
            "RESOURCE_ALREADY_EXISTS", f"Experiment(name={name}) already exists."
        )
    return {"experiment_id": experiment_json(project)["experiment_id"]}


def _get_experiment(store: Store, p: Payload) -> Payload:
    return {"experiment": experiment_json(_project_of_experiment(store, _str(p, "experiment_id")))}


# --- runs --------------------------------------------------------------------------------------


def _run_id(p: Payload) -> int:
    return parse_run_id(p.get("run_id") or p.get("run_uuid"))


def _create_run(store: Store, p: Payload) -> Payload:
    project = _project_of_experiment(store, _str(p, "experiment_id", required=False) or "0")
    tags = check_tags(_list(p, "tags", limits.MAX_MLFLOW_RUN_TAGS))
    name = _str(p, "run_name", required=False)
    if not name:
        tagged = next((t["value"] for t in tags if t["key"] == "mlflow.runName"), "")
        name = (checked_text(tagged, "tag mlflow.runName", limits.MAX_NAME_LENGTH)
                if tagged else time.strftime("run-%Y%m%d-%H%M%S"))
    changes = tag_changes(None, tags)
    run = store.create_run_unique(
        project.name,
        name,
        compute_unit=COMPUTE_UNIT,
        tags=changes.get("tags") or [],
        fit_metric=changes.get("fit_metric"),
        target_compute=changes.get("target_compute"),
        group=changes.get("group"),
    )
    return {"run": run_json(run, experiment_json(project)["experiment_id"])}


def _get_run(store: Store, p: Payload) -> Payload:
    run = store.get_run(_run_id(p))
    return {"run": run_json(run, _experiment_id(store, run.project))}


def _update_run(store: Store, p: Payload) -> Payload:
    run_id = _run_id(p)
    changes: dict[str, Any] = {}
    if p.get("status"):
        status = RUN_STATUS.get(str(p["status"]))
        if status is None:
            raise invalid(f"unknown run status {p['status']!r}")
        changes["status"] = status
    # `MlflowClient.update_run(name=...)`, and `mlflow.start_run(run_id=..., run_name=...)`
    # resuming a run; an empty run_name leaves the name (as in MLflow).
    name = _str(p, "run_name", required=False)
    run = (_update_named(store, run_id, changes, name) if changes or name
           else store.get_run(run_id))
    return {"run_info": run_info(run, _experiment_id(store, run.project))}


_SUFFIX = re.compile(r"(?P<base>.*) \((?P<n>[0-9]+)\)", re.DOTALL)


def _created_as(current: str, asked: str) -> bool:
    """Whether a run named `current` is what runs/create made of the name `asked`: the name
    itself or, as it was taken, `asked (n)` (its start cut to fit the name's length)."""
    if current == asked:
        return True
    m = _SUFFIX.fullmatch(current)
    return m is not None and (m["base"] == asked or (
        len(current) == limits.MAX_NAME_LENGTH and asked.startswith(m["base"])))


def _update_named(
    store: Store, run_id: int, changes: dict[str, Any], name: str,
    merge: Callable[[Run], dict[str, Any]] | None = None,
) -> Run:
    """`update_run` (`changes`, `merge`), renaming the run to `name` too when one is given
    (runs/update's run_name, the mlflow.runName tag): through the store's rename and its name
    checks, in the same transaction. A name another run of the project has is
    RESOURCE_ALREADY_EXISTS and nothing is written, except for the name the run was created
    under: a run that runs/create named `grpo (2)` keeps that name when a resume sends "grpo"
    again (`mlflow.start_run(run_id=..., run_name="grpo")`), and the rest is applied."""
    try:
        return update_run(store, run_id, {**changes, "name": name} if name else changes,
                          merge=merge)
    except InvalidName as exc:
        raise invalid(f"run_name: {exc}") from None
    except NameTaken as exc:
        if not name or not _created_as(store.get_run(run_id).name, name):
            raise MlflowError("RESOURCE_ALREADY_EXISTS", str(exc)) from None
    if changes or merge is not None:
        return update_run(store, run_id, changes, merge=merge)
    return store.get_run(run_id)


def _tagged_name(tags: list[dict[str, str]]) -> str:
    """The run name an mlflow.runName tag sets after creation (the last one; "" for none)."""
    values = [t["value"] for t in tags if t["key"] == "mlflow.runName" and t["value"]]
    return checked_text(values[-1], "tag mlflow.runName", limits.MAX_NAME_LENGTH) if values else ""


def _log(
    store: Store, run_id: int, metrics: list[Any], params: list[Any], tags: list[Any]
) -> Payload:
    if len(metrics) > MAX_BATCH_METRICS:
        raise invalid(
            f"A batch logging request can contain at most {MAX_BATCH_METRICS} metrics. "
            f"Got {len(metrics)} metrics."
        )
    if len(params) > MAX_BATCH_PARAMS:
        raise invalid(f"A batch logging request can contain at most {MAX_BATCH_PARAMS} params. "
                      f"Got {len(params)} params.")
    if len(tags) > MAX_BATCH_TAGS:
        raise invalid(f"A batch logging request can contain at most {MAX_BATCH_TAGS} tags. "
                      f"Got {len(tags)} tags.")
    if len(metrics) + len(params) + len(tags) > MAX_BATCH_ENTITIES:
        raise invalid(
            f"A batch logging request can contain at most {MAX_BATCH_ENTITIES} metrics, params "
            f"and tags in total. Got {len(metrics)} metrics, {len(params)} params and "
            f"{len(tags)} tags.")
    # Everything is checked before anything is stored.
    rows, _skipped = metric_rows(metrics)
    params, tags = check_params(params), check_tags(tags)
    name = _tagged_name(tags)

    def merge(run: Run) -> dict[str, Any]:
        # Computed from the run as it is under its lock: concurrent log-batch calls of one
        # run each add their params and tags, none overwrites another's with a stale copy.
        changes: dict[str, Any] = tag_changes(run, tags) if tags else {}
        config = merged_config(run.config, params, run.id) if params else None
        if config is not None:
            changes["config"] = config
        return changes

    if rows and (params or tags):
        # The params and tags are written first, in a transaction of their own: a batch whose
        # metric keys would bring the run past its bound on metric names
        # (limits.MAX_SERIES_PER_RUN) is refused before they are, so it writes nothing.
        store.check_new_series(run_id, sorted({r.metric for r in rows}))
    if params or tags:
        _update_named(store, run_id, {}, name, merge=merge)
    else:
        store.get_run(run_id)  # RESOURCE_DOES_NOT_EXIST before anything is stored
    refit = bool(rows) and store.ingest_points(run_id, rows).refit
    return {"_points": len(rows), "_refit": refit}


def _list(p: Payload, key: str, max_items: int | None = None) -> list[Any]:
    value = p.get(key) or []
    if not isinstance(value, list):
        raise invalid(f"'{key}' must be a list")
    if max_items is not None and len(value) > max_items:
        raise invalid(f"'{key}' may hold at most {max_items} items, got {len(value)}")
    return value


def _log_batch(store: Store, p: Payload) -> Payload:
    return _log(store, _run_id(p), _list(p, "metrics"), _list(p, "params"), _list(p, "tags"))


def _log_metric(store: Store, p: Payload) -> Payload:
    metric = {k: p.get(k) for k in ("key", "value", "timestamp", "step")}
    return _log(store, _run_id(p), [metric], [], [])


def _log_param(store: Store, p: Payload) -> Payload:
    return _log(store, _run_id(p), [], [{"key": p.get("key"), "value": p.get("value")}], [])


def _set_tag(store: Store, p: Payload) -> Payload:
    return _log(store, _run_id(p), [], [], [{"key": p.get("key"), "value": p.get("value")}])


# attributes.run_name = 'x', tags.mlflow.runName = "x", attributes.status = 'FINISHED', joined
# by AND: the filters the tracking integrations use to find a run again.
_CLAUSE = re.compile(
    r"""^\s*(?:attributes\.|attribute\.|run\.)?(?P<key>run_name|status|tags\.mlflow\.runName|"""
    r"""tags\.`mlflow\.runName`)\s*=\s*(?P<q>['"])(?P<value>.*?)(?P=q)\s*$""",
    re.IGNORECASE,
)


def _parse_filter(text: str) -> dict[str, str]:
    wanted: dict[str, str] = {}
    if not text.strip():
        return wanted
    for clause in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE):
        m = _CLAUSE.match(clause)
        if m is None:
            raise invalid(
                f"unsupported filter {clause!r}: scalewatch filters on run_name, "
                "tags.mlflow.runName and status equality"
            )
        key = "status" if m["key"].lower() == "status" else "name"
        wanted[key] = checked_text(m["value"], "the filter's value", limits.MAX_NAME_LENGTH,
                                   blank=True)
    return wanted


def _search_runs(store: Store, p: Payload) -> Payload:
    """Runs of the experiments asked, experiment by experiment, a page at a time: each
    experiment costs one counted, limited query, never a read of all its runs."""
    exp_ids = list(dict.fromkeys(
        checked_text(e, "experiment_ids[]", limits.MAX_NAME_LENGTH)
        for e in _list(p, "experiment_ids", limits.MAX_MLFLOW_SEARCH_EXPERIMENTS)
    ))
    text = p.get("filter") or ""
    if not isinstance(text, str) or len(text) > limits.MAX_MLFLOW_FILTER_LENGTH:
        raise invalid(f"'filter' must be a string of at most {limits.MAX_MLFLOW_FILTER_LENGTH} "
                      "characters")
    wanted = _parse_filter(text)
    status = None
    if "status" in wanted:
        status = RUN_STATUS.get(wanted["status"].upper())
        if status is None:
            return {"runs": []}
    max_results, offset = _page(p, MAX_SEARCH_RESULTS, limits.MAX_MLFLOW_SEARCH_RESULTS)
    found: list[Payload] = []
    skip, more = offset, False
    for exp_id in exp_ids:
        try:
            project = _project_of_experiment(store, exp_id)
        except (MlflowError, NotFound):  # NotFound: Default, to a project-scoped token
            continue
        runs, total = store.list_runs(
            RunQuery(project=project.name, status=status, name=wanted.get("name"),
                     limit=max_results - len(found), offset=skip)
        )
        found.extend(run_json(r, exp_id) for r in runs)
        if total > skip + len(runs):  # this experiment has runs past the page
            more = True
            break
        skip = max(0, skip - total)
    out: Payload = {"runs": found}
    if more:
        out["next_page_token"] = str(offset + len(found))
    return out


def _page(p: Payload, cap: int, most: int) -> tuple[int, int]:
    """(max_results clamped to 1..cap, page_token) of a paged MLflow call: max_results above
    `most` (MLflow's own threshold), or a page token that is not a step-sized integer, is a
    400 (a 10**400 token would overflow the database's integer)."""
    raw_max, raw_token = p.get("max_results"), p.get("page_token")
    try:
        max_results = int(raw_max) if raw_max not in (None, "") else cap
        token = int(raw_token) if raw_token not in (None, "") else 0
    except (TypeError, ValueError, OverflowError):
        raise invalid("max_results and page_token must be integers") from None
    if not 1 <= max_results <= most:
        raise invalid(f"max_results must be between 1 and {most}, got {max_results}")
    if not 0 <= token <= limits.MAX_STEP:
        raise invalid("page_token is not a token this server gave out")
    return min(max_results, cap), token


def _get_history(store: Store, p: Payload) -> Payload:
    run = store.get_run(_run_id(p))
    key = _str(p, "metric_key", max_length=limits.MAX_METRIC_NAME_LENGTH)
    max_results, since = _page(p, MAX_HISTORY_PAGE, limits.MAX_MLFLOW_SEARCH_RESULTS)
    if key not in run.latest:
        return {"metrics": []}
    page = store.get_points(run.id, key, since_step=since, limit=max_results, wall_times=True)
    walls = page.wall_times or [None] * len(page.steps)
    out: Payload = {
        "metrics": [
            # The time it was logged (ms), as MLflow answers; 0 where the sender gave none.
            {"key": key, "value": v, "timestamp": round(w * 1000) if w is not None else 0,
             "step": s}
            for s, v, w in zip(page.steps, page.values, walls, strict=True)
        ]
    }
    if page.downsampled and page.steps:  # with a limit: more points follow
        out["next_page_token"] = str(page.steps[-1] + 1)
    return out


_ROUTES: list[tuple[str, str, str, Handler]] = [
    ("GET", "/experiments/get-by-name", "read", _get_by_name),
    ("POST", "/experiments/create", "write", _create_experiment),
    ("GET", "/experiments/get", "read", _get_experiment),
    ("POST", "/runs/create", "write", _create_run),
    ("GET", "/runs/get", "read", _get_run),
    ("POST", "/runs/update", "write", _update_run),
    ("POST", "/runs/log-batch", "write", _log_batch),
    ("POST", "/runs/log-metric", "write", _log_metric),
    ("POST", "/runs/log-parameter", "write", _log_param),
    ("POST", "/runs/set-tag", "write", _set_tag),
    ("POST", "/runs/search", "read", _search_runs),
    ("GET", "/metrics/get-history", "read", _get_history),
]


def _endpoint(scope: str, handler: Handler) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> JSONResponse:
        return await _serve(request, scope, handler)

    endpoint.__name__ = f"mlflow_{handler.__name__.strip('_')}"
    return endpoint


for _method, _path, _scope, _handler in _ROUTES:
    router.add_api_route(_path, _endpoint(_scope, _handler), methods=[_method])


async def _not_served(request: Request) -> JSONResponse:
    # Logged models, traces, registry...: MLflow's "no such endpoint" answer, which
    # its client reports without retrying; metric logging never depends on these.
    return JSONResponse(
        {
            "error_code": "ENDPOINT_NOT_FOUND",
            "message": f"{request.method} {request.url.path} is not served by scalewatch",
        },
        status_code=404,
    )


def install_mlflow(app: FastAPI) -> None:
    """Mount the MLflow-compatible routes, then the catch-all for every other MLflow call
    (after them, so a known path with the wrong method is 'not found' too, as in MLflow)."""
    # Imported here: the artifact routes use this module's `authorize`.
    from scalewatch.server.api.routes.mlflow_artifacts import router as artifacts_router

    app.include_router(router)
    app.include_router(artifacts_router)
    for prefix in (PREFIX, "/api/2.0/mlflow-artifacts"):
        app.add_api_route(
            prefix + "/{rest:path}", _not_served, methods=_ALL_METHODS, include_in_schema=False
        )
