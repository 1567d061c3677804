"""Fit options and the fit result (JSON round-trippable)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("ok", "unidentified", "insufficient_data")
R0_SOURCES = ("given", "first_point", "fitted")
METHODS = ("default", "paper", "curve_fit")

# Keys of the public JSON object, in order.  ``to_dict()`` returns exactly these.
PUBLIC_KEYS = (
    "status", "A", "B", "C_mid", "R0", "r0_source", "ci", "A_lower_bound", "n_points",
    "fit_range", "target_compute", "predicted_at_target", "predicted_interval", "rmse", "method",
    "break", "prior", "withheld",
)


@dataclass(frozen=True)
class FitOptions:
    """Protocol knobs for one fit (see the module docs in ``server/fitting/__init__.py``)."""

    r0: float | None = None
    warmup: float = 0.0  # exclude compute below it (the paper skips ~1.5k GPU-h)
    fit_until: float | None = None  # use only compute <= it
    target_compute: float | None = None  # extrapolate to it (default: max compute seen)
    value_range: tuple[float, float] = (0.0, 1.0)
    method: str = "default"  # "default" | "paper" | "curve_fit"
    intervals: bool = True  # compute 95% intervals
    # Misspecification allowance of prediction intervals beyond the window, sd per unit
    # ln(C / window end); None = the default learned on real curves (``intervals.DRIFT_RATE``),
    # 0 = trust the sigmoid beyond the data.
    drift_rate: float | None = None
    # The allowance learned per forecast horizon from a project's finished runs, ((horizon,
    # sd), ...) (``hindcast.allowance_knots``); used when ``drift_rate`` is None: the rate at
    # the fit's own ln(target / window end) (``intervals.drift_rate_at``).
    drift_allowance: tuple[tuple[float, float], ...] | None = None
    # Prior on the AR(1) coefficient rho of the evaluation noise, (mean, sd) of a normal
    # truncated to [0, 0.98]; None = flat.  Learned from a project's finished runs, which share
    # its evaluation set and so its noise (``noise_prior.py``); opt-in.
    noise_prior: tuple[float, float] | None = None
    # Prior on the efficiency exponent B, (centre, scale) of a Student-t on ln B; None = the
    # default soft ceiling on B.  Learned from a project's finished runs (``b_prior.py``); opt-in.
    b_prior: tuple[float, float] | None = None


Pair = tuple[float, float]
Params = tuple[float, float, float, float]  # (A, B, C_mid, R0)


def _num(v: float | None) -> float | None:
    """JSON-safe number: NaN/inf become None so the server never stores invalid JSON."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _pair(p: Pair | None) -> list[float | None] | None:
    return None if p is None else [_num(p[0]), _num(p[1])]


def _value_range(v: Any) -> Pair:
    lo, hi = v if v is not None else (0.0, 1.0)
    return (float(lo), float(hi))


def _params(p: Any) -> Params:
    a, b, cm, r0 = p
    return (float(a), float(b), float(cm), float(r0))


def _json_break(b: dict[str, Any] | None) -> dict[str, Any] | None:
    if b is None:
        return None
    out: dict[str, Any] = {}
    for k, v in b.items():
        if isinstance(v, (tuple, list)):
            out[k] = _pair((v[0], v[1]))
        elif isinstance(v, float):
            out[k] = _num(v)
        else:
            out[k] = v
    return out


def _json_withheld(w: dict[str, Any] | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {**w, "reasons": [dict(r) for r in w.get("reasons", ())],
            **{k: _num(w.get(k)) for k in ("compute_to_identify", "compute_to_identify_factor",
                                           "max_factor")}}


@dataclass(frozen=True)
class FitResult:
    """Result of :func:`scalewatch.server.fitting.fit_curve`.

    Public fields map 1:1 onto :meth:`to_dict`.  The remaining fields are internal state: the
    point estimate even when A is withheld (``a_fit``), the noise model, a small sample of
    parameter draws and an envelope of extreme parameter sets for prediction bands, and the
    raw SSR used by warm starts.  ``to_dict(internal=True)`` adds them under ``"internal"`` so
    a stored result can be reloaded with :meth:`from_dict` and still draw its band.

    ``predicted_interval`` is a 95% *prediction* interval for one evaluation of the run at
    ``target_compute`` (curve uncertainty, evaluation noise and an allowance for the sigmoid
    being only approximately right, growing with ln(target / window end); see
    ``server/fitting/intervals.py``).  ``curve_interval`` (internal) is the 95% interval of
    the mean curve there, i.e. :func:`predict_band` at the target.
    """

    status: str
    A: float | None = None
    B: float | None = None
    C_mid: float | None = None
    R0: float | None = None
    r0_source: str = "fitted"
    ci: dict[str, Pair] | None = None
    A_lower_bound: float | None = None
    n_points: int = 0
    fit_range: Pair | None = None
    target_compute: float | None = None
    predicted_at_target: float | None = None
    predicted_interval: Pair | None = None
    rmse: float | None = None
    method: str = "default"
    # A lasting fall below the curve the run was on (``breaks.py``), or None:
    # {"compute", "step", "drop", "drop_ci", "level", "level_ci", "n_after", "ceiling_upper",
    #  "regime"}; "regime" is "fitted" when the result describes the points since the break,
    #  "too_few_points" (fewer than MIN_REGIME since it) or "unidentified" otherwise.
    break_: dict[str, Any] | None = None
    # The prior the fit used beyond the defaults, or None: {"rho": {"mean", "sd"}} (a noise
    # prior, ``FitOptions.noise_prior``) and/or {"B": {"median", "log_sd", "dof"}} (a prior
    # on B, ``FitOptions.b_prior``), each learned from a project's finished runs.
    prior: dict[str, Any] | None = None
    # Why A is withheld, or None when it is claimed (status ok): {"reasons": [{"code",
    # "detail"}, ...], "compute_to_identify", "compute_to_identify_factor", "max_factor"};
    # the codes and the simulation behind the compute are in ``withheld.py``.
    withheld: dict[str, Any] | None = None
    # ---- internal ----
    message: str = ""
    a_fit: float | None = None  # point estimate of A, kept even when status != ok
    sigma: float | None = None  # residual standard deviation
    tau: float | None = None  # integrated autocorrelation time of the residuals
    eval_sd: float | None = None  # standard deviation of one evaluation around the curve
    drift_sd: float | None = None  # misspecification allowance per unit ln(C / window end)
    q: float | None = None  # the 95% t quantile used for the intervals
    rho: Pair | None = None  # posterior (mean, sd) of the noise's AR(1) coefficient
    curve_interval: Pair | None = None  # 95% interval of the mean curve at the target
    ssr: float | None = None
    value_range: Pair = (0.0, 1.0)
    draws: tuple[Params, ...] = field(default=(), repr=False)
    envelope: tuple[Params, ...] = field(default=(), repr=False)

    @property
    def params(self) -> Params | None:
        """(A, B, C_mid, R0) of the point fit, or None when there is none."""
        vals = (self.a_fit, self.B, self.C_mid, self.R0)
        if any(v is None for v in vals):
            return None
        return vals  # type: ignore[return-value]

    def to_dict(self, internal: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "A": _num(self.A),
            "B": _num(self.B),
            "C_mid": _num(self.C_mid),
            "R0": _num(self.R0),
            "r0_source": self.r0_source,
            "ci": None
            if self.ci is None
            else {k: _pair(self.ci.get(k)) for k in ("A", "B", "C_mid")},
            "A_lower_bound": _num(self.A_lower_bound),
            "n_points": int(self.n_points),
            "fit_range": _pair(self.fit_range),
            "target_compute": _num(self.target_compute),
            "predicted_at_target": _num(self.predicted_at_target),
            "predicted_interval": _pair(self.predicted_interval),
            "rmse": _num(self.rmse),
            "method": self.method,
            "break": _json_break(self.break_),
            "prior": self.prior,
            "withheld": _json_withheld(self.withheld),
        }
        if internal:
            out["internal"] = {
                "message": self.message,
                "a_fit": _num(self.a_fit),
                "sigma": _num(self.sigma),
                "tau": _num(self.tau),
                "eval_sd": _num(self.eval_sd),
                "drift_sd": _num(self.drift_sd),
                "q": _num(self.q),
                "rho": _pair(self.rho),
                "curve_interval": _pair(self.curve_interval),
                "ssr": _num(self.ssr),
                "value_range": list(self.value_range),
                "draws": [[round(float(v), 7) for v in d] for d in self.draws],
                "envelope": [[round(float(v), 7) for v in d] for d in self.envelope],
            }
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FitResult:
        """Inverse of :meth:`to_dict` (with or without the ``internal`` block)."""

        def pair(v: Any) -> Pair | None:
            if v is None:
                return None
            lo, hi = v
            return (math.nan if lo is None else float(lo), math.nan if hi is None else float(hi))

        ci = d.get("ci")
        internal = d.get("internal") or {}
        a_fit = internal.get("a_fit", d.get("A"))
        return cls(
            status=d["status"],
            A=d.get("A"),
            B=d.get("B"),
            C_mid=d.get("C_mid"),
            R0=d.get("R0"),
            r0_source=d.get("r0_source", "fitted"),
            ci=None if ci is None else {k: p for k, v in ci.items()
                                        if v is not None and (p := pair(v)) is not None},
            A_lower_bound=d.get("A_lower_bound"),
            n_points=int(d.get("n_points") or 0),
            fit_range=pair(d.get("fit_range")),
            target_compute=d.get("target_compute"),
            predicted_at_target=d.get("predicted_at_target"),
            predicted_interval=pair(d.get("predicted_interval")),
            rmse=d.get("rmse"),
            method=d.get("method", "default"),
            break_=d.get("break"),
            prior=d.get("prior"),
            withheld=d.get("withheld"),
            message=internal.get("message", ""),
            a_fit=a_fit,
            sigma=internal.get("sigma"),
            tau=internal.get("tau"),
            eval_sd=internal.get("eval_sd"),
            drift_sd=internal.get("drift_sd"),
            q=internal.get("q"),
            rho=pair(internal.get("rho")),
            curve_interval=pair(internal.get("curve_interval")),
            ssr=internal.get("ssr"),
            value_range=_value_range(internal.get("value_range")),
            draws=tuple(_params(p) for p in internal.get("draws", ())),
            envelope=tuple(_params(p) for p in internal.get("envelope", ())),
        )
