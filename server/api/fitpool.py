"""Fits asked for by requests (`POST /api/v1/fit`) run in child processes with a deadline.

A thread cannot be stopped: a fit in the request thread pool ran for minutes and held shutdown.
A child process can be killed, so every request fit runs in a small process pool; past the
deadline (or when the request is cancelled, e.g. at shutdown) the pool's processes are killed
and a fresh pool is started on the next request. The event loop only awaits a future, so a
slow fit never occupies a request thread either.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from scalewatch.server import limits


class FitTimeout(Exception):
    """The fit did not finish within the deadline (its process was killed)."""


class FitFailed(Exception):
    """The fitting engine raised on these points (a 422: the points cannot be fitted)."""


def stateless_fit(compute: list[float], values: list[float], options: dict[str, Any]) -> dict:
    """Runs in the child: the fit record of the points (imports kept inside: spawn start)."""
    from scalewatch.server.fitting import FitOptions, fit_curve
    from scalewatch.server.services.fits import fit_record

    with np.errstate(all="ignore"):
        result = fit_curve(np.asarray(compute), np.asarray(values), FitOptions(**options))
    return dict(fit_record(result, internal=False))


def thin_for_paper(compute: list[float], values: list[float]) -> tuple[list, list, int | None]:
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


class FitPool:
    def __init__(self, processes: int, timeout: float) -> None:
        self.processes = processes
        self.timeout = timeout
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False

    def _get(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise BrokenProcessPool("shutting down")
            if self._executor is None:
                # spawn, not fork: forking a process that runs threads (uvicorn, the refitter,
                # database pools) can copy held locks into the child.
                self._executor = ProcessPoolExecutor(
                    self.processes, mp_context=multiprocessing.get_context("spawn")
                )
            return self._executor

    def _kill(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor = None
        # The executor's own processes: killing them is the only way to stop a running fit.
        for proc in list(getattr(executor, "_processes", {}).values()):
            proc.kill()
        executor.shutdown(wait=False, cancel_futures=True)

    async def run(self, compute: list[float], values: list[float], options: dict) -> dict:
        executor = self._get()
        future = executor.submit(stateless_fit, compute, values, options)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except asyncio.TimeoutError as exc:
            self._kill(executor)
            raise FitTimeout(f"the fit took longer than {self.timeout:g} s") from exc
        except asyncio.CancelledError:  # the request went away, or the server is stopping
            self._kill(executor)
            raise
        except BrokenProcessPool:
            self._kill(executor)
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the engine raised on these points
            raise FitFailed(f"{type(exc).__name__}: {exc}"[:300]) from exc

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            self._kill(executor)
