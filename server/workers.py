"""Background workers of a server process: the refitter, alert workers and (`--demo`) the demo.

With `refit_process` on (what `scalewatch serve` does) the refitter and alert workers run in a
child process at a lower OS priority (`server/refit/process.py`), which calls
`start_background` itself; the server process keeps only the handle and the demo.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from scalewatch.server.alerts.service import start_alert_workers
from scalewatch.server.config import Settings
from scalewatch.server.refit import Refitter
from scalewatch.server.refit.worker import FitCounter
from scalewatch.server.store.base import Store

log = logging.getLogger("scalewatch")


def start_background(
    settings: Settings, store: Store, counts: FitCounter | None
) -> tuple[list[Any], Callable[[], None]]:
    """The refitter and the alert workers, started; and the refitter's `notify`."""
    workers, alerts = start_alert_workers(settings, store)
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
    workers.append(refitter)
    return workers, refitter.notify


def start_workers(app: FastAPI) -> list[Any]:
    settings: Settings = app.state.settings
    workers: list[Any] = []
    if settings.refit_process:
        from scalewatch.server.refit.process import RefitProcess

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
