"""Minimal keep-alive HTTP transport for the scalewatch client (standard library only).

One :class:`Connection` wraps one ``http.client`` connection that is reused across requests
and re-opened after any network error. Every socket operation has a timeout, so a stalled
server can delay a request by at most ``timeout`` seconds per socket operation; it never
hangs a thread forever. Nothing here retries except a single immediate retry when a
*reused* keep-alive connection turns out to have been closed by the server; retry policy
(backoff, Retry-After) lives in :mod:`trainer_client.sender`.
"""

from __future__ import annotations

import contextlib
import email.utils
import gzip
import http.client
import json
import random
import socket
import time
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit

__all__ = [
    "Connection",
    "Response",
    "TransportError",
    "backoff_delay",
    "parse_retry_after",
    "is_retryable_status",
    "error_text",
]

USER_AGENT = "scalewatch-client/0.1"


class TransportError(Exception):
    """The request did not produce an HTTP response (refused, reset, timed out, ...)."""


class Response(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


def error_text(r: Response, limit: int = 300) -> str:
    """``HTTP 422: <the server's detail> (<field>: <problem>; ...)``: what a person reads,
    never a bytes repr. The server's errors carry ``detail`` and per-field ``errors``; a body
    of another shape (a proxy's page) is shown as text."""
    text = ""
    try:
        obj = r.json()
    except ValueError:
        obj = None
    if isinstance(obj, dict) and obj.get("detail"):
        detail = obj["detail"]
        text = detail if isinstance(detail, str) else json.dumps(detail)
        problems = [f"{e.get('loc')}: {e.get('msg')}" if e.get("loc") else str(e.get("msg"))
                    for e in obj.get("errors") or [] if isinstance(e, dict)]
        if problems:
            text += " (" + "; ".join(problems) + ")"
    elif r.body:
        text = " ".join(r.body[:2000].decode("utf-8", "replace").split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"HTTP {r.status}: {text}" if text else f"HTTP {r.status}"


def transport_reason(exc: BaseException) -> str:
    """Why no HTTP answer came, in words ("connection refused", "timed out")."""
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror}" if exc.strerror else "unknown host"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def is_retryable_status(status: int) -> bool:
    """408, 429 and every 5xx are worth retrying; everything else is final."""
    return status in (408, 429) or 500 <= status <= 599


def backoff_delay(attempt: int, base: float = 0.5, cap: float = 30.0, rng=random.random) -> float:
    """Exponential backoff with full jitter: uniform(0, min(cap, base * 2**attempt))."""
    return rng() * min(cap, base * (2.0 ** min(attempt, 30)))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class Connection:
    """A reusable HTTP(S) connection to one scalewatch server. Not thread-safe: one per thread."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 10.0):
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {url!r}")
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _open(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # closing must never raise
                conn.close()

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Response:
        """Send one request; raise :class:`TransportError` if no HTTP response came back."""
        hdrs = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if headers:
            hdrs.update(headers)
        target = self.prefix + path
        if params:
            target += "?" + urlencode({k: v for k, v in params.items() if v is not None})
        for attempt in (0, 1):
            reused = self._conn is not None
            try:
                if self._conn is None:
                    self._conn = self._open()
                self._conn.request(method, target, body=body, headers=hdrs)
                resp = self._conn.getresponse()
                data = resp.read()
                result = Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
                if resp.will_close:
                    self.close()
                return result
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                stale = isinstance(
                    exc,
                    (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError),
                )
                if reused and stale and attempt == 0:
                    continue  # the server closed an idle keep-alive connection: reconnect once
                raise TransportError(transport_reason(exc)) from exc
        raise TransportError("unreachable")  # pragma: no cover

    def post_json(self, path: str, obj: Any, compress: bool = False) -> Response:
        raw = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if compress:
            raw = gzip.compress(raw, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        return self.request("POST", path, body=raw, headers=headers)

    def get_json(self, path: str, params: dict[str, Any] | None = None) -> Response:
        return self.request("GET", path, params=params)
