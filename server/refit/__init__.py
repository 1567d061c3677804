"""Background refitting: turns dirty (run, metric) series and dirty (group, metric)s into stored
fits (`worker.py`, `groups.py`)."""

from scalewatch.server.refit.worker import Refitter

__all__ = ["Refitter"]
