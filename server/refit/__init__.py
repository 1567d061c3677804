"""Background refitting: turns dirty (run, metric) series into stored fits."""

from server.refit.worker import Refitter

__all__ = ["Refitter"]
