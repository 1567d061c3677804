"""Request dependencies in one place: the store, and bearer-token auth with scopes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, cast

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from scalewatch.server.api.guards import bearer_from_header
from scalewatch.server.config import Settings
from scalewatch.server.domain.tokens import Token
from scalewatch.server.scopes import SCOPE_RANK
from scalewatch.server.store.base import Store, TokenStore
from scalewatch.server.store.scoped import ScopedStore, scoped, token_projects


# Async, though they only read app state: FastAPI runs a plain `def` dependency in its thread
# pool, a thread hop per dependency per request.
async def get_store(request: Request) -> Store:
    """The store as the caller's token may use it: limited to its projects when the token is
    project-scoped (`ScopedStore`), so handlers and the services they call cannot reach
    another project's runs, alerts or rules whatever they are asked."""
    store = request.app.state.store
    if not request.app.state.settings.auth:
        return store
    if "sw_store" not in request.scope:  # else the guard made it, with the ids it checked
        request.scope["sw_store"] = scoped(store, await caller(request))
    return cast(Store, request.scope["sw_store"])


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
        self._items: dict[str, tuple[float, Token | None]] = {}

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, store: TokenStore, token: str) -> Token | None:
        """The record of an API token (None: unknown or revoked)."""
        return self._get("t:" + token, lambda: store.lookup_token(token))

    def peek(self, token: str) -> tuple[bool, Token | None]:
        """(True, what `get` would answer) when the token is cached and fresh, without any
        database lookup; else (False, None)."""
        with self._lock:
            hit = self._items.get("t:" + token)
            if hit and hit[0] > self.clock():
                return True, hit[1]
        return False, None

    def get_session(self, store: TokenStore, session_id: str) -> Token | None:
        """The token record behind a dashboard session (None: ended, expired or revoked)."""
        return self._get("s:" + session_id, lambda: store.lookup_session(session_id))

    def _get(self, key: str, lookup: Callable[[], Token | None]) -> Token | None:
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


def authenticate(request: Request, scope: str) -> Token | None:
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


def _in_scope(info: Token | None, scope: str) -> Token:
    if info is None:
        raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})
    if SCOPE_RANK[info.scope] < SCOPE_RANK[scope]:
        raise HTTPException(403, f"this token has scope '{info.scope}'; '{scope}' is needed")
    return info


async def caller(request: Request) -> Token | None:
    """The record of the request's bearer token, scope unchecked (None: none, unknown or
    revoked; the scope dependencies answer those 401). Looked up once per request."""
    if "sw_token" in request.scope:
        return request.scope["sw_token"]
    token = bearer_token(request)
    info = None
    if token:
        cached, info = request.app.state.token_cache.peek(token)
        if not cached:
            info = await run_in_threadpool(
                request.app.state.token_cache.get, request.app.state.store, token
            )
    request.scope["sw_token"] = info
    return info


def _check_ids(
    limited: ScopedStore, runs: list[int], alert: int | None, rule: int | None
) -> None:
    if runs:
        limited.check_runs(runs)
    if alert is not None:
        limited.check_alert(alert)
    if rule is not None:
        limited.check_rule(rule)


def _ids(values: list[str]) -> list[int]:
    # Ids that are not ids are left to the route's own validation (a 422 naming the field).
    # ASCII digits only: "²".isdigit() is true and int("²") raises (a 500 here).
    return [int(v) for v in values if v.isascii() and v.isdigit() and len(v) < 12]


async def project_guard(request: Request) -> None:
    """A project-scoped token's check, before the route runs (and before any body is read):
    a project named in the path or query outside its list is 403; a run, alert or alert rule
    (path id, or `run=` in the query) of another project is 404, worded as for one that does
    not exist. Unscoped tokens pass untouched. Projects named in bodies, and everything a
    handler reads, are limited by the scoped store (`get_store`)."""
    if not request.app.state.settings.auth:
        return
    projects = token_projects(await caller(request))
    if projects is None:
        return
    path = request.path_params
    names = request.query_params.getlist("project")
    if "project" in path:
        names.append(str(path["project"]))
    for name in names:
        if name not in projects:
            raise HTTPException(
                403, f"this token is limited to projects {list(projects)}; "
                f"project {name!r} is not one of them"
            )
    runs = _ids([str(path["run_id"])] if "run_id" in path else [])
    runs += _ids(request.query_params.getlist("run"))
    alert = _ids([str(path["alert_id"])]) if "alert_id" in path else []
    rule = _ids([str(path["rule_id"])]) if "rule_id" in path else []
    if runs or alert or rule:
        limited = ScopedStore(request.app.state.store, projects)
        await run_in_threadpool(
            _check_ids, limited, runs, alert[0] if alert else None, rule[0] if rule else None
        )
        request.scope["sw_store"] = limited  # the handler's store: these ids are known now


def check_project(store: Store, project: str) -> None:
    """403 for a project outside a project-scoped token's list, named in a body: for handlers
    that check the body against the store before writing (the write itself is refused by the
    scoped store anyway; this makes the refusal the first answer)."""
    if isinstance(store, ScopedStore):
        store.check_project(project)


async def unscoped_only(request: Request) -> None:
    """Token management is for unscoped tokens: a project-scoped admin token could otherwise
    mint itself an unscoped one."""
    if request.app.state.settings.auth and token_projects(await caller(request)) is not None:
        raise HTTPException(403, "a project-scoped token cannot manage tokens")


def require(scope: str):  # noqa: ANN201 - a FastAPI dependency
    # Async: FastAPI runs a plain `def` dependency in its thread pool, a thread hop on every
    # API request (~0.5 ms of a 1,000-value ingest on 2 busy cores). Only a token the cache
    # does not hold needs the database, and that lookup goes to the thread pool.
    async def dependency(request: Request) -> Token | None:
        if not request.app.state.settings.auth:
            return None
        token = bearer_token(request)
        if token:
            cached, info = request.app.state.token_cache.peek(token)
            if cached:
                request.scope["sw_token"] = info
                return _in_scope(info, scope)
        info = await run_in_threadpool(authenticate, request, scope)
        request.scope["sw_token"] = info
        return info

    dependency.__name__ = f"require_{scope}"
    return Depends(dependency)


READ = require("read")
WRITE = require("write")
ADMIN = require("admin")
PROJECTS = Depends(project_guard)  # on every router whose routes touch a project's data
UNSCOPED = Depends(unscoped_only)

# Documented on every authenticated route so clients (and schemathesis) know what to expect.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing, unknown or revoked token"},
    403: {"description": "Token scope too small, or a project this token is not limited to"},
}


def wake_refitter(request: Request) -> None:
    """Start the refitter's next pass now rather than at its next poll, after a write that
    queued refits (nothing to wake when the process runs no background workers)."""
    notify = request.app.state.refit_notify
    if notify is not None:
        notify()
