"""Loopback networking for tests: a free port, and the thread lifecycle of a test HTTP server."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["LoopbackHTTPServer", "free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server(ThreadingHTTPServer):
    allow_reuse_address = True  # a restarted fake may bind the port it had a moment ago
    daemon_threads = True  # a hung handler never keeps the test process alive


S = TypeVar("S", bound="LoopbackHTTPServer")  # Python 3.10 has no typing.Self


class LoopbackHTTPServer:
    """An HTTP server on 127.0.0.1, served by a daemon thread between ``start()`` and ``stop()``.

    Subclasses say what it answers by returning a handler class from :meth:`handler` (usually
    a closure over ``self``). ``port=0`` binds any free port at ``start()``; ``self.port`` and
    ``self.base_url`` are the real ones after that. Use it as a context manager.
    """

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._httpd: _Server | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self: S) -> S:
        self._httpd = _Server(("127.0.0.1", self.port), self.handler())
        self.port = int(self._httpd.server_address[1])
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self: S) -> S:
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
