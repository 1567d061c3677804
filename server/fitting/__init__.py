"""Pure numpy/scipy fitting engine for the ScaleRL sigmoid (no web or database imports).

``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``, C = cumulative compute.

Public API: :class:`FitOptions`, :class:`FitResult`, :func:`fit_curve`, :func:`predict`,
:func:`predict_band`, :func:`compare_fits`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .compare import compare_fits
from .fit import fit_curve
from .intervals import band
from .model import FloatArray, curve
from .result import FitOptions, FitResult

__all__ = ["FitOptions", "FitResult", "compare_fits", "fit_curve", "predict", "predict_band"]


def predict(result: FitResult, compute: ArrayLike) -> FloatArray:
    """Point prediction of ``result`` at ``compute`` (NaN when there is no fit).

    Uses the point estimate of A even when the status is ``unidentified`` (A withheld).
    """
    c = np.asarray(compute, dtype=float)
    p = result.params
    if p is None:
        return np.full(c.shape, np.nan)
    a, b, cm, r0 = p
    return curve(c, a, b, cm, r0)


def predict_band(result: FitResult, compute: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """95% band (lo, hi) of the fitted curve at ``compute``, from the stored draws/envelope.

    NaN where the result carries no uncertainty (insufficient data, baseline methods, or
    ``intervals=False``).
    """
    c = np.asarray(compute, dtype=float)
    if not result.draws and not result.envelope:
        nan = np.full(c.shape, np.nan)
        return nan, nan.copy()
    return band(c, np.array(result.draws).reshape(-1, 4), np.array(result.envelope).reshape(-1, 4))
