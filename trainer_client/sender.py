"""The sender policy: ship a spool's batch files to the server, retrying what is worth it.

Used by a live run's sender thread (:meth:`Sender.loop`) and by ``scalewatch sync``
(:meth:`Sender.step` until the spool is empty or ``max_failures`` is reached). A sender sees a
run only through a :class:`SendTarget` - its spool, its registration body, its server id - so
``sync`` builds one from a spool's ``run.json`` instead of imitating a :class:`~.run.Run`.

* It registers the run first (``POST /api/v1/runs``; create-or-get, so a restarted trainer
  resumes its run), then sends batch files in order once 1,000 points are waiting or the oldest
  is 1 s old, merging small files (at most 1,000 points per request), over one keep-alive
  connection.
* Network errors, 408, 429 (honouring ``Retry-After``) and 5xx are retried with exponential
  backoff and full jitter (capped at 30 s). 401/403 keep the batches in the spool and retry
  slowly (a wrong token must not destroy data; fix the token and ``scalewatch sync``). 404
  re-registers the run once. Any other 4xx (e.g. 422, 413) is permanent: a request merged from
  several spool files is re-sent file by file once (so one bad batch does not take good ones
  down with it), then the refused batch is moved to ``rejected/`` in the spool, logged once per
  status, and sending goes on - never retried.
* A batch file is deleted only once the server acknowledged it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._http import (
    Connection,
    TransportError,
    backoff_delay,
    error_text,
    is_retryable_status,
    parse_retry_after,
)
from .limits import MAX_POINTS_PER_REQUEST
from .spool import Spool

__all__ = ["SendTarget", "Sender", "dedupe_points"]

logger = logging.getLogger("scalewatch")

BATCH_POINTS = 1000  # points per spool file (and per request from live logging)
# Small spool files are merged into requests of at most this many points (well under the
# server's MAX_POINTS_PER_REQUEST, so a request stays small enough to retry cheaply).
MAX_REQUEST_POINTS = min(1000, MAX_POINTS_PER_REQUEST)
MAX_REQUEST_FILES = 50
FLUSH_INTERVAL = 1.0  # a request goes out when 1,000 points are spooled or the oldest is 1 s old
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 300.0


@dataclass
class SendTarget:
    """Everything a :class:`Sender` reads or changes of the run whose spool it ships.

    The token is not here: it belongs to the :class:`~._http.Connection` the sender is given.
    """

    spool: Spool
    meta: Mapping[str, Any]  # the body of POST /api/v1/runs (create-or-get)
    url: str  # for messages only; the connection knows where it goes
    run_id: int | None = None  # set by registration, cleared by a 404 (run deleted?)
    abort: threading.Event = field(default_factory=threading.Event)  # ends backoff sleeps
    # Messages already logged (each kind once until it clears), so an outage logs one line.
    logged: set[Any] = field(default_factory=set)

    def sleep(self, seconds: float) -> bool:
        """Interruptible sleep; True if the run was aborted meanwhile."""
        return self.abort.wait(seconds)

    def log_once(self, key: Any, level: int, msg: str, *args: Any) -> None:
        if key not in self.logged:
            self.logged.add(key)
            logger.log(level, msg, *args)

    def reached(self) -> None:
        """The server answered: say so once if it had been unreachable."""
        if {"register-net", "send-net"} & self.logged:
            self.logged -= {"register-net", "send-net"}
            logger.info("scalewatch: reached %s again; sending the spooled points", self.url)


def dedupe_points(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Last write wins per (step, metric) inside one request, keeping order.

    A later point at the same step takes over the metrics it repeats; an earlier point left with
    no metric is dropped. (An upsert of the same key twice in one statement is an error on some
    databases.)
    """
    latest: dict[tuple[int, str], int] = {}
    for i, p in enumerate(points):
        for m in p["metrics"]:
            latest[(p["step"], m)] = i
    if len(latest) == sum(len(p["metrics"]) for p in points):
        return points
    out = []
    for i, p in enumerate(points):
        keep = {m: v for m, v in p["metrics"].items() if latest[(p["step"], m)] == i}
        if keep:
            out.append(p if len(keep) == len(p["metrics"]) else {**p, "metrics": keep})
    return out


def _file_time(path: Path) -> float:
    try:
        return int(path.name.split("-", 1)[0]) / 1e9
    except (ValueError, IndexError):
        return 0.0


class Sender:
    """Ships a spool's batch files to the server. Used by the run thread and by ``sync``."""

    def __init__(
        self,
        target: SendTarget,
        conn: Connection,
        max_failures: int | None = None,
    ) -> None:
        self.target = target
        self.conn = conn
        self.spool: Spool = target.spool
        self.max_failures = max_failures  # consecutive failures before giving up (sync)
        self.attempt = 0
        self.failures = 0
        self.sent_points = 0
        self.sent_batches = 0
        self.rejected_batches = 0
        self.last_error: str | None = None
        self._reregistered = False

    def loop(
        self,
        wake: threading.Event,
        stop: threading.Event,
        writer_done: Callable[[], bool],
    ) -> None:
        """Send until ``stop`` is set, the writer is done and the spool is empty (or aborted).

        ``wake`` is set by the spool writer when it wrote a batch file.
        """
        target = self.target
        while not target.abort.is_set():
            if not self.spool.try_lock():
                if stop.is_set() or target.sleep(1.0):
                    return
                continue
            files = self.spool.batches()
            if not files:
                if stop.is_set() and writer_done():
                    return
                wake.wait(FLUSH_INTERVAL)
                wake.clear()
                continue
            if not stop.is_set() and self.attempt == 0:
                # batch: wait for 1,000 points or until the oldest point is 1 s old
                age = time.time() - _file_time(files[0])
                if age < FLUSH_INTERVAL and sum(map(Spool.batch_size, files)) < BATCH_POINTS:
                    wake.wait(FLUSH_INTERVAL - age)
                    wake.clear()
                    continue
            self.step(files)
            if self.max_failures is not None and self.failures >= self.max_failures:
                return

    def _backoff(self, retry_after: float | None = None) -> None:
        delay = backoff_delay(self.attempt, BACKOFF_BASE, BACKOFF_CAP)
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_CAP))
        self.attempt += 1
        self.failures += 1
        if self.max_failures is not None and self.failures >= self.max_failures:
            return
        self.target.sleep(delay)

    def register(self) -> bool:
        target = self.target
        try:
            r = self.conn.post_json("/api/v1/runs", target.meta)
        except TransportError as exc:
            self.last_error = str(exc)
            target.log_once(
                "register-net", logging.WARNING,
                "scalewatch: server %s unreachable (%s); points are spooled at %s and will be "
                "sent when it is back", target.url, exc, self.spool.dir,
            )
            self._backoff()
            return False
        if r.status in (200, 201):
            try:
                target.run_id = int(r.json()["id"])
            except (ValueError, KeyError, TypeError):
                self.last_error = f"not a scalewatch answer to run registration ({error_text(r)})"
                self._backoff()
                return False
            self.attempt = 0
            self.failures = 0
            target.reached()
            return True
        self.last_error = f"run registration refused: {error_text(r)}"
        target.log_once(
            ("register", r.status), logging.ERROR,
            "scalewatch: %s refused to create run %s/%s (%s); points stay in %s",
            target.url, target.meta["project"], target.meta["name"], error_text(r),
            self.spool.dir,
        )
        self._backoff(parse_retry_after(r.headers.get("retry-after")))
        return False

    def _read(self, files: list[Path]) -> tuple[list[Path], list[dict[str, Any]]]:
        """Read up to MAX_REQUEST_POINTS points from the first files; quarantine corrupt ones."""
        used: list[Path] = []
        points: list[dict[str, Any]] = []
        for f in files[:MAX_REQUEST_FILES]:
            if points and len(points) + Spool.batch_size(f) > MAX_REQUEST_POINTS:
                break
            try:
                pts = Spool.read_batch(f)
            except FileNotFoundError:
                continue  # sent and removed by another process
            except (OSError, ValueError) as exc:
                logger.error("scalewatch: corrupt spool batch %s (%s), moved aside", f, exc)
                self.spool.reject(f, f"corrupt: {exc}")
                self.rejected_batches += 1  # its points are not sent: say so (sync's exit)
                continue
            used.append(f)
            points.extend(pts)
        return used, points

    def step(self, files: list[Path]) -> None:
        """One request: register if needed, then send the first files' points."""
        if self.target.run_id is None and not self.register():
            return
        used, points = self._read(files)
        if not used:
            return
        self.send(used, dedupe_points(points))

    def send(self, used: list[Path], points: list[dict[str, Any]], split_ok: bool = True) -> None:
        target = self.target
        path = f"/api/v1/runs/{target.run_id}/points"
        try:
            r = self.conn.post_json(path, {"points": points}, compress=True)
        except (TransportError, ValueError) as exc:
            self.last_error = str(exc)
            target.log_once(
                "send-net", logging.WARNING,
                "scalewatch: sending to %s failed (%s); retrying with backoff, points stay in %s",
                target.url, exc, self.spool.dir,
            )
            self._backoff()
            return
        if 200 <= r.status < 300:
            for f in used:
                self.spool.remove(f)
            self.sent_points += sum(Spool.batch_size(f) for f in used)
            self.sent_batches += len(used)
            self.attempt = 0
            self.failures = 0
            self._reregistered = False
            target.reached()
            return
        self.last_error = error_text(r)
        if is_retryable_status(r.status):
            target.log_once(
                ("retry", r.status), logging.WARNING,
                "scalewatch: server answered HTTP %d; retrying with backoff", r.status,
            )
            self._backoff(parse_retry_after(r.headers.get("retry-after")))
        elif r.status in (401, 403):
            target.log_once(
                ("auth", r.status), logging.ERROR,
                "scalewatch: server refused the token (HTTP %d); points are kept in %s - fix "
                "SCALEWATCH_TOKEN and run `scalewatch sync`", r.status, self.spool.dir,
            )
            self.attempt = max(self.attempt, 6)  # slow retries only
            self._backoff()
        elif r.status == 404 and not self._reregistered:
            self._reregistered = True  # run deleted on the server? create it again, once
            target.run_id = None
        elif split_ok and len(used) > 1:
            # A merged request was refused for good (422, 413, ...): send its files one by one
            # so that only the offending batch is dropped (a bounded, one-time split).
            for f in used:
                try:
                    pts = dedupe_points(Spool.read_batch(f))
                except (OSError, ValueError):
                    continue
                self.send([f], pts, split_ok=False)
                if self.attempt:  # a transient error meanwhile: back to the main loop
                    return
        else:
            self._reregistered = False
            for f in used:
                self.spool.reject(f, self.last_error)
            self.rejected_batches += len(used)
            target.log_once(
                ("drop", r.status), logging.ERROR,
                "scalewatch: server rejected a batch of %d point(s) (%s); it is dropped (kept in "
                "%s/rejected) and further such batches are dropped silently",
                len(points), self.last_error, self.spool.dir,
            )
