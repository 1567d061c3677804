"""MLflow's proxied artifact routes (`mlflow-artifacts:` URIs), so `mlflow.log_artifact` and
friends (log_text, log_dict, log_figure, HF's checkpoint logging) do not raise in the trainer.

Runs' artifact URIs are `mlflow-artifacts:/<experiment>/<run>/artifacts/...`, which the official
client (2.x and 3.x) resolves against its tracking URI: uploads arrive here as
`PUT /api/2.0/mlflow-artifacts/artifacts/<path>` with the tracking credentials.

Uploads are accepted and discarded, streamed (never buffered, never written to disk):
scalewatch forecasts runs from their metrics and nothing in it reads an artifact, while storing
them would add a disk to fill and file paths to police. Refusing them, or capping their size,
would raise in the trainer's `log_artifact` call mid-run, which is the failure this module
exists to prevent. So listing shows no files and a download is `RESOURCE_DOES_NOT_EXIST`,
saying why. The request guard lets these PUTs through its JSON-only and body-size rules
(`guards.is_artifact_upload`); the token check applies as everywhere under /api/2.0/mlflow.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from scalewatch.server.api.guards import ARTIFACT_UPLOAD_PREFIX
from scalewatch.server.api.mlflow_compat import MlflowError
from scalewatch.server.api.routes.mlflow import authorize

log = logging.getLogger("scalewatch")
router = APIRouter(prefix="/api/2.0/mlflow-artifacts", include_in_schema=False)
ARTIFACTS = ARTIFACT_UPLOAD_PREFIX.removeprefix(router.prefix).rstrip("/")  # "/artifacts"
NOT_STORED = (
    "scalewatch accepts MLflow artifacts and discards them (it keeps metrics, params and tags "
    "only); log artifacts to a store of their own to keep them"
)


async def _allowed(request: Request, scope: str) -> JSONResponse | None:
    """None when the request's token has `scope`; else MLflow's refusal."""
    try:
        await run_in_threadpool(authorize, request, scope)
    except MlflowError as exc:
        return JSONResponse(exc.body(), status_code=exc.status)
    return None


@router.put(ARTIFACTS + "/{path:path}")
async def upload_artifact(request: Request, path: str) -> JSONResponse:
    refused = await _allowed(request, "write")
    if refused is not None:
        return refused
    size = 0
    async for chunk in request.stream():  # drained chunk by chunk: constant memory
        size += len(chunk)
    log.debug("MLflow artifact upload of %d bytes discarded", size)
    return JSONResponse({})


@router.get(ARTIFACTS)
async def list_artifacts(request: Request) -> JSONResponse:
    refused = await _allowed(request, "read")
    return refused or JSONResponse({"files": []})


@router.get(ARTIFACTS + "/{path:path}")
async def download_artifact(request: Request, path: str) -> JSONResponse:
    refused = await _allowed(request, "read")
    return refused or JSONResponse(
        {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": NOT_STORED}, status_code=404
    )


# The client's answer-to-fall-back for multipart uploads (MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD
# with files over MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE): 501 with this message makes 2.x
# and 3.x send the file as one PUT above; any other answer would raise in the trainer.
MULTIPART_UNSUPPORTED = "Multipart upload is not supported for the current artifact repository"


@router.post("/mpu/create/{path:path}")
async def create_multipart_upload(request: Request, path: str) -> JSONResponse:
    refused = await _allowed(request, "write")
    return refused or JSONResponse(
        {"error_code": "NOT_IMPLEMENTED", "message": MULTIPART_UNSUPPORTED}, status_code=501
    )
