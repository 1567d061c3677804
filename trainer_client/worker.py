"""A run's background half: the queue ``log()`` fills, the writer thread that spools it and the
sender thread that sends the spool (cf. sentry-python's ``Worker``: a queue and a thread, a
``flush(timeout)``, and nothing ever raised into the host).

:class:`~trainer_client.run.Run` keeps the public API and the ``log()`` fast path, which reads
:attr:`Worker.queue` and :attr:`Worker.jappend` directly (no call on the hot path). The worker
owns everything after that: when a point moves from memory to a spool batch file, when the
sender is woken, how ``flush`` and ``close`` wait, and what a forked child starts from.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from ._http import Connection
from .journal import Journal
from .sender import BATCH_POINTS, Sender, SendTarget
from .spool import Spool

logger = logging.getLogger("scalewatch")

# The writer moves the in-memory queue into batch files this often; the journal covers the
# points in between (without it, SCALEWATCH_JOURNAL=0, a SIGKILL loses at most this much).
SPOOL_INTERVAL = max(0.01, float(os.environ.get("SCALEWATCH_SPOOL_INTERVAL", "0.2") or 0.2))
MAX_MEMORY_POINTS = 2_000_000  # only reachable if the spool disk fails
# (step, compute, metric names, their values, time) of one point not yet spooled.
Point = tuple[int, float, tuple[str, ...], tuple[float, ...], float]
# Journal.append_record: (format, step, compute, time, values) -> journaled?
JournalAppend = Callable[[Any, int, float, float, tuple[float, ...]], bool]


class Worker:
    """The queue, the spool writer thread and (online) the sender thread of one run.

    ``target`` is shared with the run: the run id the sender learns and the registration body
    (``target.meta``) the run may still change (its compute unit). Only ``flush`` and ``close``
    wait, each for at most its timeout; nothing here raises into the trainer.
    """

    def __init__(self, spool: Spool, target: SendTarget, journal: Journal | None, *,
                 online: bool, url: str, token: str | None, timeout: float, tag: str,
                 run_json_extra: dict[str, Any]) -> None:
        self.spool = spool
        self.target = target
        self.journal = journal
        self.online = online
        self.url = url
        self.token = token
        self.timeout = timeout
        self.tag = tag
        self.run_json_extra = run_json_extra  # written into run.json beside target.meta
        self.meta_dirty = False  # run.json to rewrite before the next batch (set by the run)
        self.lost = 0  # points dropped because the spool disk failed and memory ran out
        self.reset()

    def reset(self) -> None:
        """A fresh queue, events and no threads: at creation and in a forked child, whose
        parent's threads do not exist there and whose queue content the parent will send."""
        self.queue: deque[Point] = deque()
        # The journal's append while it takes points; None when off, failed or closed.
        self.jappend: JournalAppend | None = None
        self.started = False
        self._drain_failed = False
        self.wake_writer = threading.Event()
        self._wake_sender = threading.Event()
        self.target.abort = threading.Event()  # ends the sender's backoff sleeps
        self._writer_stop = False
        self._stop_sending = threading.Event()
        self._drains = 0
        self._drain_cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._sender: threading.Thread | None = None

    def start(self) -> None:
        """Open the journal and start the threads (at ``init``, and on a forked child's
        first ``log()``)."""
        self.started = True
        if self.journal is not None and self.jappend is None and self.journal.open():
            self.jappend = self.journal.append_record
        self._writer = threading.Thread(
            target=self._writer_loop, name=f"scalewatch-spool[{self.tag}]", daemon=True
        )
        self._writer.start()
        if self.online:
            self._sender = threading.Thread(
                target=self._sender_loop, name=f"scalewatch-send[{self.tag}]", daemon=True
            )
            self._sender.start()

    def after_fork_in_child(self) -> None:
        # Close the child's copy of the sender-lock fd: unlock() only closes (no LOCK_UN), and
        # an flock is held until every copy is closed, so the parent keeps its lock.
        self.spool.unlock()
        if self.journal is not None:
            self.journal.forget()
        self.reset()

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Block until everything queued so far is in spool batch files (not necessarily
        sent); False if that did not happen within ``timeout`` seconds."""
        if not self.started or self._writer is None or not self._writer.is_alive():
            self.drain_to_disk()
            return not self.queue
        with self._drain_cond:
            target = self._drains + 2  # the drain under way may have missed the last points
            self.wake_writer.set()
            return self._drain_cond.wait_for(lambda: self._drains >= target, timeout)

    def close(self, deadline: float, monotonic: Callable[[], float]) -> None:
        """Spool what is queued, close the journal once it is all in batch files, and stop
        both threads, waiting for each until ``deadline`` (of ``monotonic``) at most."""
        writer, sender = self._writer, self._sender
        self._writer_stop = True
        self.wake_writer.set()
        if writer is not None and writer.is_alive():
            writer.join(max(0.0, deadline - monotonic()))
        if self.queue:  # the writer could not finish in time: spool the rest from here
            self.drain_to_disk()
        if not self.queue and self.journal is not None:  # everything is in batch files now
            self.jappend = None
            self.journal.close_and_remove()
        self._stop_sending.set()
        self._wake_sender.set()
        if sender is not None and sender.is_alive():
            sender.join(max(0.0, deadline - monotonic()))
        self.target.abort.set()

    def sender_stopped(self) -> bool:
        """True when a sender ran and has ended (so it holds no lock on the spool)."""
        return self._sender is not None and not self._sender.is_alive()

    # -- writer ----------------------------------------------------------------------------
    def _writer_loop(self) -> None:
        while True:
            self.wake_writer.wait(SPOOL_INTERVAL)
            self.wake_writer.clear()
            stop = self._writer_stop
            try:
                self.drain_to_disk()
            except Exception:  # noqa: BLE001 - the thread must survive anything
                logger.exception("scalewatch: spool writer error")
            with self._drain_cond:
                self._drains += 1
                self._drain_cond.notify_all()
            if stop:
                return

    def drain_to_disk(self) -> None:
        """Move the queue into batch files (at most BATCH_POINTS each) and wake the sender."""
        if self.meta_dirty:  # before the batches: a later `sync` registers from run.json
            self.meta_dirty = False
            try:
                self.spool.write_meta({**self.target.meta, **self.run_json_extra})
            except OSError:
                self.meta_dirty = True
        q = self.queue
        wrote = False
        if q and self.journal is not None and self.jappend is not None and not self._drain_failed:
            # New points go to a fresh generation; the ones being drained stay journaled
            # until two rotations later (Journal.rotate). Not after a failed drain: the
            # generations hold points that are still only in memory.
            self.journal.rotate()
        self._drain_failed = False
        while q:
            batch: list[Point] = []
            try:
                while len(batch) < BATCH_POINTS:
                    batch.append(q.popleft())
            except IndexError:
                pass
            points = [{"step": s, "compute": c, "metrics": dict(zip(k, v, strict=True)),
                       "time": t} for s, c, k, v, t in batch]
            try:
                self.spool.write_batch(points)
                wrote = True
            except OSError as exc:
                q.extendleft(reversed(batch))  # keep them; retry on the next wake-up
                self._drain_failed = True
                logger.error("scalewatch: cannot write spool %s: %s", self.spool.dir, exc)
                excess = len(q) - MAX_MEMORY_POINTS
                if excess > 0:
                    for _ in range(excess):
                        q.popleft()
                    self.lost += excess
                    logger.error(
                        "scalewatch: spool unwritable and memory bound reached: dropped the %d "
                        "oldest points (%d in total)", excess, self.lost,
                    )
                break
        if wrote:
            self._wake_sender.set()

    # -- sender ----------------------------------------------------------------------------
    def _writer_done(self) -> bool:
        writer = self._writer
        return writer is None or not writer.is_alive()

    def _sender_loop(self) -> None:
        conn = Connection(self.url, self.token, timeout=self.timeout)
        try:
            Sender(self.target, conn).loop(
                wake=self._wake_sender, stop=self._stop_sending, writer_done=self._writer_done
            )
        except Exception:  # noqa: BLE001
            logger.exception("scalewatch: sender thread crashed; points stay in the spool")
        finally:
            conn.close()
            self.spool.unlock()
