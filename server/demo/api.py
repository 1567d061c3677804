"""The few REST calls the simulator makes besides what the trainer client does.

Standard library only (urllib), so the simulator talks to a server exactly as an external
process would: run look-ups for resuming, demo alert rules. (Not the trainer client's private
connection class: the demo uses only the client's public API.)
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any, NamedTuple
from urllib.parse import urlencode

DEMO_RULES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("asymptote_drop", {"delta": 0.02}),
    ("off_curve", {"n": 3, "k": 4.0}),
)


class ApiError(RuntimeError):
    """The server answered, but not as expected (e.g. a bad token)."""


class TransportError(OSError):
    """No HTTP answer came back (refused, reset, timed out)."""


class _Reply(NamedTuple):
    status: int
    body: bytes


class Connection:
    """Where and how to call one server (a request per call: the demo makes a handful)."""

    def __init__(self, url: str, token: str | None, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/") if "://" in url else "http://" + url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, params: dict[str, Any] | None = None,
             body: Any = None) -> _Reply:
        target = self.url + path
        if params:
            target += "?" + urlencode({k: v for k, v in params.items() if v is not None})
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(target, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                return _Reply(resp.status, resp.read())
        except urllib.error.HTTPError as exc:  # an answer, just not a 2xx
            return _Reply(exc.code, exc.read())
        except (urllib.error.URLError, OSError) as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Nothing is kept open between calls."""


def _json(conn: Connection, method: str, path: str, params: dict[str, Any] | None = None,
          body: Any = None) -> Any:
    r = conn.call(method, path, params, body)
    if r.status not in (200, 201):
        raise ApiError(f"{method} {path}: HTTP {r.status}: {r.body[:300]!r}")
    return json.loads(r.body)


def existing_runs(url: str, token: str | None, project: str) -> dict[str, dict[str, Any]]:
    """name -> run of every run in ``project`` (paged)."""
    conn = Connection(url, token, timeout=10.0)
    out: dict[str, dict[str, Any]] = {}
    try:
        offset = 0
        while True:
            page = _json(conn, "GET", "/api/v1/runs",
                         {"project": project, "limit": 1000, "offset": offset})
            for run in page["runs"]:
                out[run["name"]] = run
            offset += len(page["runs"])
            if not page["runs"] or offset >= page["total"]:
                return out
    finally:
        conn.close()


def ensure_alert_rules(url: str, token: str | None, project: str) -> list[dict[str, Any]]:
    """Project-wide demo rules (no webhook); an existing rule of the same kind is kept."""
    conn = Connection(url, token, timeout=10.0)
    try:
        rules = _json(conn, "GET", "/api/v1/alert-rules", {"project": project})
        have = {r["kind"] for r in rules["rules"] if r.get("run_id") is None}
        created = []
        for kind, params in DEMO_RULES:
            if kind not in have:
                created.append(_json(conn, "POST", "/api/v1/alert-rules", body={
                    "project": project, "kind": kind, "params": params,
                }))
        return created
    finally:
        conn.close()


def wait_healthy(url: str, timeout: float, stop: threading.Event | None = None) -> bool:
    """Poll /healthz until the server answers 200 (the demo starts before uvicorn listens)."""
    deadline = time.monotonic() + timeout
    conn = Connection(url, None, timeout=2.0)
    try:
        while time.monotonic() < deadline:
            try:
                if conn.call("GET", "/healthz").status == 200:
                    return True
            except TransportError:
                pass
            if stop is not None and stop.wait(0.1):
                return False
            if stop is None:
                time.sleep(0.1)
        return False
    finally:
        conn.close()
