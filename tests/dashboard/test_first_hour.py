"""Dashboard polish from issue 14: Runs column order and headers, why a run has no curve, the
Run page's headline forecast, counts that read as English. Pure: no server, no browser."""

from __future__ import annotations

from scalewatch.dashboard import figures as F
from scalewatch.dashboard.data import run_row
from scalewatch.dashboard.pages.runs import _columns
from tests.support.records import a_run

OK_FIT = {"status": "ok", "A": 0.61, "B": 1.9, "C_mid": 2500.0, "ci": {"A": [0.6, 0.62]},
          "predicted_at_target": 0.6012, "predicted_interval": [0.59, 0.61],
          "target_compute": 16000.0, "n_points": 80, "message": ""}


def test_runs_columns_start_with_what_matters() -> None:
    cols = _columns("GPU-hours", "val_pass_rate", ["config.lr"], alerts=True)
    ids = [c["id"] for c in cols]
    assert ids[:5] == ["run", "status", "predicted", "A", "alerts"]
    assert ids[-1] == "config.lr"
    names = {c["id"]: c["name"] for c in cols}
    assert names["predicted"] == "predicted @ target [95%]"
    assert names["last_compute"] == "last compute (GPU-hours)"


def test_mixed_units_say_no_unit_in_headers_and_one_per_row() -> None:
    cols = _columns(None, "value", [], alerts=True)
    names = {c["id"]: c["name"] for c in cols}
    assert names["last_compute"] == "last compute" and names["target"] == "target"
    assert "(compute)" not in " ".join(names.values())
    assert names["unit"] == "compute unit"


def test_a_run_without_a_curve_shows_the_fits_message() -> None:
    collapse = {"status": "misspecified", "B": None, "A": None, "n_points": 107,
                "message": "collapse: the last points fell far below; a sigmoid does not "
                           "describe this run"}
    run = a_run(id=7, name="r", status="running", fit_metric="v", fit=collapse)
    assert run_row(run, 0)["A"] == collapse["message"]
    few = {"status": "insufficient_data", "n_points": 3, "message": "3 usable points, need 5"}
    assert (run_row(run.model_copy(update={"fit": few}), 0)["A"]
            == "no fit yet: 3 usable points, need 5")
    pending = {"status": "pending", "n_points": 3, "message": "fit queued"}
    assert run_row(run.model_copy(update={"fit": pending}), 0)["A"] == "no fit yet (3 points)"


def test_run_headline_is_the_forecast_at_target() -> None:
    head = F.forecast_headline(OK_FIT, 16000.0, "GPU-hours")
    assert head["label"] == "forecast at 16k GPU-hours"
    assert head["value"] == F.forecast_text(OK_FIT) == "0.601 [0.590, 0.610]"
    unid = {**OK_FIT, "status": "unidentified", "A": None}
    assert F.forecast_headline(unid, 16000.0, "GPU-hours")["value"] == "[0.590, 0.610]"
    assert "not identified" in F.forecast_headline(unid, 16000.0, "GPU-hours")["note"]
    broke = {**OK_FIT, "break": {"regime": "broken", "ceiling_upper": 0.52, "step": 7300,
                                 "drop": 0.08}}
    assert F.forecast_headline(broke, 16000.0, "GPU-hours")["value"] == "≤ 0.520 (broke)"
    none = F.forecast_headline({"status": "insufficient_data", "message": "need 5 points"},
                               16000.0, "GPU-hours")
    assert none["value"] == "–" and none["note"] == "need 5 points"
    assert "target" in F.forecast_headline(OK_FIT, None, "GPU-hours")["note"]


def test_a_run_without_a_target_is_forecast_at_no_target(store) -> None:  # noqa: ANN001
    """Without a target the fit predicts at the last compute; the Run page must not present
    that as the run's target ("forecast at 10,000 GPU-hours", "forecast at target")."""
    from scalewatch.dashboard.data import run_detail
    from scalewatch.server.ingest import PointRow
    from scalewatch.server.refit import Refitter
    from tests.dashboard.seed import series

    run, _ = store.get_or_create_run("p", "no-target")
    c, y = series({"A": 0.6, "B": 1.9, "C_mid": 2500.0})
    store.ingest_points(run.id, [PointRow("val_pass_rate", i, float(ci), float(yi), None)
                                    for i, (ci, yi) in enumerate(zip(c, y, strict=True))])
    Refitter(store).run_once()
    d = run_detail(store, run.id)
    assert d["fit"].get("target_compute")  # the fit's own default: the last compute
    assert d["target"] is None
    head = F.forecast_headline(d["fit"], d["target"], d["unit"])
    assert head["label"] == "forecast" and head["value"] == "–"
    assert "no target compute" in head["note"]


def test_counts_read_as_english() -> None:
    assert F.plural(1, "alert") == "1 alert"
    assert F.plural(0, "alert") == "0 alerts"
    assert F.plural(1400, "run") == "1,400 runs"
