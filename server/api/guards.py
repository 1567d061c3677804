"""Request guards that apply to every route (pure ASGI: no cost to streamed ingest bodies).

`RequestGuard` is the one place request bodies are capped and the REST API's token is checked
before any body is read: an unauthenticated client can make the server read at most its
headers, and nobody can make it buffer more than `limits.MAX_BODY_BYTES`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scalewatch.server import limits
from scalewatch.server.api.errors import DATABASE_RETRY_AFTER
from scalewatch.server.background import is_database_outage, outage
from scalewatch.server.jsonbounds import JsonScanner, JsonShapeError

API_PREFIX = "/api/v1/"
# The MLflow-compatible tracking API (and its artifact routes, which answer "not served"): the
# same token check and JSON-only bodies, answered in MLflow's error shape, with HTTP basic auth
# accepted too because that is how MLflow's client sends MLFLOW_TRACKING_USERNAME/PASSWORD.
MLFLOW_PREFIX = "/api/2.0/mlflow"
# MLflow artifact uploads (PUT, any content type, any size): streamed and discarded by
# routes/mlflow_artifacts.py, so neither the JSON-only rule nor the body cap applies to them; a
# refusal would raise in the trainer's `mlflow.log_artifact` call.
ARTIFACT_UPLOAD_PREFIX = "/api/2.0/mlflow-artifacts/artifacts/"
_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


async def _send_json(send: Send, status: int, body: Any, headers: list[Any] | None = None) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def bearer_from_header(value: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the API takes nothing else)."""
    if not value:
        return None
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" and token.strip() else None


def token_from_header(value: str | None, allow_basic: bool = False) -> str | None:
    """The bearer token, or with `allow_basic` the password of `Authorization: Basic` (the user
    name is ignored: the password is the API token)."""
    token = bearer_from_header(value)
    if token is not None or not allow_basic or not value:
        return token
    kind, _, encoded = value.partition(" ")
    if kind.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    password = decoded.partition(":")[2]
    return password or None


def is_artifact_upload(scope: Scope) -> bool:
    return scope.get("method") == "PUT" and scope.get("path", "").startswith(
        ARTIFACT_UPLOAD_PREFIX
    )


def is_json_type(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class RequestGuard:
    """Before the app sees a request:

    * a body declared larger than `MAX_BODY_BYTES` is refused (413) unread, and a streamed
      (chunked) body is cut off at that size (413) however the route reads it;
    * `/api/v1/*` with auth on needs a valid bearer token (401) before its body is read; the
      route's dependency still checks the scope (403). The dashboard cookie is not accepted
      here, so a page on another origin cannot act through a signed-in browser (CSRF);
    * `/api/2.0/mlflow*` (MLflow's tracking API) the same, with basic auth accepted too (the
      password is the token; `errors.ErrorShape`, outermost, answers its refusals in MLflow's
      `{"error_code", "message"}` shape);
    * `/api/v1/*` bodies must be JSON (`Content-Type: application/json`, gzip allowed as
      Content-Encoding): 415 otherwise, which is also what a cross-site form would send.
    """

    def __init__(self, app: ASGIApp, state: Any) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_json(send, 400, {"detail": "invalid Content-Length"})
                return
            if size > limits.MAX_BODY_BYTES and not is_artifact_upload(scope):
                await _send_json(send, 413, {"detail": _too_large()})
                return
        path: str = scope.get("path", "")
        mlflow = path.startswith(MLFLOW_PREFIX)
        if path.startswith(API_PREFIX) or mlflow:
            settings = self.state.settings
            if settings.auth:
                token = token_from_header(_header(scope, b"authorization"), allow_basic=mlflow)
                if token is None:
                    await _send_json(
                        send,
                        401,
                        {"detail": "missing bearer token (Authorization: Bearer <token>)"},
                        [(b"www-authenticate", b"Bearer")],
                    )
                    return
                # A token the cache holds is checked here, on the event loop; only a miss
                # looks it up in the thread pool (a thread hop on every API request otherwise).
                cached, info = self.state.token_cache.peek(token)
                if not cached:
                    try:
                        info = await run_in_threadpool(
                            self.state.token_cache.get, self.state.store, token
                        )
                    except Exception as exc:
                        if not is_database_outage(exc):
                            raise
                        # Out here no exception handler runs: it was a 500 and a traceback
                        # per request while the database was gone. 503: clients retry.
                        outage.failed(exc)
                        await _send_json(
                            send,
                            503,
                            {"detail": "database unavailable, retry later"},
                            [(b"retry-after", str(DATABASE_RETRY_AFTER).encode())],
                        )
                        return
                    outage.ok(wrote=False)
                if info is None:
                    await _send_json(
                        send,
                        401,
                        {"detail": "unknown or revoked token"},
                        [(b"www-authenticate", b"Bearer")],
                    )
                    return
            has_body = (declared is not None and declared != "0") or (
                _header(scope, b"transfer-encoding") is not None
            )
            if (
                scope.get("method") in _BODY_METHODS
                and has_body
                and not is_json_type(_header(scope, b"content-type"))
                and not is_artifact_upload(scope)
            ):
                await _send_json(
                    send,
                    415,
                    {"detail": "request bodies must be JSON (Content-Type: application/json)"},
                )
                return
            if (
                scope.get("method") in _BODY_METHODS
                and has_body
                and _encoded(scope)
                and not is_points_route(path)
                and not is_artifact_upload(scope)
            ):
                # Only the points route inflates: elsewhere gzip bytes failed as "an error
                # parsing the body", which named neither the encoding nor where it is taken.
                await _send_json(send, 415, {"detail": _NOT_ENCODED})
                return
        if is_artifact_upload(scope):  # streamed and discarded: no cap, no JSON shape
            await self.app(scope, receive, send)
        else:
            await self.app(scope, _capped(receive, _shape_scanner(scope, path)), send)


_NOT_ENCODED = (
    "Content-Encoding is accepted only by POST /api/v1/runs/{id}/points; send this body "
    "unencoded"
)


def _encoded(scope: Scope) -> bool:
    """Whether the body carries a Content-Encoding other than identity (any case)."""
    return (_header(scope, b"content-encoding") or "identity").strip().lower() != "identity"


def is_points_route(path: str) -> bool:
    """POST /api/v1/runs/{id}/points: the one route that inflates and bounds its own body."""
    return path.startswith("/api/v1/runs/") and path.endswith("/points")


def _too_large() -> str:
    return f"body larger than {limits.MAX_BODY_BYTES} bytes"


def _shape_scanner(scope: Scope, path: str) -> JsonScanner | None:
    """A JSON body of the API gets its shape bounded (depth, containers, values) as it arrives,
    before FastAPI parses it on the event loop: a config nested 300 deep was stored and then
    failed every run list (500), and 16 MB of `[],` is 5 million lists. Not the points route
    (it bounds its own body, also when gzip-encoded, and its typed decode needs no scan), and
    not an encoded body (only the points route inflates; anywhere else it is not JSON)."""
    if (
        scope.get("method") not in _BODY_METHODS
        or not path.startswith((API_PREFIX, MLFLOW_PREFIX))
        or is_points_route(path)
        or _encoded(scope)
    ):
        return None
    return JsonScanner()


def _capped(receive: Receive, scanner: JsonScanner | None = None) -> Receive:
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > limits.MAX_BODY_BYTES:
                # Raised inside the route's body read: FastAPI re-raises HTTPException from
                # there and the exception middleware answers 413.
                raise HTTPException(413, _too_large())
            if scanner is not None and chunk:
                try:
                    scanner.feed(chunk)
                except JsonShapeError as exc:
                    raise HTTPException(exc.status, exc.message) from exc
        return message

    return wrapped


class RejectNulMiddleware:
    """A NUL in the query string (422) or in the URL path (a `%00` in `/projects/{name}`: 422;
    400 in MLflow's error shape under `/api/2.0/mlflow`): PostgreSQL text cannot hold it, so no
    filter can match it, SQLite would store it in a name, and letting it through would turn a
    bad request into a database error. One check here covers every route's path parameters."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope.get("path", "")
            where = (
                "query parameters" if b"%00" in scope.get("query_string", b"")
                else "the URL path" if "\x00" in path
                else None
            )
            if where is not None:
                message = f"{where} must not contain NUL characters"
                if path.startswith(MLFLOW_PREFIX):
                    await _send_json(
                        send, 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": message}
                    )
                else:
                    await _send_json(send, 422, {"detail": message})
                return
        await self.app(scope, receive, send)


# The dashboard is Dash: its renderer starts from one inline script and Plotly sets inline
# styles, so those two need 'unsafe-inline'; everything else comes from this origin only.
DASHBOARD_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
_HTML_PATHS = ("/dashboard", "/login", "/logout")


class SecurityHeaders:
    """nosniff and no framing on every response (clickjacking of the ack button); a content
    security policy on the dashboard and its login page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"same-origin"),
        ]
        if scope.get("path", "").startswith(_HTML_PATHS):
            extra.append((b"content-security-policy", DASHBOARD_CSP.encode()))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [
                    (k, v) for k, v in extra if k not in names
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


class HeadAsGet:
    """HEAD answered as the GET it mirrors, headers and status alike, without the body
    (RFC 9110 9.3.2): uptime monitors and `curl -I` probe with HEAD, and FastAPI routes only
    the methods they declare, so every GET answered 405 to it.  Runs outermost, so a HEAD
    meets the same guards, authentication and limits as its GET."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)
