"""A cap on how many expensive reads one client runs at once (stateless fits, comparisons).

A read token can ask for work measured in CPU-seconds (`POST /api/v1/fit` with method `paper`,
`GET /api/v1/compare` of groups): without a cap one script holding one token could keep every
fit process busy and everyone else waiting. Counted per token (per client address with auth
off) in this process; past the cap the answer is 429 with Retry-After.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

from fastapi import Depends, HTTPException, Request

from scalewatch.server.api.guards import bearer_from_header


class PerClientLimit:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._active: dict[str, int] = {}

    def acquire(self, key: str) -> bool:
        with self._lock:
            held = self._active.get(key, 0)
            if held >= self.limit:
                return False
            self._active[key] = held + 1
            return True

    def release(self, key: str) -> None:
        with self._lock:
            left = self._active.get(key, 0) - 1
            if left > 0:
                self._active[key] = left
            else:
                self._active.pop(key, None)


def client_key(request: Request) -> str:
    token = bearer_from_header(request.headers.get("authorization"))
    if token is not None:
        return "token:" + token
    return "addr:" + (request.client.host if request.client else "")


async def _expensive_read(request: Request) -> AsyncIterator[None]:
    limit: PerClientLimit = request.app.state.expensive_reads
    key = client_key(request)
    if not limit.acquire(key):
        raise HTTPException(
            429,
            f"at most {limit.limit} expensive requests (fits, comparisons) at once per token; "
            "retry when one has finished",
            headers={"Retry-After": "1"},
        )
    try:
        yield
    finally:
        limit.release(key)


EXPENSIVE_READ = Depends(_expensive_read)
