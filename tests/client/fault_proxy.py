"""A loopback HTTP proxy that injects faults between the client and a real server.

Faults, each drawn per request with its probability (seeded, reproducible):

* ``500_before`` - answer 500 without forwarding (the server never saw the request);
* ``500_after``  - forward (the server stored the batch) and answer 500 anyway, so the client
  resends data the server already has: exactly-once relies on the server's upsert;
* ``reset_before`` / ``reset_after`` - close the connection with a TCP RST, before or after
  forwarding;
* ``stall`` - read the request and answer nothing for ``stall_seconds`` (longer than the client's
  socket timeout), then close.

Only requests whose path contains ``path_filter`` (default: every POST) are faulted.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.support.net import LoopbackHTTPServer

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
       "trailer", "proxy-authorization", "proxy-authenticate", "host", "content-length"}
FAULTS = ("500_before", "500_after", "reset_before", "reset_after", "stall")


class FaultProxy(LoopbackHTTPServer):
    def __init__(self, upstream: str, faults: dict[str, float] | None = None, seed: int = 0,
                 stall_seconds: float = 3.0, methods: tuple[str, ...] = ("POST",),
                 path_filter: str = ""):
        super().__init__()
        up = urlsplit(upstream)
        self.up_host, self.up_port = up.hostname, up.port
        self.faults = dict(faults or {})
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {unknown}")
        self.rng = random.Random(seed)
        self.stall_seconds = stall_seconds
        self.methods = methods
        self.path_filter = path_filter
        self.counts: Counter[str] = Counter()
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.base_url

    def _draw(self, method: str, path: str) -> str | None:
        with self.lock:
            self.requests.append((method, path))
            if method not in self.methods or self.path_filter not in path:
                return None
            r = self.rng.random()
            acc = 0.0
            for name in FAULTS:
                acc += self.faults.get(name, 0.0)
                if r < acc:
                    self.counts[name] += 1
                    return name
            self.counts["ok"] += 1
            return None

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes):
        conn = http.client.HTTPConnection(self.up_host, self.up_port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, [(k, v) for k, v in r.getheaders() if k.lower() not in HOP], r.read()
        finally:
            conn.close()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _reset(self) -> None:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

            def _reply(self, status: int, headers: list, body: bytes) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                fault = proxy._draw(self.command, self.path)
                if fault == "500_before":
                    return self._reply(500, [], b'{"detail":"injected"}')
                if fault == "reset_before":
                    return self._reset()
                if fault == "stall":
                    time.sleep(proxy.stall_seconds)
                    return self._reset()
                try:
                    status, rh, data = proxy._forward(self.command, self.path, headers, body)
                except OSError:
                    return self._reply(502, [], b'{"detail":"upstream down"}')
                if fault == "500_after":
                    return self._reply(500, [], b'{"detail":"injected after commit"}')
                if fault == "reset_after":
                    return self._reset()
                return self._reply(status, rh, data)

            do_GET = do_POST = do_PATCH = do_DELETE = _handle

        return Handler
