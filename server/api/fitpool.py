"""Fits asked for by requests (`POST /api/v1/fit`) run in child processes with a deadline.

A thread cannot be stopped: a fit in the request thread pool ran for minutes and held shutdown.
A child process can be killed, so every request fit runs in one of a few fit processes, one fit
at a time each. Past its deadline (or when its request is cancelled, e.g. at shutdown) only
that fit's process is killed, and a fresh one takes its place when next needed: a
`ProcessPoolExecutor` could only be killed whole, which failed every other fit in it (500s).
Fits beyond the processes wait in a bounded queue; past it the answer is 503 with Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import numpy as np

from scalewatch.server import limits


class FitTimeout(Exception):
    """The fit did not finish within the deadline (its process was killed)."""


class FitFailed(Exception):
    """The fitting engine raised on these points (a 422: the points cannot be fitted)."""


class FitUnavailable(Exception):
    """No fit can start now (a 503 with Retry-After): every fit process is busy and the queue
    is full, the fit's process died under it, or the server is stopping."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def stateless_fit(
    compute: list[float], values: list[float], options: dict[str, Any]
) -> dict[str, Any]:
    """Runs in the child: the fit record of the points (imports kept inside: spawn start)."""
    from scalewatch.server.fitting import FitOptions, fit_curve
    from scalewatch.server.services.fits import fit_record

    with np.errstate(all="ignore"):
        result = fit_curve(np.asarray(compute), np.asarray(values), FitOptions(**options))
    return dict(fit_record(result, internal=False))


def thin_for_paper(
    compute: list[float], values: list[float]
) -> tuple[list[Any], list[Any], int | None]:
    """The paper's procedure costs a few ms per point and grid cell: above
    `MAX_PAPER_FIT_POINTS` points keep that many, evenly spaced in compute order (first and
    last kept). Returns (compute, values, original count or None when nothing was dropped)."""
    n = len(compute)
    if n <= limits.MAX_PAPER_FIT_POINTS:
        return compute, values, None
    order = np.argsort(np.asarray(compute), kind="stable")
    keep = order[np.linspace(0, n - 1, limits.MAX_PAPER_FIT_POINTS).round().astype(int)]
    c, y = np.asarray(compute)[keep], np.asarray(values)[keep]
    return c.tolist(), y.tolist(), n


# A new fit process imports numpy and scipy before it takes work: not part of any fit's deadline.
_START_TIMEOUT = 120.0


def _serve(conn: Connection) -> None:
    """A fit process: fits one job at a time until its pipe closes (the server went away)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal: the server decides
    # One small fit first: every import a fit needs (numpy, scipy, the engine) happens here,
    # before the process takes work, and so never counts against a request's deadline.
    warm = np.linspace(1.0, 100.0, 20)
    with contextlib.suppress(Exception):
        stateless_fit(warm.tolist(), (0.1 + 0.5 * warm / (warm + 30.0)).tolist(), {})
    conn.send("ready")
    while True:
        try:
            compute, values, options = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", stateless_fit(compute, values, options))
        except Exception as exc:  # noqa: BLE001 - whatever the engine raised on these points
            reply = ("error", f"{type(exc).__name__}: {exc}"[:300])
        conn.send(reply)


class _Lost(Exception):
    """The fit process died (killed, out of memory) or never started."""


class _Late(Exception):
    """No answer within the deadline: the process is still running the fit."""


class _Worker:
    """One fit process and the parent's end of its pipe."""

    def __init__(self, ctx: SpawnContext) -> None:
        self.conn, child = ctx.Pipe()
        self.proc: SpawnProcess = ctx.Process(
            target=_serve, args=(child,), daemon=True, name="scalewatch-fit"
        )
        self.proc.start()
        child.close()
        self.ready = False

    def fit(self, job: tuple[Any, ...], timeout: float) -> dict[str, Any]:
        """The fit's record; FitFailed, _Late or _Lost. Called from one thread at a time."""
        try:
            if not self.ready:
                if not self.conn.poll(_START_TIMEOUT):
                    raise _Lost("the fit process did not start")
                self.conn.recv()
                self.ready = True
            self.conn.send(job)
            if not self.conn.poll(timeout):
                raise _Late
            kind, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise _Lost("the fit process died") from exc
        if kind != "ok":
            raise FitFailed(value)
        return value

    def kill(self) -> None:
        """Stop the process (a running fit with it): the thread waiting on its pipe wakes."""
        if self.proc.is_alive():
            self.proc.kill()

    def close(self) -> None:
        self.kill()
        self.proc.join(10)
        self.conn.close()


class _Job:
    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args
        self.worker: _Worker | None = None
        self.cancelled = False


class FitPool:
    """At most `processes` fits at once, each in its own process; `queue` more may wait."""

    def __init__(self, processes: int, timeout: float, queue: int = 8) -> None:
        self.processes = processes
        self.timeout = timeout
        self.queue = queue
        self._ctx = multiprocessing.get_context("spawn")  # fork would copy held locks
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._workers: set[_Worker] = set()
        self._admitted = 0  # running or waiting
        self._slots: asyncio.Semaphore | None = None
        self._threads = ThreadPoolExecutor(processes, thread_name_prefix="scalewatch-fit")
        self._closed = False

    @property
    def retry_after(self) -> int:
        """Seconds to suggest to a refused client: about one fit's deadline (at most 30)."""
        return max(1, math.ceil(min(self.timeout, 30.0)))

    def _admit(self) -> None:
        with self._lock:
            if self._closed:
                raise FitUnavailable("the server is stopping", self.retry_after)
            if self._admitted >= self.processes + self.queue:
                raise FitUnavailable(
                    f"all {self.processes} fit processes are busy and {self.queue} fits are "
                    "waiting", self.retry_after,
                )
            self._admitted += 1

    async def run(
        self, compute: list[float], values: list[float], options: dict[str, Any]
    ) -> dict[str, Any]:
        self._admit()
        try:
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.processes)
            async with self._slots:
                return await self._run_in_thread(_Job((compute, values, options)))
        finally:
            with self._lock:
                self._admitted -= 1

    async def _run_in_thread(self, job: _Job) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._threads, self._fit, job)
        except asyncio.CancelledError:  # the request went away, or the server is stopping
            job.cancelled = True
            if job.worker is not None:
                job.worker.kill()
            raise

    def _fit(self, job: _Job) -> dict[str, Any]:
        """In a pool thread: the job on an idle process (or a new one), past its deadline
        only that process is killed."""
        worker = self._checkout()
        job.worker = worker
        if job.cancelled:
            self._discard(worker)
            raise FitUnavailable("the request was cancelled", self.retry_after)
        try:
            result = worker.fit(job.args, self.timeout)
        except _Late as exc:
            self._discard(worker)
            raise FitTimeout(f"the fit took longer than {self.timeout:g} s") from exc
        except _Lost as exc:
            self._discard(worker)
            raise FitUnavailable(str(exc), self.retry_after) from exc
        except FitFailed:
            self._checkin(worker)
            raise
        self._checkin(worker)
        return result

    def _checkout(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise FitUnavailable("the server is stopping", self.retry_after)
            if self._idle:
                return self._idle.pop()
        worker = _Worker(self._ctx)  # started outside the lock: a spawn takes a while
        with self._lock:
            self._workers.add(worker)
            closed = self._closed
        if closed:  # shutdown() ran meanwhile and did not see this one
            self._discard(worker)
            raise FitUnavailable("the server is stopping", self.retry_after)
        return worker

    def _checkin(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed and worker.proc.is_alive():
                self._idle.append(worker)
                return
        self._discard(worker)

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)
        worker.close()

    def shutdown(self) -> None:
        """Kill every fit process, running fits included (their requests get 503)."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
            self._idle.clear()
        for worker in workers:
            worker.kill()
        self._threads.shutdown(wait=False, cancel_futures=True)
