"""Request and response models of the REST API (what /docs shows)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, field_validator, model_validator

from scalewatch.server import limits
from scalewatch.server.alerts.checks import MAX_SECRET, MAX_URL, url_problem
from scalewatch.server.alerts.kinds import AlertKind
from scalewatch.server.alerts.rules import KIND_HELP
from scalewatch.server.fitting.b_prior import check_b_prior
from scalewatch.server.fitting.noise_prior import check_rho_prior

Name = Field(min_length=1, max_length=limits.MAX_NAME_LENGTH)
RunStatus = Literal["running", "finished", "failed"]
AlertState = Literal["open", "acknowledged", "resolved"]

# Every id (runs, rules, alerts, tokens) is a 32-bit integer column: one range everywhere, so a
# larger id is a 422, never a database error.
ID_MAX = 2**31 - 1
Id = Annotated[int, Field(ge=1, le=ID_MAX)]
"""An id in a body or a query list."""
PathId = Annotated[int, Path(ge=1, le=ID_MAX)]
"""An id in the path (`/runs/{run_id}`, `/alerts/{alert_id}`, ...)."""


def utf8_problem(text: str) -> bool:
    """True when `text` cannot be sent back as UTF-8 (a lone surrogate such as "\\udfff", which
    JSON escapes can carry): stored, it would turn every later response that shows it into a
    500, so it is refused on the way in."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _utf8(text: str, what: str) -> str:
    if utf8_problem(text):
        raise ValueError(f"{what} must be valid UTF-8 text (no lone surrogates)")
    return text


def _clean(text: str, what: str) -> str:
    _utf8(text, what)
    # PostgreSQL text cannot hold NUL; reject it up front instead of failing at INSERT time.
    if "\x00" in text:
        raise ValueError(f"{what} must not contain NUL characters")
    if not text.strip():
        raise ValueError(f"{what} must not be blank")
    return text


def _check_json(value: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what} must be JSON without NaN or Infinity ({exc})") from exc
    # json.dumps escapes lone surrogates ("\\udfff") instead of failing: encode without the
    # escaping to find them (keys and values, at any depth).
    if utf8_problem(json.dumps(value, ensure_ascii=False)):
        raise ValueError(f"{what} must be valid UTF-8 text (no lone surrogates)")
    if "\\u0000" in encoded:
        raise ValueError(f"{what} must not contain NUL characters")
    if len(encoded) > limits.MAX_CONFIG_BYTES:
        raise ValueError(f"{what} is larger than {limits.MAX_CONFIG_BYTES} bytes")
    return value


def _check_notes(notes: str | None) -> str | None:
    if notes is not None:
        _utf8(notes, "notes")
    if notes is not None and "\x00" in notes:
        raise ValueError("notes must not contain NUL characters")
    return notes


GroupName = Field(
    None,
    min_length=1,
    max_length=limits.MAX_GROUP_LENGTH,
    description="the run's group (its recipe, e.g. cispo-768): runs of one group are its seeds",
)


def _check_group(v: str | None) -> str | None:
    return None if v is None else _clean(v, "group")


def _check_tags(tags: list[str] | None) -> list[str] | None:
    if tags is None:
        return None
    if len(tags) > limits.MAX_TAGS:
        raise ValueError(f"at most {limits.MAX_TAGS} tags")
    for t in tags:
        if len(t) > limits.MAX_TAG_LENGTH:
            raise ValueError(f"tag longer than {limits.MAX_TAG_LENGTH} characters")
        _clean(t, "tags")
    return tags


def _check_noise_prior(v: Any) -> Any:
    """A prior on the noise's AR(1) coefficient: [mean in 0..0.98, sd in (0, 1]]."""
    if isinstance(v, (list, tuple)):
        check_rho_prior(*v)
    return v


def _check_b_prior(v: Any) -> Any:
    """A t prior on ln B: [centre of ln B, scale in (0, 5]]."""
    if isinstance(v, (list, tuple)):
        check_b_prior(*v)
    return v


B_PRIOR_HELP = (
    "opt-in prior on the efficiency exponent B (a Student-t on ln B; A never gets a prior): "
    "\"project\" learns it from the project's finished runs of the same metric whose B is "
    "identified (at least 3), [centre, scale] of ln B gives it; null: none")

NOISE_PRIOR_HELP = (
    "opt-in prior on how persistent the evaluation noise is (its AR(1) coefficient rho): "
    "\"project\" learns it from the project's finished runs of the same metric (they share "
    "the evaluation set), [mean, sd] gives it; null: none (flat)")


class FitSettings(BaseModel):
    """Per-run fitting knobs. PATCH merges them; a null value resets a knob to its default."""

    model_config = ConfigDict(extra="forbid")
    r0: FiniteFloat | None = Field(None, description="fixed R0 (default: value at compute 0)")
    warmup: FiniteFloat | None = Field(None, ge=0, description="exclude compute below this")
    fit_until: FiniteFloat | None = Field(None, gt=0, description="use only compute <= this")
    value_range: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="range the asymptote A may take, default [0, 1]"
    )
    noise_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=NOISE_PRIOR_HELP)
    b_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=B_PRIOR_HELP)

    @field_validator("value_range")
    @classmethod
    def _range(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] < v[1]:
            raise ValueError("value_range must be [low, high] with low < high")
        return v

    @field_validator("noise_prior")
    @classmethod
    def _noise_prior(cls, v: Any) -> Any:
        return _check_noise_prior(v)

    @field_validator("b_prior")
    @classmethod
    def _b_prior(cls, v: Any) -> Any:
        return _check_b_prior(v)


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: str = Name
    name: str = Name
    config: dict[str, Any] | None = None
    tags: list[str] | None = None
    notes: str | None = Field(None, max_length=limits.MAX_NOTES_LENGTH)
    compute_unit: str = Field("gpu_hours", min_length=1, max_length=32)
    target_compute: FiniteFloat | None = Field(None, gt=0)
    fit_metric: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_LENGTH)
    fit_settings: FitSettings | None = None
    group: str | None = GroupName

    _group = field_validator("group")(classmethod(lambda cls, v: _check_group(v)))

    @field_validator("project", "name", "compute_unit", "fit_metric")
    @classmethod
    def _names(cls, v: str | None) -> str | None:
        return None if v is None else _clean(v, "names")

    _notes = field_validator("notes")(classmethod(lambda cls, v: _check_notes(v)))

    @field_validator("config")
    @classmethod
    def _config(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else _check_json(v, "config")

    _tags = field_validator("tags")(classmethod(lambda cls, v: _check_tags(v)))


class RunPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: RunStatus | None = None
    tags: list[str] | None = None
    notes: str | None = Field(None, max_length=limits.MAX_NOTES_LENGTH)
    target_compute: FiniteFloat | None = Field(None, gt=0)
    fit_metric: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_LENGTH)
    fit_settings: FitSettings | None = None
    group: str | None = Field(
        None, min_length=1, max_length=limits.MAX_GROUP_LENGTH,
        description="move the run into this group; null takes it out of its group",
    )

    noise_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=NOISE_PRIOR_HELP + "; the default of the project's runs")
    b_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=B_PRIOR_HELP + "; the default of the project's runs")

    @field_validator("fit_metric")
    @classmethod
    def _metric(cls, v: str | None) -> str | None:
        return None if v is None else _clean(v, "fit_metric")

    @field_validator("noise_prior")
    @classmethod
    def _noise_prior(cls, v: Any) -> Any:
        return _check_noise_prior(v)

    @field_validator("b_prior")
    @classmethod
    def _b_prior(cls, v: Any) -> Any:
        return _check_b_prior(v)

    _group = field_validator("group")(classmethod(lambda cls, v: _check_group(v)))

    _notes = field_validator("notes")(classmethod(lambda cls, v: _check_notes(v)))

    _tags = field_validator("tags")(classmethod(lambda cls, v: _check_tags(v)))

    @model_validator(mode="after")
    def _not_empty(self) -> RunPatch:
        if not self.model_fields_set:
            raise ValueError("nothing to change: give at least one field")
        return self


class FitSummary(BaseModel):
    """The compact fit carried by run lists (the full result object: `GET /runs/{id}/fit`)."""

    model_config = ConfigDict(extra="allow")
    status: str | None = None
    A: float | None = None
    B: float | None = None
    C_mid: float | None = None


class RunOut(BaseModel):
    id: int
    project: str
    name: str
    status: str
    config: dict[str, Any]
    tags: list[str]
    notes: str
    compute_unit: str
    target_compute: float | None
    fit_metric: str
    fit_metric_reason: str = Field(
        "", description="why this metric is fitted: set for the run, or which rule recognised it"
    )
    fit_settings: dict[str, Any]
    group: str | None = Field(None, description="the run's group (recipe), if any")
    created_at: str | None
    last_seen_at: str | None
    last_step: int | None
    last_compute: float | None
    latest: dict[str, float | None] = Field(description="latest value of each metric")
    fit: FitSummary | None = Field(description="latest fit summary of the fit metric")


class RunList(BaseModel):
    runs: list[RunOut]
    total: int


class PointIn(BaseModel):
    step: int = Field(ge=0, le=limits.MAX_STEP)
    compute: FiniteFloat = Field(ge=0)
    metrics: dict[str, FiniteFloat] = Field(min_length=1, max_length=limits.MAX_METRICS_PER_POINT)
    time: FiniteFloat | None = None


class PointsIn(BaseModel):
    points: list[PointIn] = Field(max_length=limits.MAX_POINTS_PER_REQUEST)


class IngestResult(BaseModel):
    accepted: int = Field(description="distinct (metric, step) values stored by this request")
    updated: int = Field(description="how many of them overwrote an existing value")


class PointOut(BaseModel):
    step: int
    compute: float
    value: float


class PointsOut(BaseModel):
    metric: str
    points: list[PointOut]
    downsampled: bool
    total: int = Field(description="points in the requested range before downsampling")
    next_since_step: int | None = Field(
        None,
        description="without max_points, at most 10,000 points are returned by step: pass "
        "this as since_step for the next page (null: no more)",
    )


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Name
    scope: Literal["read", "write", "admin"] = "write"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _clean(v, "name")


class ErrorOut(BaseModel):
    detail: Any
    errors: list[dict[str, str]] | None = None


def not_found(what: str) -> dict[int | str, dict[str, Any]]:
    """The documented 404 of a route whose `what` may not exist (raised as the store's
    `NotFound`, turned into a 404 by `scalewatch.server.api.errors`)."""
    return {404: {"model": ErrorOut, "description": f"Unknown {what}"}}


class TokenOut(BaseModel):
    id: int
    name: str
    scope: str
    prefix: str
    created_at: str | None
    last_used_at: str | None
    revoked: bool


class TokenCreated(TokenOut):
    token: str = Field(description="the secret: shown in this response only")


class TokenList(BaseModel):
    tokens: list[TokenOut]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    database: str | None = Field(None, description="the SQL dialect, when ready")
    detail: str | None = Field(None, description="why not, when unavailable")


# ---- fits --------------------------------------------------------------------------------------


class FitRequest(BaseModel):
    """Points and knobs in, the result object out (nothing is stored)."""

    model_config = ConfigDict(extra="forbid")
    compute: list[FiniteFloat] = Field(max_length=limits.MAX_FIT_POINTS)
    values: list[FiniteFloat] = Field(max_length=limits.MAX_FIT_POINTS)
    r0: FiniteFloat | None = None
    warmup: FiniteFloat = Field(0.0, ge=0)
    fit_until: FiniteFloat | None = Field(None, gt=0)
    target_compute: FiniteFloat | None = Field(None, gt=0)
    value_range: tuple[FiniteFloat, FiniteFloat] = (0.0, 1.0)
    method: Literal["default", "paper"] = "default"
    noise_prior: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="[mean, sd] of a prior on the evaluation noise's AR(1) coefficient")
    b_prior: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="[centre, scale] of a Student-t prior on ln B (4 degrees of freedom)")

    @field_validator("noise_prior")
    @classmethod
    def _noise_prior(cls, v: Any) -> Any:
        return _check_noise_prior(v)

    @field_validator("b_prior")
    @classmethod
    def _b_prior(cls, v: Any) -> Any:
        return _check_b_prior(v)

    @model_validator(mode="after")
    def _check(self) -> FitRequest:
        if len(self.compute) != len(self.values):
            raise ValueError(
                f"compute has {len(self.compute)} values, values has "
                f"{len(self.values)}: they must pair up"
            )
        if any(c < 0 for c in self.compute):
            raise ValueError("compute must not be negative")
        if not self.value_range[0] < self.value_range[1]:
            raise ValueError("value_range must be [low, high] with low < high")
        return self


# [low, high] of a 95% interval; an end is null where it is not finite.
Interval = tuple[float | None, float | None]


class FitOut(BaseModel):
    """The fit result object. Open to further keys: the fitting engine adds fields over time,
    and a stored fit also says where it came from (`metric`, `fit_id`, `fitted_at`)."""

    model_config = ConfigDict(extra="allow")
    status: str | None = Field(None, description="ok, unidentified or insufficient_data")
    A: float | None = Field(None, description="asymptote (null unless identified)")
    B: float | None = None
    C_mid: float | None = None
    R0: float | None = None
    r0_source: str | None = None
    ci: dict[str, Interval | None] | None = Field(None, description="95% intervals per parameter")
    A_lower_bound: float | None = Field(None, description="how high A is at least")
    n_points: int | None = None
    fit_range: Interval | None = None
    target_compute: float | None = None
    predicted_at_target: float | None = None
    predicted_interval: Interval | None = None
    rmse: float | None = None
    method: str | None = None
    prior: dict[str, Any] | None = Field(
        None, description="what the fit took from beyond the run's points, or null: the drift "
        "allowance its project's finished runs set (drift_rate, hindcasts) and the opt-in "
        "priors (rho, B)")
    message: str | None = None
    metric: str | None = None
    fit_id: int | None = None
    fitted_at: str | None = None


class FitHistoryEntry(BaseModel):
    id: int
    created_at: str | None
    status: str
    n_points: int
    max_compute: float | None
    A: float | None
    A_ci: Interval | None
    has_intervals: bool
    A_lower_bound: float | None
    B: float | None
    C_mid: float | None
    predicted_at_target: float | None
    backfilled: bool = Field(
        False, description="fitted after the fact on the points up to max_compute, because "
        "they arrived at once (an import, a spool synced after an outage): the history a live "
        "run would have had")
    break_: dict[str, Any] | None = Field(
        None, alias="break",
        description="the fit's break (compute, step, drop, ceiling_upper, regime) or null: a "
                    "broken run's fit withholds A, and ceiling_upper bounds its new ceiling; "
                    "regime is 'fitted' when A and the forecast describe the evaluations since "
                    "the break, 'too_few_points' (fewer than 12 since it) or 'unidentified'")


class FitHistory(BaseModel):
    run_id: int
    metric: str
    fits: list[FitHistoryEntry]


class CompareRun(BaseModel):
    id: int | None = Field(description="the run's id; null for a group")
    name: str
    project: str
    label: str = Field(description="unique name in this comparison (name#id when names repeat)")
    metric: str
    compute_unit: str | None = Field(None, description=(
        "the unit the run counts compute in (null for a group). A and B do not depend on it; "
        "C_mid, the crossovers and the winner at a budget compare compute across runs and "
        "mean something only when every run counts it in the same unit"))
    fit: FitOut | None
    group: str | None = Field(None, description="set for a group (its pooled fit)")


class Comparison(BaseModel):
    """`runs` by label (A, B, prediction at the budget), `pairs` with the paper's verdict,
    the crossover and the winner at the budget."""

    model_config = ConfigDict(extra="allow")
    budget: float | None
    margin: float
    runs: dict[str, dict[str, Any]]
    pairs: list[dict[str, Any]]


class CompareOut(BaseModel):
    metric: str | None
    budget: float | None
    runs: list[CompareRun]
    comparison: Comparison


# ---- groups ------------------------------------------------------------------------------------


class GroupOut(BaseModel):
    name: str
    n_runs: int
    runs: list[int] = Field(description="the member runs' ids")
    metric: str | None = Field(description="the members' common fit metric (null: they differ)")
    fit: FitSummary | None = Field(description="the latest group fit of that metric, summarised")


class GroupList(BaseModel):
    groups: list[GroupOut]


class GroupFitOut(FitOut):
    """The pooled fit (the recipe's A, band and forecast: the result object), plus `members`
    (each run's own fit and whether it sits on the recipe's curve) and `seed_spread` (the sd of
    the members' A across seeds, with its 95% interval)."""

    group: str | None = None
    project: str | None = None
    members: list[dict[str, Any]] = Field(default_factory=list)
    seed_spread: dict[str, Any] | None = None


class GroupFitHistory(BaseModel):
    project: str
    group: str
    metric: str
    fits: list[FitHistoryEntry]


# ---- alerts ------------------------------------------------------------------------------------

PARAMS_HELP = "Parameters of the kind (defaults filled in): " + "; ".join(
    f"**{k.value}**: {v}" for k, v in KIND_HELP.items()
)


def _no_nul(v: str | None) -> str | None:
    if v is not None:
        _utf8(v, "text")
    # PostgreSQL text cannot hold NUL: a clear 422 instead of a failed INSERT.
    if v is not None and "\x00" in v:
        raise ValueError("must not contain NUL characters")
    return v


def _check_url(v: str | None) -> str | None:
    problem = None if v is None else url_problem(v)  # the same check as the dashboard's form
    if problem:
        raise ValueError(problem)
    return v


class RuleCreate(BaseModel):
    """An alert rule for one run, for a group (`group`: its pooled fit and its seeds), or
    (`run_id` and `group` null) for every run of a project. The `params` each `kind` takes
    are listed under `params`."""

    model_config = ConfigDict(extra="forbid")
    project: str = Field(min_length=1, max_length=limits.MAX_NAME_LENGTH)
    run_id: int | None = Field(None, ge=1, le=ID_MAX, description="null: every run")
    group: str | None = Field(
        None, min_length=1, max_length=limits.MAX_GROUP_LENGTH,
        description="a group of the project (not with run_id): asymptote_drop and "
        "asymptote_below watch its pooled fit, seed_off_curve each of its seeds",
    )

    _group = field_validator("group")(classmethod(lambda cls, v: _check_group(v)))
    kind: AlertKind
    params: dict[str, Any] = Field(default_factory=dict, description=PARAMS_HELP)
    webhook_url: str | None = Field(None, max_length=MAX_URL)
    webhook_secret: str | None = Field(None, min_length=1, max_length=MAX_SECRET)
    enabled: bool = True

    _url = field_validator("webhook_url")(_check_url)
    _nul = field_validator("project", "webhook_secret")(_no_nul)

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else _check_json(v, "params")


class RulePatch(BaseModel):
    """Fields to change; changing kind without params resets params to the kind's defaults."""

    model_config = ConfigDict(extra="forbid")
    project: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_LENGTH)
    run_id: int | None = Field(None, ge=1, le=ID_MAX)
    group: str | None = Field(None, min_length=1, max_length=limits.MAX_GROUP_LENGTH)
    kind: AlertKind | None = None

    _group = field_validator("group")(classmethod(lambda cls, v: _check_group(v)))
    params: dict[str, Any] | None = Field(None, description=PARAMS_HELP)
    webhook_url: str | None = Field(None, max_length=MAX_URL)
    webhook_secret: str | None = Field(None, min_length=1, max_length=MAX_SECRET)
    enabled: bool | None = None

    _url = field_validator("webhook_url")(_check_url)
    _nul = field_validator("project", "webhook_secret")(_no_nul)

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else _check_json(v, "params")


class RuleOut(BaseModel):
    id: int
    project: str
    run_id: int | None
    group: str | None = None
    kind: AlertKind
    params: dict[str, Any]
    webhook_url: str | None
    has_secret: bool = Field(description="a webhook secret is set (it is never returned)")
    enabled: bool
    created_at: str | None
    updated_at: str | None


class RuleList(BaseModel):
    rules: list[RuleOut]
    total: int


class AlertOut(BaseModel):
    id: int
    rule_id: int
    run_id: int | None = Field(description="the run; null for an alert on a group's pooled fit")
    run_name: str | None
    group: str | None = Field(None, description="the group of a group rule's alert")
    project: str
    kind: AlertKind
    state: AlertState
    message: str
    created_at: str | None
    acknowledged_at: str | None
    resolved_at: str | None
    fit_id: int | None
    details: dict[str, Any]


class AlertList(BaseModel):
    alerts: list[AlertOut]
    total: int


class DeliveryAttempt(BaseModel):
    attempt: int
    at: str | None
    duration_ms: float
    status_code: int | None
    error: str | None
    ok: bool


class Delivery(BaseModel):
    id: int
    alert_id: int
    event: str = Field(description="alert.opened or alert.resolved")
    delivery_id: str
    url: str
    state: Literal["pending", "delivered", "failed"]
    attempts: int
    created_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    last_error: str | None
    attempt_log: list[DeliveryAttempt]


class DeliveryList(BaseModel):
    alert_id: int
    deliveries: list[Delivery]


class ProjectOut(BaseModel):
    id: int
    name: str
    created_at: str
    fit_metric: str | None = Field(
        None, description="The project's default fit metric: runs without their own fit it"
    )
    noise_prior: Literal["project"] | tuple[float, float] | None = Field(
        None, description="The default noise prior of the project's runs (a run's own "
                          "fit_settings.noise_prior wins)")
    b_prior: Literal["project"] | tuple[float, float] | None = Field(
        None, description="The default B prior of the project's runs (a run's own "
                          "fit_settings.b_prior wins)")


class ProjectPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fit_metric: str | None = Field(
        None, min_length=1, max_length=limits.MAX_NAME_LENGTH,
        description="The default fit metric of the project's runs; null clears it",
    )

    noise_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=NOISE_PRIOR_HELP + "; the default of the project's runs")
    b_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=B_PRIOR_HELP + "; the default of the project's runs")

    @field_validator("fit_metric")
    @classmethod
    def _metric(cls, v: str | None) -> str | None:
        return None if v is None else _clean(v, "fit_metric")

    @field_validator("noise_prior")
    @classmethod
    def _noise_prior(cls, v: Any) -> Any:
        return _check_noise_prior(v)

    @field_validator("b_prior")
    @classmethod
    def _b_prior(cls, v: Any) -> Any:
        return _check_b_prior(v)
