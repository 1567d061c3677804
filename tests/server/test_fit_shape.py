"""One fit in one shape: FitResult's fields (and their JsonField metadata) declare a fit; the JSON
object, the stored record's typed dicts, the run-list summary, the history entry and the API's
pydantic models are derived from them (issue 37, item 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_type_hints

from pydantic import create_model

from scalewatch.server.api.schemas import FitHistoryEntry as HistoryModel
from scalewatch.server.api.schemas import FitOut
from scalewatch.server.api.schemas.fit_shapes import HISTORY_ROW_FIELDS, fit_fields, history_fields
from scalewatch.server.fitting.result import (
    HISTORY_FIT_KEYS,
    NUMBER,
    PUBLIC_FIELDS,
    PUBLIC_KEYS,
    SUMMARY_FIT_KEYS,
    FitJSON,
    FitResult,
    json_field,
    json_fields,
)
from scalewatch.server.store import fit_records
from scalewatch.server.store.fit_records import FitHistoryEntry, HistoryRow, PublicFit


def _schema_keys(model: type) -> set[str]:
    return set(model.model_json_schema(by_alias=True)["properties"])  # type: ignore[attr-defined]


def test_the_typed_dict_mirror_matches_the_declared_fields() -> None:
    # FitJSON is the one copy the type checker needs: same keys, same order, same JSON types.
    hints = get_type_hints(FitJSON)
    assert tuple(hints) == PUBLIC_KEYS
    for _, key, spec in PUBLIC_FIELDS:
        assert hints[key] == spec.codec.json_type, key
    # The store's records extend it rather than repeat it.
    assert set(PUBLIC_KEYS) <= set(get_type_hints(PublicFit))


def test_every_derived_shape_carries_the_declared_fields() -> None:
    result = FitResult(status="ok", A=0.8, B=1.5, C_mid=100.0, R0=0.1, n_points=40,
                       break_={"compute": 50.0, "step": 3, "drop": 0.1, "drop_ci": (0.05, 0.2),
                               "ceiling_upper": 0.7, "regime": "fitted"})
    assert tuple(result.to_dict()) == PUBLIC_KEYS
    # The API's fit object declares every public key (by its JSON name: "break").
    assert set(PUBLIC_KEYS) <= _schema_keys(FitOut)
    # A history entry: the row's columns and the keys the fields mark for histories.
    assert _schema_keys(HistoryModel) == set(HISTORY_ROW_FIELDS) | set(HISTORY_FIT_KEYS)
    assert set(get_type_hints(FitHistoryEntry)) - set(get_type_hints(HistoryRow)) <= set(
        HISTORY_FIT_KEYS)
    # The run-list summary: the keys the fields mark for it, and where the fit came from.
    assert (*SUMMARY_FIT_KEYS, "metric", "fitted_at", "message") == fit_records.SUMMARY_KEYS
    summary = fit_records.fit_summary({**result.to_dict(internal=True), "metric": "r"})
    assert summary is not None and set(SUMMARY_FIT_KEYS) <= set(summary)
    assert summary["break"]["drop_ci"] == [0.05, 0.2]


@dataclass(frozen=True)
class _WithKnee(FitResult):
    """FitResult with one more declared field, as a change to the engine would add it."""

    knee: float | None = field(default=None, metadata=json_field(
        NUMBER, "compute at the curve's knee", summary=True, history=True))


def test_a_field_added_to_the_declaration_reaches_every_shape() -> None:
    public, _ = json_fields(_WithKnee)
    assert [key for _, key, _ in public] == [*PUBLIC_KEYS, "knee"]
    # JSON object, and back.
    d = _WithKnee(status="ok", knee=123.0).to_dict(internal=True)
    assert d["knee"] == 123.0
    assert _WithKnee.from_dict(d) == _WithKnee(status="ok", knee=123.0)
    # The API's models, built as the real ones are, from the wider declaration.
    fit_model = create_model("FitWithKnee", **fit_fields(public))
    schema = fit_model.model_json_schema()["properties"]
    assert schema["knee"]["description"] == "compute at the curve's knee"
    marked = {key: spec.history for _, key, spec in public if spec.history}
    history_model = create_model("HistoryWithKnee", **history_fields(public, marked))
    assert "knee" in history_model.model_json_schema()["required"]
    # Summary and history membership come from the same metadata.
    assert "knee" in [key for _, key, spec in public if spec.summary]


def test_a_fit_stored_by_an_earlier_version_still_reads() -> None:
    # Stored before `break`, `prior` and `withheld` existed, without the internal block.
    old = {"status": "ok", "A": 0.7, "B": 2.0, "C_mid": 50.0, "R0": 0.0, "r0_source": "given",
           "ci": {"A": [0.65, None], "B": [1.5, 2.5], "C_mid": None}, "A_lower_bound": 0.65,
           "n_points": 30, "fit_range": [1.0, 80.0], "target_compute": 200.0,
           "predicted_at_target": 0.68, "predicted_interval": [0.6, 0.75], "rmse": 0.01,
           "method": "default"}
    r = FitResult.from_dict(old)
    assert r.a_fit == 0.7 and r.withheld is None and r.break_ is None and r.draws == ()
    assert r.ci is not None and set(r.ci) == {"A", "B"} and r.value_range == (0.0, 1.0)
    again = r.to_dict()
    assert {k: again[k] for k in old if k != "ci"} == {k: v for k, v in old.items() if k != "ci"}
    assert again["ci"] == {"A": [0.65, None], "B": [1.5, 2.5], "C_mid": None}
