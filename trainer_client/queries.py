"""Requests a run makes from the trainer's own thread: ``fit()``, ``alerts()``, its status.

Each opens a short-lived connection of its own (the sender thread's is not thread-safe) with a
timeout of at most 5 s, and none raises: trouble answers ``None``, because these are
conveniences a trainer must be able to call without guarding them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._http import Connection, TransportError

__all__ = ["Queries"]

TIMEOUT_CAP = 5.0  # the trainer waits for these, so they never wait the full socket timeout


class Queries:
    """The server, as the trainer's thread sees it."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        self.url = url
        self.token = token
        self.timeout = min(timeout, TIMEOUT_CAP)

    def _connect(self) -> Connection:
        return Connection(self.url, self.token, timeout=self.timeout)

    def get(self, path: str, params: dict[str, Any]) -> Any:
        """The JSON answer of a ``GET`` that returned 200, else None."""
        conn = self._connect()
        try:
            r = conn.get_json(path, params)
            if r.status != 200:
                return None
            return r.json()
        except (TransportError, ValueError):
            return None
        finally:
            conn.close()

    def register(self, meta: Mapping[str, Any]) -> int | None:
        """Create or get the run (``POST /api/v1/runs``); its id, or None."""
        conn = self._connect()
        try:
            r = conn.post_json("/api/v1/runs", meta)
            if r.status in (200, 201):
                return int(r.json()["id"])
        except (TransportError, ValueError, KeyError, TypeError):
            pass
        finally:
            conn.close()
        return None

    def set_status(self, run_id: int, status: str) -> str | None:
        """Best effort ``PATCH`` of the run's status; why it was not set, or None."""
        conn = self._connect()
        try:
            body = json.dumps({"status": status}).encode()
            r = conn.request("PATCH", f"/api/v1/runs/{run_id}", body=body,
                             headers={"Content-Type": "application/json"})
        except TransportError as exc:
            return str(exc)
        finally:
            conn.close()
        return None if r.status == 200 else f"HTTP {r.status}"
