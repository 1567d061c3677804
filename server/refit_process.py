"""The background work of a server process (the refitter and the alert workers), and the
child process at a lower OS priority that `scalewatch serve` runs it in.

Fits are CPU-bound (numpy and plenty of Python between the numpy calls). Run as a thread of the
server process they hold the GIL beside the event loop and take the same two cores as ingest:
with every run's fit metric moving, ingest's p99 went from tens of milliseconds to seconds
(bench/load.py --refits). In a child process at `nice` +10 (`SCALEWATCH_REFIT_NICE`) the kernel
gives ingest the CPU first and a backlog of refits shows up as refit lag (/metrics, the Run
page), never as ingest latency.

One socket pair joins the two processes:
- parent -> child: the settings (one JSON line), then one byte per "new points, look now"
  (`notify`; the child also polls every `refit_interval`, so a lost byte costs nothing);
- child -> parent: one line per stored fit ("fit 1" / "fit 0") and its refit lag
  ("lag 0.42"), so /metrics of the server process still counts them.
EOF on the socket stops the child: when the server stops, and when it is killed (SIGKILL
included: the kernel closes its end). The work itself is shared through the database as
between server processes (leases), so nothing is lost if the child dies: the next one, or any
other server process, claims the series when their lease expires.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from scalewatch.server.alerts.service import AlertService, StalledTimer
from scalewatch.server.alerts.webhooks import WebhookSender
from scalewatch.server.config import Settings
from scalewatch.server.refit import Refitter
from scalewatch.server.refit.worker import FitCounter
from scalewatch.server.store.base import Store

log = logging.getLogger("scalewatch.refit")


def start_background(
    settings: Settings, store: Store, counts: FitCounter | None
) -> tuple[list[Any], Callable[[], None]]:
    """The webhook sender, the `stalled` timer and the refitter (whose fits the alert service
    evaluates), started; and the refitter's `notify`."""
    backoff = float(settings.webhook_backoff)
    sender = WebhookSender(
        store,
        backoff=backoff,
        backoff_max=max(3600.0, backoff),
        max_attempts=int(settings.webhook_max_attempts),
        timeout=float(settings.webhook_timeout),
        poll_interval=min(2.0, max(backoff / 2, 0.05)),
        allow_private=bool(settings.webhook_allow_private),
    ).start()
    alerts = AlertService(store, settings.base_url, sender)
    timer = StalledTimer(alerts, float(settings.alert_interval)).start()
    # The alert service reads fit records as plain dicts (it predates the FitRecord TypedDict).
    listeners: list[Any] = [alerts.on_fit]
    group_listeners: list[Any] = [alerts.on_group_fit]
    refitter = Refitter(
        store,
        poll_interval=settings.refit_interval,
        metrics=counts,
        listeners=listeners,
        group_listeners=group_listeners,
    ).start()
    return [sender, timer, refitter], refitter.notify


class RefitProcess:
    """The server process's handle on its refit child: start, notify, stop."""

    def __init__(self, settings: Settings, counts: FitCounter | None) -> None:
        self.counts = counts
        self._sock, child_end = socket.socketpair()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scalewatch.server.refit_process", str(child_end.fileno())],
            pass_fds=(child_end.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        child_end.close()
        self._sock.sendall(settings.model_dump_json().encode() + b"\n")
        self._reader = threading.Thread(target=self._read, name="scalewatch-refit-reports",
                                        daemon=True)
        self._reader.start()

    def notify(self) -> None:
        """New points arrived: ask the child to look now rather than at its next poll."""
        with contextlib.suppress(OSError):  # full (it is awake anyway) or gone (restarting)
            self._sock.send(b"w", socket.MSG_DONTWAIT)

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._sock.recv(4096)
            except OSError:
                return
            if not chunk:  # the child exited
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                self._report(line)

    def _report(self, line: bytes) -> None:
        if self.counts is None:
            return
        kind, _, value = line.decode(errors="replace").partition(" ")
        try:
            if kind == "fit":
                self.counts.fit_done(value == "1")
            elif kind == "lag":
                self.counts.refit_lag(float(value))
        except ValueError:
            log.warning("refit process sent an unreadable report %r", line[:80])

    def stop(self, timeout: float = 15.0) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)  # EOF: the child finishes its fit and exits
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        self._sock.close()


class _Reports:
    """The child's side of `FitCounter`: lines to the parent (never raises into a fit)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()

    def _send(self, line: str) -> None:
        with self.lock, contextlib.suppress(OSError):
            self.sock.sendall(line.encode() + b"\n")

    def fit_done(self, ok: bool) -> None:
        self._send(f"fit {int(ok)}")

    def refit_lag(self, seconds: float) -> None:
        self._send(f"lag {seconds:.3f}")


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when the server process dies, even by SIGKILL (a backstop
    for the socket's EOF, which a wedged read could miss)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def _read_settings(sock: socket.socket) -> Settings:
    buf = b""
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit(0)  # the server went away before it said anything
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    if rest:
        log.debug("refit process: %d early notify bytes", len(rest))
    data: dict[str, Any] = json.loads(line)
    return Settings.model_validate(data)


def main(fd: int) -> int:
    _die_with_parent()
    sock = socket.socket(fileno=fd)
    settings = _read_settings(sock)
    # Its lines go to the server's log: say which process wrote them (each process logs a
    # database outage once, as the server process does).
    logging.basicConfig(level=logging.INFO,
                        format="%(levelname)s %(name)s (refit process): %(message)s")
    with contextlib.suppress(OSError):
        os.nice(settings.refit_nice)

    from scalewatch.server.db.engine import make_engine
    from scalewatch.server.store import SqlStore

    store = SqlStore(make_engine(settings))
    workers, notify = start_background(settings, store, _Reports(sock))
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                break
            notify()
    except OSError:
        pass
    finally:
        for w in workers:
            w.stop()
        store.engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1])))
