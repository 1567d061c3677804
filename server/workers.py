"""Background workers of a server process: the refitter, alert workers and (`--demo`) the demo."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

from scalewatch.server.alerts.service import start_alert_workers
from scalewatch.server.refit import Refitter

log = logging.getLogger("scalewatch")


def start_workers(app: FastAPI) -> list[Any]:
    settings = app.state.settings
    store = app.state.store
    listeners: list[Any] = []
    workers: list[Any] = []
    alert_workers, alert_listener = start_alert_workers(app)
    workers.extend(alert_workers)
    listeners.append(alert_listener)
    refitter = Refitter(
        store,
        poll_interval=settings.refit_interval,
        metrics=app.state.metrics,
        listeners=listeners,
        group_listeners=[app.state.alert_service.on_group_fit],
    ).start()
    app.state.refitter = refitter
    app.state.refit_notify = refitter.notify
    workers.append(refitter)
    if settings.demo:
        from scalewatch.server.demo.runner import start_demo

        workers.append(start_demo(settings, store))
    return workers
