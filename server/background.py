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


# PostgreSQL's refusals to write: a read-only transaction (a standby, or
# default_transaction_read_only) and a full disk.
_WRITES_REFUSED_SQLSTATES = frozenset({"25006", "53100"})
# SQLite's: a file or mount it may not write, a failing or full disk.
_WRITES_REFUSED_SQLITE = ("readonly database", "disk I/O error", "database or disk is full")


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's own exception: SQLAlchemy's wraps it as `orig`; the PostgreSQL ingest
    talks to psycopg directly, so its errors arrive unwrapped."""
    return getattr(exc, "orig", None) or exc


def writes_refused(exc: BaseException) -> bool:
    """The database reads but refuses writes (read-only file or replica, full disk)."""
    orig = _driver_error(exc)
    if getattr(orig, "sqlstate", None) in _WRITES_REFUSED_SQLSTATES:
        return True
    return type(orig).__module__ == "sqlite3" and any(
        m in str(orig) for m in _WRITES_REFUSED_SQLITE
    )


def is_database_outage(exc: BaseException) -> bool:
    """The database is unreachable or cannot write (as opposed to a bug): refused, dropped,
    timed out, gone, read-only, full."""
    from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    if isinstance(exc, (OperationalError, DisconnectionError, PoolTimeout)):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if writes_refused(exc):
        return True
    # An unwrapped driver error of the PEP 249 OperationalError kind (psycopg's, sqlite3's).
    raw = type(exc)
    return raw.__name__ == "OperationalError" and raw.__module__.split(".")[0] in (
        "psycopg", "sqlite3",
    )


class OutageLog:
    """Logs a database outage once when it starts and once when it ends, however many
    workers and requests run into it meanwhile (they poll every fraction of a second).

    An outage of writes only (a read-only file, a full disk) ends only when a write is seen to
    work (`ok(wrote=True)`): a pass that only read says nothing about it, and ending it there
    would log it again at the next write, twice a second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down = False
        self.writes_only = False

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            if self.down:
                return
            self.down = True
            self.writes_only = writes_refused(exc)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        log.warning("database unavailable: %s (logged again when it is back)", first[:300])

    def ok(self, wrote: bool = True) -> None:
        """Something worked on the database; `wrote`: a write did."""
        if not self.down:  # the common case, without taking the lock
            return
        with self._lock:
            if not self.down or (self.writes_only and not wrote):
                return
            self.down = False
        log.warning("database available again")


outage = OutageLog()  # one per process: every worker and request reports to it


def worker_identity() -> str:
    """host:pid:random — names the lease holder in the database, unique across processes."""
    return f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


W = TypeVar("W", bound="PollingWorker")


class PollingWorker:
    thread_name = "scalewatch-worker"
    # After an idle pass, at least this long before the next one, however often `notify()` is
    # called: every ingest notifies the refitter, and a pass per request (a database query
    # finding nothing to do) cost as much CPU as the ingest itself with many trainers.
    notify_gap = 0.0

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
                outage.ok(wrote=worked > 0)  # an idle pass only read
            except Exception as exc:  # noqa: BLE001 - the loop must survive anything
                if is_database_outage(exc):
                    outage.failed(exc)  # one line per outage, not a traceback per pass
                else:
                    log.exception("%s: pass failed", self.thread_name)
                worked = 0
            if not worked:
                self._wake.wait(self.poll_interval)
                if self.notify_gap > 0:
                    self._stop.wait(self.notify_gap)  # notifications meanwhile: one pass
                self._wake.clear()
