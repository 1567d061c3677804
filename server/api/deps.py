"""Request dependencies in one place: the store, and bearer-token auth with scopes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from scalewatch.server.api.guards import bearer_from_header
from scalewatch.server.config import Settings
from scalewatch.server.scopes import SCOPE_RANK
from scalewatch.server.store.base import Store, TokenStore


# Async, though they only read app state: FastAPI runs a plain `def` dependency in its thread
# pool, a thread hop per dependency per request.
async def get_store(request: Request) -> Store:
    return request.app.state.store


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


class TokenCache:
    """Tiny TTL cache so every ingest request does not cost a token lookup query."""

    def __init__(self, ttl: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        # ttl: seconds a verified token is trusted without a database round trip, which is how
        # long a revocation made by another process can take to apply here.
        self.ttl = ttl
        self.clock = clock
        self._lock = threading.Lock()
        self._items: dict[str, tuple[float, dict | None]] = {}

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, store: TokenStore, token: str) -> dict | None:
        """The record of an API token (None: unknown or revoked)."""
        return self._get("t:" + token, lambda: store.lookup_token(token))

    def peek(self, token: str) -> tuple[bool, dict | None]:
        """(True, what `get` would answer) when the token is cached and fresh, without any
        database lookup; else (False, None)."""
        with self._lock:
            hit = self._items.get("t:" + token)
            if hit and hit[0] > self.clock():
                return True, hit[1]
        return False, None

    def get_session(self, store: TokenStore, session_id: str) -> dict | None:
        """The token record behind a dashboard session (None: ended, expired or revoked)."""
        return self._get("s:" + session_id, lambda: store.lookup_session(session_id))

    def _get(self, key: str, lookup: Callable[[], dict | None]) -> dict | None:
        now = self.clock()
        with self._lock:
            hit = self._items.get(key)
            if hit and hit[0] > now:
                return hit[1]
        info = lookup()
        with self._lock:
            if len(self._items) > 10_000:
                self._items.clear()
            if self.ttl > 0:
                self._items[key] = (now + self.ttl, info)
        return info


def bearer_token(request: Request) -> str | None:
    # Bearer header only: the dashboard's session cookie is never accepted by the REST API, so
    # a page on another origin cannot act through a signed-in browser (CSRF).
    return bearer_from_header(request.headers.get("authorization"))


def authenticate(request: Request, scope: str) -> dict[str, Any] | None:
    """Return the token's record; 401 for a missing/unknown token, 403 for too small a scope."""
    settings: Settings = request.app.state.settings
    if not settings.auth:
        return None
    token = bearer_token(request)
    if not token:
        raise HTTPException(
            401,
            "missing bearer token (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    info = request.app.state.token_cache.get(request.app.state.store, token)
    return _in_scope(info, scope)


def _in_scope(info: dict[str, Any] | None, scope: str) -> dict[str, Any]:
    if info is None:
        raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})
    if SCOPE_RANK[info["scope"]] < SCOPE_RANK[scope]:
        raise HTTPException(403, f"this token has scope '{info['scope']}'; '{scope}' is needed")
    return info


def require(scope: str):  # noqa: ANN201 - a FastAPI dependency
    # Async: FastAPI runs a plain `def` dependency in its thread pool, a thread hop on every
    # API request (~0.5 ms of a 1,000-value ingest on 2 busy cores). Only a token the cache
    # does not hold needs the database, and that lookup goes to the thread pool.
    async def dependency(request: Request) -> dict[str, Any] | None:
        if not request.app.state.settings.auth:
            return None
        token = bearer_token(request)
        if token:
            cached, info = request.app.state.token_cache.peek(token)
            if cached:
                return _in_scope(info, scope)
        return await run_in_threadpool(authenticate, request, scope)

    dependency.__name__ = f"require_{scope}"
    return Depends(dependency)


READ = require("read")
WRITE = require("write")
ADMIN = require("admin")

# Documented on every authenticated route so clients (and schemathesis) know what to expect.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing, unknown or revoked token"},
    403: {"description": "Token scope too small"},
}


def wake_refitter(request: Request) -> None:
    """Start the refitter's next pass now rather than at its next poll, after a write that
    queued refits (nothing to wake when the process runs no background workers)."""
    notify = request.app.state.refit_notify
    if notify is not None:
        notify()
