"""The shape every background worker of a server process shares (refitter, webhooks, timers).

A daemon thread calls `run_once()` until stopped. When a pass did some work it runs again at
once (drain a backlog); otherwise it sleeps until `notify()` or `poll_interval` seconds pass.
An exception in a pass is logged and the loop goes on: a database hiccup must not end it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import TypeVar

log = logging.getLogger("scalewatch")


def worker_identity() -> str:
    """host:pid:random — names the lease holder in the database, unique across processes."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


W = TypeVar("W", bound="PollingWorker")


class PollingWorker:
    thread_name = "scalewatch-worker"

    def __init__(self, poll_interval: float) -> None:
        self.poll_interval = poll_interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:  # pragma: no cover - subclasses implement it
        """Do what is due; return how many items were handled."""
        raise NotImplementedError

    def start(self: W) -> W:
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def notify(self) -> None:
        """Something changed: run a pass now instead of at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                worked = self.run_once()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("%s: pass failed", self.thread_name)
                worked = 0
            if not worked:
                self._wake.wait(self.poll_interval)
                self._wake.clear()
