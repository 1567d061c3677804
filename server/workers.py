"""Background workers of a server process: the refitter, alert workers and (`--demo`) the demo.

With `refit_process` on (what `scalewatch serve` does) the refitter and alert workers run in a
child process at a lower OS priority (`server/refit_process.py`); the server process keeps only
its handle and the demo.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from scalewatch.server.config import Settings
from scalewatch.server.refit_process import RefitProcess, start_background


def start_workers(app: FastAPI) -> list[Any]:
    settings: Settings = app.state.settings
    workers: list[Any] = []
    if settings.refit_process:
        child = RefitProcess(settings, app.state.metrics)
        workers.append(child)
        app.state.refit_notify = child.notify
    else:
        started, notify = start_background(settings, app.state.store, app.state.metrics)
        workers.extend(started)
        app.state.refit_notify = notify
    if settings.demo:
        from scalewatch.server.demo.runner import start_demo

        workers.append(start_demo(settings, app.state.store))
    return workers
