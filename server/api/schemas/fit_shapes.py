"""The fit's response models, derived from the one declaration of a fit: ``FitResult``'s fields
and their ``JsonField`` metadata (``server/fitting/result.py``) give each public key its JSON
type and description, and say which keys a history entry carries. A field added there shows up
here, in the OpenAPI document, with no edit in this module.

Type checkers see the derived bases as plain ``BaseModel`` (``TYPE_CHECKING``): the routes only
validate and serialise with them, and the store's typed dicts (``server/store/fit_records.py``)
are what code reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from scalewatch.server.fitting.result import (
    HISTORY_FIT_KEYS,
    PUBLIC_FIELDS,
    FieldTable,
    Interval,
)

__all__ = ["FitHistoryEntry", "FitOut", "Interval", "fit_fields", "history_fields"]


def fit_fields(table: FieldTable) -> dict[str, Any]:
    """``create_model`` fields of a fit's public keys: each optional (a pending fit, a
    partial stored one), named by its attribute and aliased to its JSON key."""
    return {
        name: (Optional[spec.codec.json_type],  # noqa: UP045 - a runtime type expression
               Field(None, description=spec.doc, alias=None if key == name else key))
        for name, key, spec in table
    }


# The columns a history entry takes from the fit row, in the order the entries list them.
HISTORY_ROW_FIELDS: dict[str, Any] = {
    "id": (int, ...),
    "created_at": (Optional[str], ...),  # noqa: UP045
    "max_compute": (Optional[float], ...),  # noqa: UP045
    "A_ci": (Optional[tuple[Optional[float], Optional[float]]], ...),  # noqa: UP045
    "has_intervals": (bool, ...),
    "backfilled": (bool, Field(
        False, description="fitted after the fact on the points up to max_compute, because "
        "they arrived at once (an import, a spool synced after an outage): the history a live "
        "run would have had")),
}
# Where each known field sits in an entry (the order of the OpenAPI document so far); a field
# a fit adds for histories comes last.
_HISTORY_ORDER = ("id", "created_at", "status", "n_points", "max_compute", "A", "A_ci",
                  "has_intervals", "A_lower_bound", "B", "C_mid", "predicted_at_target",
                  "withheld", "backfilled", "break")


def history_fields(table: FieldTable, keys: dict[str, Any]) -> dict[str, Any]:
    """``create_model`` fields of a history entry: the row's columns and the fit keys
    ``keys`` marks for histories (always present in an entry, with the fit's JSON type)."""
    fields: dict[str, tuple[str, Any]] = {
        name: (name, spec) for name, spec in HISTORY_ROW_FIELDS.items()}
    for name, key, spec in table:
        if key in keys:
            fields[key] = (name, (spec.codec.json_type, Field(
                ..., description=spec.doc, alias=None if key == name else key)))
    order = {key: i for i, key in enumerate(_HISTORY_ORDER)}
    ranked = sorted(fields, key=lambda k: order.get(k, len(order)))
    return {fields[k][0]: fields[k][1] for k in ranked}


if TYPE_CHECKING:
    _FitFields = BaseModel
    _HistoryFields = BaseModel
else:
    _FitFields = create_model("_FitFields", __config__=ConfigDict(extra="allow"),
                              **fit_fields(PUBLIC_FIELDS))
    _HistoryFields = create_model("_HistoryFields", **history_fields(PUBLIC_FIELDS,
                                                                     HISTORY_FIT_KEYS))


class FitOut(_FitFields):
    """The fit result object. Open to further keys: the fitting engine adds fields over time,
    and a stored fit also says where it came from (`metric`, `fit_id`, `fitted_at`)."""

    model_config = ConfigDict(extra="allow")
    message: str | None = None
    metric: str | None = None
    fit_id: int | None = None
    fitted_at: str | None = None
    fit_metric_warning: str | None = Field(
        None, description="the run's default fit is a training reward although it logs a "
        "validation-looking metric (see the run's fit_metric_warning)")


class FitHistoryEntry(_HistoryFields):
    # One row of a fit history: how A moved as compute grew. (No docstring: it would become
    # the schema's description, which this model has never had.)
    pass
