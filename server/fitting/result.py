"""Fit options and the fit result (JSON round-trippable).

:class:`FitResult` is the one declaration of a fit: each field's ``metadata`` (a
:class:`JsonField`) says how it goes to JSON and back, its JSON type, its description in the
API, and whether run lists (the summary) and fit histories carry it. ``to_dict``/``from_dict``,
``PUBLIC_KEYS``, the store's summary and history rows (``server/store/fit_records.py``) and the
API's pydantic models (``server/api/schemas/fit_shapes.py``) are all derived from it, so a new
field is declared here once. The one mirror Python's type system needs, the ``FitJSON``
TypedDict below, is pinned to the fields by ``tests/fitting/test_fit_shape.py``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

# "pending": no fit stored yet and one is queued; only ever set by the service that answers
# for a metric without a stored fit (``server/services/fits.py``, ``not_fitted``).
FitStatus = Literal["ok", "unidentified", "insufficient_data", "pending"]
FitMethod = Literal["default", "paper", "curve_fit"]
STATUSES: tuple[FitStatus, ...] = ("ok", "unidentified", "insufficient_data")  # the engine's
R0_SOURCES = ("given", "first_point", "fitted")
METHODS: tuple[FitMethod, ...] = get_args(FitMethod)


@dataclass(frozen=True)
class FitOptions:
    """Protocol knobs for one fit (see the module docs in ``server/fitting/__init__.py``)."""

    r0: float | None = None
    warmup: float = 0.0  # exclude compute below it (the paper skips ~1.5k GPU-h)
    fit_until: float | None = None  # use only compute <= it
    target_compute: float | None = None  # extrapolate to it (default: max compute seen)
    value_range: tuple[float, float] = (0.0, 1.0)
    method: FitMethod = "default"
    intervals: bool = True  # compute 95% intervals
    # Misspecification allowance of prediction intervals beyond the window, sd per unit
    # ln(C / window end); None = the default learned on real curves (``intervals.DRIFT_RATE``),
    # 0 = trust the sigmoid beyond the data.
    drift_rate: float | None = None
    # The allowance learned per forecast horizon from a project's finished runs, ((horizon,
    # sd), ...) (``hindcast.allowance_knots``), the sd in units of the value range; used when
    # ``drift_rate`` is None: the rate at the fit's own ln(target / window end)
    # (``intervals.drift_rate_at``).
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
# [low, high] of an interval in JSON; an end is null where it is not finite.
Interval = tuple[float | None, float | None]


def _num(v: float | None) -> float | None:
    """JSON-safe number: NaN/inf become None so the server never stores invalid JSON."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _pair(p: Pair | None) -> list[float | None] | None:
    return None if p is None else [_num(p[0]), _num(p[1])]


def _load_pair(v: Any) -> Pair | None:
    if v is None:
        return None
    lo, hi = v
    return (math.nan if lo is None else float(lo), math.nan if hi is None else float(hi))


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


def _same(v: Any) -> Any:
    return v


@dataclass(frozen=True)
class Codec:
    """How one kind of field goes to JSON (``dump``) and back (``load``), and its JSON type
    (a typing expression, which the API's schema is built from)."""

    dump: Callable[[Any], Any]
    load: Callable[[Any], Any]
    json_type: Any


NUMBER = Codec(_num, _same, float | None)
COUNT = Codec(int, lambda v: int(v or 0), int)
TEXT = Codec(_same, _same, str)
STATUS = Codec(_same, _same, FitStatus)
METHOD = Codec(_same, _same, FitMethod)
INTERVAL = Codec(_pair, _load_pair, Interval | None)
OBJECT = Codec(_same, _same, dict[str, Any] | None)
_CI_KEYS = ("A", "B", "C_mid")
CI = Codec(
    lambda ci: None if ci is None else {k: _pair(ci.get(k)) for k in _CI_KEYS},
    lambda ci: None if ci is None else {
        k: p for k, v in ci.items() if v is not None and (p := _load_pair(v)) is not None},
    dict[str, Interval | None] | None)
BREAK = Codec(_json_break, _same, dict[str, Any] | None)
WITHHELD = Codec(_json_withheld, _same, dict[str, Any] | None)
VALUE_RANGE = Codec(list, _value_range, tuple[float, float])
PARAMETER_SETS = Codec(lambda ps: [[round(float(v), 7) for v in p] for p in ps],
                       lambda ps: tuple(_params(p) for p in ps or ()),
                       list[tuple[float, float, float, float]])


@dataclass(frozen=True)
class JsonField:
    """What a :class:`FitResult` field is outside the engine (its ``metadata["json"]``)."""

    codec: Codec
    doc: str | None = None  # its description in the API's schema
    key: str | None = None  # its JSON key, when not the attribute's name (``break_``)
    public: bool = True  # False: internal state, under "internal" in to_dict(internal=True)
    summary: bool = False  # carried by run lists (``fit_records.fit_summary``)
    # Carried by fit histories: True, or the sub-keys kept of an object field.
    history: bool | tuple[str, ...] = False


def json_field(codec: Codec, doc: str | None = None, *, key: str | None = None,
               summary: bool = False, history: bool | tuple[str, ...] = False,
               public: bool = True) -> dict[str, JsonField]:
    """A FitResult field's ``metadata``: ``field(default=..., metadata=json_field(NUMBER,
    "its description in the API", summary=True))`` declares a public field everywhere."""
    return {"json": JsonField(codec, doc, key, public, summary, history)}


def internal_field(codec: Codec) -> dict[str, JsonField]:
    return json_field(codec, public=False)


# What a history row keeps of a fit's break: where it started, how far the run fell and the
# most its new ceiling can be -- the A that a broken fit withholds, so the A history does not
# fall silent exactly when the ceiling drops.
BREAK_HISTORY_KEYS = ("compute", "step", "drop", "ceiling_upper", "regime")


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

    status: FitStatus = field(metadata=json_field(
        STATUS, "ok, unidentified or insufficient_data", summary=True, history=True))
    A: float | None = field(default=None, metadata=json_field(
        NUMBER, "asymptote (null unless identified)", summary=True, history=True))
    B: float | None = field(default=None, metadata=json_field(NUMBER, summary=True, history=True))
    C_mid: float | None = field(default=None, metadata=json_field(
        NUMBER, summary=True, history=True))
    R0: float | None = field(default=None, metadata=json_field(NUMBER, summary=True))
    r0_source: str = field(default="fitted", metadata=json_field(TEXT))
    ci: dict[str, Pair] | None = field(default=None, metadata=json_field(
        CI, "95% intervals per parameter", summary=True))
    A_lower_bound: float | None = field(default=None, metadata=json_field(
        NUMBER, "how high A is at least", summary=True, history=True))
    n_points: int = field(default=0, metadata=json_field(COUNT, summary=True, history=True))
    fit_range: Pair | None = field(default=None, metadata=json_field(INTERVAL))
    target_compute: float | None = field(default=None, metadata=json_field(NUMBER, summary=True))
    predicted_at_target: float | None = field(default=None, metadata=json_field(
        NUMBER, summary=True, history=True))
    predicted_interval: Pair | None = field(default=None, metadata=json_field(
        INTERVAL, summary=True))
    rmse: float | None = field(default=None, metadata=json_field(NUMBER))
    method: FitMethod = field(default="default", metadata=json_field(METHOD))
    # A lasting fall below the curve the run was on (``breaks.py``), or None:
    # {"compute", "step", "drop", "drop_ci", "level", "level_ci", "n_after", "ceiling_upper",
    #  "regime"}; "regime" is "fitted" when the result describes the points since the break,
    #  "too_few_points" (fewer than MIN_REGIME since it) or "unidentified" otherwise.
    break_: dict[str, Any] | None = field(default=None, metadata=json_field(
        BREAK, "the fit's break or null: a lasting fall below the curve the run was on "
        "(compute, step, drop, ceiling_upper, regime; a fit adds drop_ci, level, level_ci and "
        "n_after, a history row keeps those five): a broken run's fit withholds A, and "
        "ceiling_upper bounds its new ceiling; regime is 'fitted' when A and the forecast "
        "describe the evaluations since the break, 'too_few_points' (fewer than 12 since it) "
        "or 'unidentified'",
        key="break", summary=True, history=BREAK_HISTORY_KEYS))
    # The prior the fit used beyond the defaults, or None: {"rho": {"mean", "sd"}} (a noise
    # prior, ``FitOptions.noise_prior``) and/or {"B": {"median", "log_sd", "dof"}} (a prior
    # on B, ``FitOptions.b_prior``), each learned from a project's finished runs.
    prior: dict[str, Any] | None = field(default=None, metadata=json_field(
        OBJECT, "what the fit took from beyond the run's points, or null: the drift "
        "allowance its project's finished runs set (drift_rate, hindcasts) and the opt-in "
        "priors (rho, B)", summary=True))
    # Why A is withheld, or None when it is claimed (status ok): {"reasons": [{"code",
    # "detail"}, ...], "compute_to_identify", "compute_to_identify_factor", "max_factor"};
    # the codes and the simulation behind the compute are in ``withheld.py``.
    withheld: dict[str, Any] | None = field(default=None, metadata=json_field(
        WITHHELD, "why A is withheld, or null when it is claimed: reasons (each a code: "
        "recent_break, misspecified, interval_at_bound, interval_too_wide, noise_persistent, "
        "short_of_knee, insufficient_data or not_identified, and a sentence), "
        "compute_to_identify (the compute at which A would roughly be identified, simulated "
        "from the fit's posterior; null when not within max_factor x the compute so far, or "
        "when more of the same data would not help) and compute_to_identify_factor (that over "
        "the fit window's end)", summary=True, history=True))
    # ---- internal ----
    message: str = field(default="", metadata=internal_field(TEXT))
    # point estimate of A, kept even when status != ok
    a_fit: float | None = field(default=None, metadata=internal_field(NUMBER))
    sigma: float | None = field(default=None, metadata=internal_field(NUMBER))  # residual sd
    # integrated autocorrelation time of the residuals
    tau: float | None = field(default=None, metadata=internal_field(NUMBER))
    # standard deviation of one evaluation around the curve
    eval_sd: float | None = field(default=None, metadata=internal_field(NUMBER))
    # misspecification allowance per unit ln(C / window end)
    drift_sd: float | None = field(default=None, metadata=internal_field(NUMBER))
    q: float | None = field(default=None, metadata=internal_field(NUMBER))  # the 95% t quantile
    # posterior (mean, sd) of the noise's AR(1) coefficient
    rho: Pair | None = field(default=None, metadata=internal_field(INTERVAL))
    # 95% interval of the mean curve at the target
    curve_interval: Pair | None = field(default=None, metadata=internal_field(INTERVAL))
    ssr: float | None = field(default=None, metadata=internal_field(NUMBER))
    value_range: Pair = field(default=(0.0, 1.0), metadata=internal_field(VALUE_RANGE))
    draws: tuple[Params, ...] = field(default=(), repr=False,
                                      metadata=internal_field(PARAMETER_SETS))
    envelope: tuple[Params, ...] = field(default=(), repr=False,
                                         metadata=internal_field(PARAMETER_SETS))

    @property
    def params(self) -> Params | None:
        """(A, B, C_mid, R0) of the point fit, or None when there is none."""
        vals = (self.a_fit, self.B, self.C_mid, self.R0)
        if any(v is None for v in vals):
            return None
        return vals  # type: ignore[return-value]

    def to_dict(self, internal: bool = False) -> FitJSON:
        """The public JSON object (``PUBLIC_KEYS``, in order); with ``internal``, the
        engine's state under ``"internal"`` too."""
        public, private = json_fields(type(self))
        out: dict[str, Any] = {
            key: spec.codec.dump(getattr(self, name)) for name, key, spec in public}
        if internal:
            out["internal"] = {
                key: spec.codec.dump(getattr(self, name)) for name, key, spec in private}
        return out  # type: ignore[return-value]  # the keys FitJSON mirrors (pinned by a test)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FitResult:
        """Inverse of :meth:`to_dict` (with or without the ``internal`` block); a key a stored
        fit lacks takes the field's default."""
        internal = d.get("internal") or {}
        kwargs: dict[str, Any] = {}
        for source, fields in zip((d, internal), json_fields(cls), strict=True):
            for name, key, spec in fields:
                if key in source:
                    kwargs[name] = spec.codec.load(source[key])
        kwargs["status"] = d["status"]
        kwargs.setdefault("a_fit", d.get("A"))  # stored without internals: the public A
        return cls(**kwargs)


# (attribute, JSON key, spec) of each field
FieldTable = tuple[tuple[str, str, JsonField], ...]


_TABLES: dict[type[FitResult], tuple[FieldTable, FieldTable]] = {}


def json_fields(cls: type[FitResult]) -> tuple[FieldTable, FieldTable]:
    """The public and the internal fields of ``cls`` (FitResult, or a subclass that declares
    more), each in declaration order."""
    if (tables := _TABLES.get(cls)) is not None:
        return tables
    public: list[tuple[str, str, JsonField]] = []
    private: list[tuple[str, str, JsonField]] = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("json")
        if not isinstance(spec, JsonField):
            raise TypeError(f"{cls.__name__}.{f.name} has no metadata['json']: say how it goes "
                            "to JSON (see JsonField)")
        (public if spec.public else private).append((f.name, spec.key or f.name, spec))
    tables = _TABLES[cls] = (tuple(public), tuple(private))
    return tables


PUBLIC_FIELDS, INTERNAL_FIELDS = json_fields(FitResult)
# Keys of the public JSON object, in order.  ``to_dict()`` returns exactly these.
PUBLIC_KEYS = tuple(key for _, key, _ in PUBLIC_FIELDS)
# The public keys run lists carry, and those fit histories carry (with the sub-keys kept).
SUMMARY_FIT_KEYS = tuple(key for _, key, spec in PUBLIC_FIELDS if spec.summary)
HISTORY_FIT_KEYS: dict[str, bool | tuple[str, ...]] = {
    key: spec.history for _, key, spec in PUBLIC_FIELDS if spec.history}


# The public JSON object for type checkers: a mirror of the public fields above (a TypedDict
# cannot be computed where mypy would see it), pinned to them by tests/fitting/test_fit_shape.py.
# The functional form because one key, "break", is a Python keyword. Not total: stored fits of
# older versions and pending ones may lack keys (``to_dict`` always gives them all).
FitJSON = TypedDict("FitJSON", {
    "status": FitStatus,
    "A": float | None,
    "B": float | None,
    "C_mid": float | None,
    "R0": float | None,
    "r0_source": str,
    "ci": dict[str, Interval | None] | None,
    "A_lower_bound": float | None,
    "n_points": int,
    "fit_range": Interval | None,
    "target_compute": float | None,
    "predicted_at_target": float | None,
    "predicted_interval": Interval | None,
    "rmse": float | None,
    "method": FitMethod,
    "break": dict[str, Any] | None,
    "prior": dict[str, Any] | None,
    "withheld": dict[str, Any] | None,
}, total=False)
