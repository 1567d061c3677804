"""Background refitting: turns dirty (run, metric) series into stored fits."""

from server.refit.options import fit_options_for, public_fit
from server.refit.worker import Refitter

__all__ = ["Refitter", "fit_options_for", "public_fit"]
