"""Exception handlers: how errors raised below the routes become HTTP responses.

Every error the API answers has one shape (documented in the README):

    {"detail": "one sentence for a human", "code": "invalid_json", "errors": [{"loc", "msg"}]}

`detail` is always a string, `code` a stable machine-readable word (CODES), `errors` the
per-field problems of a 422 (`loc` a path such as "points[3].compute" or "query.limit"), empty
otherwise. Malformed JSON is a 400 `invalid_json` on every route. Routes do not catch the
store's `NotFound`: it becomes a 404 here. Responses built before a route runs (the request
guards) or by a route itself are brought into the same shape by `ErrorShape`, the outermost
middleware, so a new error site cannot drift.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scalewatch.server.background import is_database_outage, outage
from scalewatch.server.domain.checks import loc_text
from scalewatch.server.services.compare import MixedMetrics
from scalewatch.server.store import NotFound
from scalewatch.server.store.scoped import ProjectDenied

log = logging.getLogger("scalewatch")

# The `code` of an error by its status; a few errors name themselves more precisely.
CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "too_many_requests",
    500: "internal",
    503: "unavailable",
    504: "timeout",
}
INVALID_JSON = "invalid_json"
# Seconds a client is asked to wait when the database is unavailable (the trainer client
# retries a 503 with its own backoff, and keeps what it could not send in its spool).
DATABASE_RETRY_AFTER = 5


def error_code(status: int, detail: str = "") -> str:
    if status == 400 and "not valid JSON" in detail:
        return INVALID_JSON
    return CODES.get(status, "client_error" if status < 500 else "server_error")


def error_body(
    status: int, detail: str, errors: Sequence[dict[str, Any]] = (), code: str | None = None
) -> dict[str, Any]:
    """The one error shape of the API."""
    return {
        "detail": detail,
        "code": code or error_code(status, detail),
        "errors": [{"loc": str(e.get("loc", "")), "msg": str(e.get("msg", ""))} for e in errors],
    }


def error_response(
    status: int,
    detail: str,
    errors: Sequence[dict[str, Any]] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(status, detail, errors), status_code=status, headers=headers)


def normalize(status: int, content: Any) -> dict[str, Any]:
    """Any error body (`{"detail": str | list}`, FastAPI's or ours) in the one shape."""
    if isinstance(content, dict) and {"detail", "code", "errors"} <= content.keys():
        return content
    detail: Any = content.get("detail") if isinstance(content, dict) else content
    errors: list[dict[str, Any]] = []
    if isinstance(content, dict) and isinstance(content.get("errors"), list):
        errors = [e for e in content["errors"] if isinstance(e, dict)]
    if isinstance(detail, list):  # FastAPI's validation list
        errors = [
            {"loc": loc_text(e.get("loc", ())) if isinstance(e, dict) else "",
             "msg": e.get("msg", "") if isinstance(e, dict) else str(e)}
            for e in detail
        ]
        # Named, as the request-validation handler names them: "1 invalid field(s)" alone
        # (a route's own HTTPException, e.g. a rule's check) said nothing of where.
        detail = f"{len(errors)} invalid field(s): " + ", ".join(
            e["loc"] or "?" for e in errors[:5])
    if not isinstance(detail, str):
        detail = json.dumps(detail, default=str) if detail is not None else "error"
    return error_body(status, detail, errors)


async def not_found(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(404, str(exc))


async def project_denied(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(403, str(exc))  # a project-scoped token, another project's name


async def mixed_metrics(_request: Request, exc: Exception) -> JSONResponse:
    return error_response(422, str(exc))


async def http_error(_request: Request, exc: Exception) -> JSONResponse:
    # HTTPException from routes and dependencies (401 with WWW-Authenticate, 404s), and
    # Starlette's own 404/405 for unknown routes and methods.
    assert isinstance(exc, StarletteHTTPException)
    return JSONResponse(
        normalize(exc.status_code, {"detail": exc.detail}),
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def invalid_request(_request: Request, exc: Exception) -> JSONResponse:
    # Only location and message: echoing the input back would fail on NaN and could reflect
    # megabytes of payload.
    assert isinstance(exc, RequestValidationError)
    errs = exc.errors()
    bad_json = next((e for e in errs if e.get("type") == "json_invalid"), None)
    if bad_json is not None:
        # A body that does not parse is the same 400 on every route (the points route parses
        # its own body and says so in the same words).
        why = (bad_json.get("ctx") or {}).get("error", "")
        return error_response(400, f"body is not valid JSON: {why}".rstrip(": "))
    errors = [{"loc": loc_text(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in errs]
    if len(errors) == 1 and errors[0]["loc"] == "body":
        detail = f"body: {errors[0]['msg']}"
    else:
        detail = f"{len(errors)} invalid field(s): " + ", ".join(e["loc"] for e in errors[:5])
    return error_response(422, detail, errors)


async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal server error")


async def database_error(request: Request, exc: Exception) -> JSONResponse:
    # Any other driver error: an outage (read-only, full disk, a dropped connection) is a 503
    # like OperationalError; anything else a 500. Handled here rather than by the catch-all,
    # whose middleware re-raises after answering (a traceback in the log per request).
    if is_database_outage(exc):
        return await database_unavailable(request, exc)
    return await internal_error(request, exc)


async def bad_value(_request: Request, exc: Exception) -> JSONResponse:
    # The database refused a value the validators let through (e.g. out of range for its
    # column type). The transaction is rolled back, so nothing was stored.
    assert isinstance(exc, DataError)
    log.info("database rejected a value: %s", exc)
    return error_response(
        422, f"a value was rejected by the database: {str(exc.orig).splitlines()[0]}"
    )


async def database_unavailable(_request: Request, exc: Exception) -> JSONResponse:
    outage.failed(exc)  # logged once per outage, not once per request
    return error_response(
        503, "database unavailable, retry later",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
    )


async def nested_too_deeply(_request: Request, _exc: Exception) -> JSONResponse:
    # json.loads recurses per nesting level: 100k "[" would otherwise be a 500.
    return error_response(400, "body is not valid JSON: nested too deeply")


# MLflow's error code for a status (its client reads `error_code` and `message`).
MLFLOW_CODES = {400: "BAD_REQUEST", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "RESOURCE_DOES_NOT_EXIST", 413: "BAD_REQUEST", 415: "BAD_REQUEST",
                500: "INTERNAL_ERROR", 503: "TEMPORARILY_UNAVAILABLE"}  # fmt: skip


def mlflow_shape(status: int, content: Any) -> dict[str, Any]:
    """Any error body in MLflow's shape, `{"error_code", "message"}` (the MLflow routes' own
    errors already are; a request guard's 413 or a body-shape 400 was not)."""
    if isinstance(content, dict) and {"error_code", "message"} <= content.keys():
        return content
    ours = normalize(status, content)
    message = ours["detail"] + "".join(f"; {e['loc']}: {e['msg']}" for e in ours["errors"])
    code = MLFLOW_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_ERROR")
    return {"error_code": code, "message": message}


class ErrorShape:
    """Outermost middleware: a JSON error answered by anything below (request guards, a route's
    own JSONResponse) leaves in the one shape; under `/api/2.0/mlflow` in MLflow's, which its
    client parses. Error bodies are small; others pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The dashboard answers HTML.
        if scope["type"] != "http" or scope.get("path", "").startswith("/dashboard"):
            await self.app(scope, receive, send)
            return
        shape = mlflow_shape if scope.get("path", "").startswith("/api/2.0/mlflow") else normalize
        start: Message | None = None
        chunks: list[bytes] = []

        async def shaped(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                ctype = headers.get(b"content-type", b"")
                if message["status"] >= 400 and ctype.startswith(b"application/json"):
                    start = message  # hold it until the body is complete
                    return
            elif message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                await _send_shaped(send, start, b"".join(chunks), shape)
                return
            await send(message)

        await self.app(scope, receive, shaped)


async def _send_shaped(send: Send, start: Message, raw: bytes,
                       shape: Callable[[int, Any], dict[str, Any]]) -> None:
    try:
        body = json.dumps(shape(start["status"], json.loads(raw))).encode()
    except ValueError:  # not JSON after all: leave it as it was
        body = raw
    headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["detail", "code", "errors"],
    "properties": {
        "detail": {"type": "string", "description": "what went wrong, for a human"},
        "code": {"type": "string", "description": "stable, machine-readable: " + ", ".join(
            sorted({*CODES.values(), INVALID_JSON}))},
        "errors": {
            "type": "array",
            "description": "per-field problems (422), else empty",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {"loc": {"type": "string"}, "msg": {"type": "string"}},
            },
        },
    },
}


def _document_error_shape(app: FastAPI) -> None:
    """/docs shows the real error body: FastAPI's generated 422 schema is replaced by ours."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schemas = schema.get("components", {}).get("schemas", {})
            if "HTTPValidationError" in schemas:
                schemas["HTTPValidationError"] = ERROR_SCHEMA
                schemas.pop("ValidationError", None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _driver_errors() -> list[type[Exception]]:
    import sqlite3

    found: list[type[Exception]] = [sqlite3.Error]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installs
        return found
    return [*found, psycopg.Error]


def install_error_handlers(app: FastAPI) -> None:
    app.add_middleware(ErrorShape)
    _document_error_shape(app)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(RecursionError, nested_too_deeply)
    app.add_exception_handler(NotFound, not_found)
    app.add_exception_handler(ProjectDenied, project_denied)  # a NotFound, answered 403
    app.add_exception_handler(MixedMetrics, mixed_metrics)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(DataError, bad_value)
    app.add_exception_handler(OperationalError, database_unavailable)
    app.add_exception_handler(DisconnectionError, database_unavailable)
    app.add_exception_handler(PoolTimeout, database_unavailable)
    app.add_exception_handler(DBAPIError, database_error)
    for driver_error in _driver_errors():  # unwrapped: the PostgreSQL ingest uses psycopg
        app.add_exception_handler(driver_error, database_error)
