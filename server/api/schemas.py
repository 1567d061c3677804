"""Request and response models of the REST API (what /docs shows)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, field_validator, model_validator

from server import limits

Name = Field(min_length=1, max_length=limits.MAX_NAME_LENGTH)
RunStatus = Literal["running", "finished", "failed"]


def _clean(text: str, what: str) -> str:
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
    if "\\u0000" in encoded:
        raise ValueError(f"{what} must not contain NUL characters")
    if len(encoded) > limits.MAX_CONFIG_BYTES:
        raise ValueError(f"{what} is larger than {limits.MAX_CONFIG_BYTES} bytes")
    return value


def _check_notes(notes: str | None) -> str | None:
    if notes is not None and "\x00" in notes:
        raise ValueError("notes must not contain NUL characters")
    return notes


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


class FitSettings(BaseModel):
    """Per-run fitting knobs. PATCH merges them; a null value resets a knob to its default."""

    model_config = ConfigDict(extra="forbid")
    r0: FiniteFloat | None = Field(None, description="fixed R0 (default: value at compute 0)")
    warmup: FiniteFloat | None = Field(None, ge=0, description="exclude compute below this")
    fit_until: FiniteFloat | None = Field(None, gt=0, description="use only compute <= this")
    value_range: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="range the asymptote A may take, default [0, 1]"
    )

    @field_validator("value_range")
    @classmethod
    def _range(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] < v[1]:
            raise ValueError("value_range must be [low, high] with low < high")
        return v


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

    @field_validator("fit_metric")
    @classmethod
    def _metric(cls, v: str | None) -> str | None:
        return None if v is None else _clean(v, "fit_metric")

    _notes = field_validator("notes")(classmethod(lambda cls, v: _check_notes(v)))

    _tags = field_validator("tags")(classmethod(lambda cls, v: _check_tags(v)))

    @model_validator(mode="after")
    def _not_empty(self) -> RunPatch:
        if not self.model_fields_set:
            raise ValueError("nothing to change: give at least one field")
        return self


class FitSummary(BaseModel):
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
    fit_settings: dict[str, Any]
    created_at: str | None
    last_seen_at: str | None
    last_step: int | None
    last_compute: float | None
    latest: dict[str, float | None] = Field(description="latest value of each metric")
    fit: dict[str, Any] | None = Field(description="latest fit summary of the fit metric")


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
