"""What a write may ask of a run or a project: the PATCH bodies, validated the same way
whoever writes (the REST API takes them as its request models; the dashboard's forms build
them), then turned into a decided change by `scalewatch.server.services`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, field_validator, model_validator

from scalewatch.server import limits
from scalewatch.server.domain.checks import (
    PriorsChecked,
    check_free_text,
    check_group,
    check_tags,
    check_value_range,
    clean_text,
)
from scalewatch.server.domain.runs import RunStatus

B_PRIOR_HELP = (
    "opt-in prior on the efficiency exponent B (a Student-t on ln B; A never gets a prior): "
    "\"project\" learns it from the project's finished runs of the same metric whose B is "
    "identified (at least 3), [centre, scale] of ln B gives it; null: none")

NOISE_PRIOR_HELP = (
    "opt-in prior on how persistent the evaluation noise is (its AR(1) coefficient rho): "
    "\"project\" learns it from the project's finished runs of the same metric (they share "
    "the evaluation set), [mean, sd] gives it; null: none (flat)")


class FitSettings(PriorsChecked):
    """Per-run fitting knobs. PATCH merges them; a null value resets a knob to its default."""

    model_config = ConfigDict(extra="forbid")
    r0: FiniteFloat | None = Field(None, description="fixed R0 (default: value at compute 0)")
    warmup: FiniteFloat | None = Field(None, ge=0, description="exclude compute below this")
    fit_until: FiniteFloat | None = Field(None, gt=0, description="use only compute <= this")
    value_range: tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description="range the fitted metric lives in, default [0, 1] (a pass rate; "
        "[0, 100] for a percentage): A is searched in it and the fit's thresholds scale with "
        "its width (1e-3 to 1e9)"
    )
    noise_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=NOISE_PRIOR_HELP)
    b_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=B_PRIOR_HELP)

    _range = field_validator("value_range")(classmethod(lambda cls, v: check_value_range(v)))


class RunPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, min_length=1, max_length=limits.MAX_NAME_LENGTH,
                             description="rename the run (409 when its project has the name)")
    status: RunStatus | None = None
    tags: list[str] | None = None
    notes: str | None = Field(None, max_length=limits.MAX_NOTES_LENGTH)
    target_compute: FiniteFloat | None = Field(None, gt=0)
    fit_metric: str | None = Field(None, min_length=1, max_length=limits.MAX_METRIC_NAME_LENGTH)
    fit_settings: FitSettings | None = None
    group: str | None = Field(
        None, min_length=1, max_length=limits.MAX_GROUP_LENGTH,
        description="move the run into this group; null takes it out of its group",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str:
        if v is None:
            raise ValueError("a run keeps a name: give the new one")
        return clean_text(v, "names")

    @model_validator(mode="before")
    @classmethod
    def _priors_belong_in_fit_settings(cls, data: Any) -> Any:
        # A run's priors are fit settings; the top-level keys are the project's (PATCH
        # /projects/{name}).  Said plainly rather than "extra inputs are not permitted".
        for key in ("noise_prior", "b_prior") if isinstance(data, dict) else ():
            if key in data:
                raise ValueError(f"a run's {key} goes in fit_settings.{key}; a project's "
                                 f"default for its runs is set by PATCH /api/v1/projects/{{name}}")
        return data

    @field_validator("fit_metric")
    @classmethod
    def _metric(cls, v: str | None) -> str | None:
        return None if v is None else clean_text(v, "fit_metric")

    _group = field_validator("group")(classmethod(lambda cls, v: check_group(v)))

    _notes = field_validator("notes")(classmethod(lambda cls, v: check_free_text(v, "notes")))

    _tags = field_validator("tags")(classmethod(lambda cls, v: check_tags(v)))

    @model_validator(mode="after")
    def _not_empty(self) -> RunPatch:
        if not self.model_fields_set:
            raise ValueError("nothing to change: give at least one field")
        return self


class ProjectPatch(PriorsChecked):
    model_config = ConfigDict(extra="forbid")
    fit_metric: str | None = Field(
        None, min_length=1, max_length=limits.MAX_METRIC_NAME_LENGTH,
        description="The default fit metric of the project's runs; null clears it",
    )

    noise_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=NOISE_PRIOR_HELP + "; the default of the project's runs")
    b_prior: Literal["project"] | tuple[FiniteFloat, FiniteFloat] | None = Field(
        None, description=B_PRIOR_HELP + "; the default of the project's runs")

    @field_validator("fit_metric")
    @classmethod
    def _metric(cls, v: str | None) -> str | None:
        return None if v is None else clean_text(v, "fit_metric")
