"""Small loopback servers for protocol-level client tests (no scalewatch server needed)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.net import LoopbackHTTPServer, free_port


class FakeServer(LoopbackHTTPServer):
    """An in-memory imitation of the scalewatch API (runs + points with upsert).

    ``behaviour(method, path, body) -> (status, headers, bytes) | None`` can override any
    answer (None = default handling). Every request is recorded in ``requests``.
    """

    def __init__(self, port: int = 0, behaviour: Callable[..., Any] | None = None,
                 token: str | None = None):
        # The port is chosen now, so a test can point a client at it before starting it.
        super().__init__(port or free_port())
        self.behaviour = behaviour
        self.token = token
        self.requests: list[dict[str, Any]] = []
        self.runs: dict[tuple[str, str], int] = {}
        self.run_meta: dict[int, dict] = {}
        self.points: dict[tuple[int, str, int], tuple[float, float]] = {}
        self.inserts: dict[tuple[int, str, int], int] = {}
        self.lock = threading.Lock()
        self.url = self.base_url

    # -- lifecycle
    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                if self.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                body = json.loads(raw) if raw else None
                rec = {"method": self.command, "path": self.path, "body": body,
                       "headers": dict(self.headers.items())}
                with fake.lock:
                    fake.requests.append(rec)
                status, headers, out = fake.answer(self.command, self.path, body, self.headers)
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_PATCH = _handle

        return Handler

    # -- default API
    def answer(self, method: str, path: str, body: Any, headers: Any):
        if self.behaviour is not None:
            r = self.behaviour(method, path, body)
            if r is not None:
                return r
        if self.token and headers.get("Authorization") != f"Bearer {self.token}":
            return 401, {}, b'{"detail":"bad token"}'
        parts = path.split("?")[0].strip("/").split("/")
        with self.lock:
            if method == "POST" and parts == ["api", "v1", "runs"]:
                key = (body["project"], body["name"])
                created = key not in self.runs
                if created:
                    self.runs[key] = len(self.runs) + 1
                    self.run_meta[self.runs[key]] = body
                rid = self.runs[key]
                return (201 if created else 200), {}, json.dumps({"id": rid, **body}).encode()
            if method == "POST" and len(parts) == 5 and parts[4] == "points":
                rid = int(parts[3])
                if rid not in self.run_meta:
                    return 404, {}, b'{"detail":"unknown run"}'
                acc = upd = 0
                for p in body["points"]:
                    for m, v in p["metrics"].items():
                        k = (rid, m, p["step"])
                        if k in self.points:
                            upd += 1
                        else:
                            acc += 1
                        self.points[k] = (v, p["compute"])
                        self.inserts[k] = self.inserts.get(k, 0) + 1
                return 200, {}, json.dumps({"accepted": acc, "updated": upd}).encode()
            if method == "PATCH" and len(parts) == 4 and parts[:3] == ["api", "v1", "runs"]:
                rid = int(parts[3])
                if rid not in self.run_meta:
                    return 404, {}, b'{"detail":"unknown run"}'
                self.run_meta[rid] = {**self.run_meta[rid], **body}
                return 200, {}, json.dumps({"id": rid, **self.run_meta[rid]}).encode()
        return 404, {}, b'{"detail":"not found"}'

    # -- helpers
    def point_requests(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["path"].endswith("/points")]

    def steps(self, metric: str, run_id: int = 1) -> list[int]:
        with self.lock:
            return sorted(s for (r, m, s) in self.points if r == run_id and m == metric)


class SilentServer:
    """Listens on a loopback port and never answers (connections sit in the backlog)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
                self._conns.append(c)  # read nothing, answer nothing
            except OSError:
                continue

    def close(self) -> None:
        self._stop.set()
        for c in self._conns:
            c.close()
        self.sock.close()
