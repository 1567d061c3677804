"""Pure numpy/scipy fitting engine for the ScaleRL sigmoid (no web or database imports).

``R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)``, C = cumulative compute (arXiv 2510.13786).

Public API: :class:`FitOptions`, :class:`FitResult`, :func:`fit_curve`, :func:`predict`,
:func:`predict_band`, :func:`predict_with_band`, :func:`predict_interval`,
:func:`compare_fits`.
``FitResult.to_dict()`` is the public JSON object (with ``break``, ``prior`` and ``withheld``);
``to_dict(internal=True)`` adds an ``"internal"`` block (posterior draws, noise model, curve
interval, message) that :meth:`FitResult.from_dict` needs to redraw the bands after a reload.

How ``method="default"`` fits (modules in brackets):

1. Clean (drop NaN/inf/negative compute), fix R0 (``given`` > ``first_point`` at compute 0 >
   ``fitted``), apply ``warmup`` / ``fit_until`` [fit].
2. Global search over a 56 x 36 grid of (log C_mid, B) on data binned in log-compute, with A
   (and R0 when fitted) in closed form, clipped to ``value_range`` [grid].
3. Bounded Levenberg-Marquardt refinement with the analytic Jacobian (a small solver of its own,
   a tenth of ``scipy.optimize.least_squares``' per-call overhead) [lm]; never worse than the
   grid's best cell.  A ``previous`` result warm-starts it and skips the grid unless a check
   grid finds a better SSR [fit].  This point fit gives the noise model: residual sd and an AR(1)
   autocorrelation time averaged over the uncertainty of its coefficient [intervals].
4. Breaks: are the newest evaluations lastingly below the curve fitted to the points before
   them (tested as a step and as a slide, confirmed with that curve's posterior)?  A
   linearised screen of all candidate breaks at once [breakscreen] picks the few that are
   refitted exactly, so a stable run pays almost nothing for the test.  Then the
   result carries ``break`` (where, how much, an upper bound on the new ceiling) and describes
   the regime since the break when it can be fitted [breaks].
5. Uncertainty from a grid posterior over (rho, ln C_mid, B): the evaluation noise is AR(1) in
   evaluation order with its rho and sigma integrated out (Prais-Winsten whitening keeps A and
   R0 linear, so each cell is closed form), Jeffreys' prior over the curve's shape (ln C_mid,
   B in [0.5, 8]) -- without the gain's factor, which would be a prior pulling A up, and
   computed for the window's evaluations continued at their pace to 1.5 x its end, since over
   the window alone it favours knees inside the window and holds a young run's A low -- times
   a soft ceiling on B (free up to 2.5, a t tail beyond: no published RL curve is steeper, and a
   young run's banana reaches B = 5-8 under a low ceiling) [b_prior], flat
   priors on A and R0, and a flat prior on rho -- or, opt-in (``FitOptions.noise_prior``), a
   normal prior on rho learned from the project's finished runs, which share its evaluation
   set [noise_prior]; also opt-in (``FitOptions.b_prior``, replacing the ceiling), a
   Student-t prior on ln B learned from the B of the project's finished, identified runs,
   which shortens the (A, B, C_mid) banana of a young run of a similar recipe while its
   heavy tails let a recipe that differs keep its own [b_prior]; A
   never gets a prior.  The result names what it used in ``prior``; a refined grid over the
   posterior mass (refined again while the mass spans fewer than 8 of its cells an axis, as
   on a curve with almost no noise), then 4,000 draws [ar1, posterior].
   A's interval (widened by the ceiling's model error, ``intervals.A_MODEL_SD``) and the B
   and C_mid intervals are posterior quantiles; the public
   A is the posterior median; the forecast (``predicted_at_target``, :func:`predict`) is the
   posterior median of the curve; the band (:func:`predict_band`) its quantiles.  The
   *prediction* interval (``predicted_interval``, :func:`predict_interval`) adds evaluation
   noise and, beyond the window, a misspecification allowance learned on real curves
   (``FitOptions.drift_rate``) [intervals] -- or, once a project has 19 finished runs, what
   its own runs needed beyond their forecasts from 1/2, 1/3 and 1/5 of their compute (their
   *hindcasts*: a split-conformal rank per horizon, so the promise of 95% holds for the
   project's runs whatever the shape of their misses), taken at the forecast's own distance
   past its window (``FitOptions.drift_allowance``) [hindcast].
6. Status: ``insufficient_data`` (< 5 usable points, < 4 distinct compute values, no upward
   signal, or a collapse with no break to report), ``unidentified`` (A's 95% interval touches
   the value range or is wider than 0.1, C_mid may lie beyond the data, the window ends short
   of 2.5 x the fitted C_mid -- claims before that held the true A only ~80% of the time -- or
   the run broke and the new regime cannot be fitted yet; A withheld, ``A_lower_bound``
   given), else ``ok``.
   0.1 is a product choice: an A known to +-0.05 is what a user can act on (the paper's own
   margin for "same ceiling" is 0.02, and comparisons use the full intervals).

``bench/calibration.py`` measures coverage, identification against an oracle and forecast
errors per noise family and fit window (``--noise-prior``: with the drift rate, and the
opt-in priors, learned leave-one-out per family); ``bench/alerts.py`` the break alerts,
beside an oracle that knows the true curve and noise.

``method="paper"`` / ``"curve_fit"`` are reference procedures for comparison [paper].
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import numpy as np

from .result import FitOptions, FitResult

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .compare import compare_fits
    from .fit import fit_curve
    from .model import FloatArray

# The engine's scipy half loads on first use (PEP 562), so what only reads the fit's
# declaration (``result.py``: the store's record shape, a CLI command) does not pay for it.
_LAZY = {"compare_fits": ".compare", "fit_curve": ".fit"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "FitOptions", "FitResult", "compare_fits", "fit_curve", "predict", "predict_band",
    "predict_interval", "predict_with_band",
]


def predict(result: FitResult, compute: ArrayLike) -> FloatArray:
    """Point prediction of ``result`` at ``compute`` (NaN when there is no fit).

    With posterior draws (the default method with intervals) it is the pointwise posterior
    median of the curve: the line the dashboard draws, the centre of its band and
    ``predicted_at_target`` are then one and the same forecast.  Otherwise the point fit's
    curve (also when A is withheld).
    """
    from .model import curve, curves_many  # noqa: PLC0415 - scipy on first use

    c = np.asarray(compute, dtype=float)
    p = result.params
    if p is None:
        return np.full(c.shape, np.nan)
    if result.draws:
        flat = c.reshape(-1)
        med = np.median(curves_many(flat, np.array(result.draws).reshape(-1, 4)), axis=0)
        return med.reshape(c.shape)
    a, b, cm, r0 = p
    return curve(c, a, b, cm, r0)


def predict_band(result: FitResult, compute: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """95% band (lo, hi) of the fitted curve at ``compute``, from the stored draws/envelope.

    NaN where the result carries no uncertainty (insufficient data, baseline methods, or
    ``intervals=False``).
    """
    from .intervals import band  # noqa: PLC0415 - scipy on first use

    c = np.asarray(compute, dtype=float)
    if not result.draws and not result.envelope:
        nan = np.full(c.shape, np.nan)
        return nan, nan.copy()
    return band(c, np.array(result.draws).reshape(-1, 4), np.array(result.envelope).reshape(-1, 4))


def predict_with_band(
    result: FitResult, compute: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(:func:`predict`, then :func:`predict_band`'s lo and hi) at ``compute``, evaluating
    the draws once: what a chart needs to draw a run's line and band."""
    from .intervals import median_and_band  # noqa: PLC0415 - scipy on first use

    c = np.asarray(compute, dtype=float)
    if not result.draws:
        lo, hi = predict_band(result, c)
        return predict(result, c), lo, hi
    med, lo, hi = median_and_band(c, np.array(result.draws).reshape(-1, 4),
                                  np.array(result.envelope).reshape(-1, 4))
    if result.params is None:
        med = np.full(c.shape, np.nan)
    return med, lo, hi


def predict_interval(
    result: FitResult, compute: ArrayLike, n_evals: int = 1, misspecification: bool = True
) -> tuple[FloatArray, FloatArray]:
    """95% prediction interval (lo, hi) for what the run will *show* at ``compute``.

    ``n_evals=1``: one evaluation there (what ``predicted_interval`` reports at the target);
    ``n_evals=k``: the mean of ``k`` consecutive evaluations around there (their evaluation
    noise partly averages out, less so the more it is autocorrelated).  It is the curve band
    of :func:`predict_band` widened by the evaluation noise and, beyond the fit window, by the
    misspecification allowance (``drift_sd`` per unit ln(compute / window end)); NaN where
    there is no band.  ``misspecification=False`` leaves the allowance out: the interval is
    then exact-model statistics only (~95% when the curve really is a sigmoid; the default is
    somewhat wider there, by design).
    """
    from .intervals import extra_half_width, mean_noise_sd, widen  # noqa: PLC0415

    c = np.asarray(compute, dtype=float)
    centre, lo, hi = predict_with_band(result, c)
    if (result.eval_sd is None or result.q is None or result.params is None
            or result.fit_range is None):
        return lo, hi
    with np.errstate(divide="ignore"):
        beyond = np.log(np.maximum(c, 1e-300) / result.fit_range[1])
    half = extra_half_width(result.q, mean_noise_sd(result.eval_sd, result.tau or 1.0, n_evals),
                            (result.drift_sd or 0.0) if misspecification else 0.0, beyond)
    p_lo, p_hi = widen(lo, hi, centre, half)
    v_lo, v_hi = result.value_range
    return np.maximum(p_lo, v_lo), np.minimum(p_hi, v_hi)
