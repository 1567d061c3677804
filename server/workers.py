"""Background workers of a server process: the refitter, alert workers and (`--demo`) the demo.

With `refit_process` on (what `scalewatch serve` does) the refitter and alert workers run in a
child process at a lower OS priority (`server/refit_process.py`); the server process keeps only
its handle and the demo. Takes the settings, the store and the fit counter, not the web app:
the caller keeps what it needs of the result (`Workers.notify`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from scalewatch.server.config import Settings
from scalewatch.server.refit.worker import FitCounter
from scalewatch.server.refit_process import RefitProcess, start_background
from scalewatch.server.store.base import Store


class Worker(Protocol):
    def stop(self, timeout: float = ...) -> None: ...


@dataclass(frozen=True)
class Workers:
    """What was started (each stopped at shutdown) and how to wake the refitter."""

    started: list[Worker]
    notify: Callable[[], None]

    def stop(self) -> None:
        for w in self.started:
            w.stop()


def start_workers(settings: Settings, store: Store, counts: FitCounter | None) -> Workers:
    started: list[Worker] = []
    if settings.refit_process:
        child = RefitProcess(settings, counts)
        started.append(child)
        notify = child.notify
    else:
        background, notify = start_background(settings, store, counts)
        started.extend(background)
    if settings.demo:
        from scalewatch.server.demo.runner import start_demo

        started.append(start_demo(settings, store))
    return Workers(started, notify)
