"""The Run page's warning box: why A is withheld and how much more compute would identify it."""

from __future__ import annotations

from typing import Any

import numpy as np

from scalewatch.dashboard import figures as F
from scalewatch.server.fitting import FitOptions, fit_curve
from scalewatch.server.ingest import PointRow
from scalewatch.server.refit import Refitter
from tests.conftest import make_app
from tests.support.curves import noisy_sigmoid

TRUE = {"A": 0.61, "B": 1.92, "C_mid": 2542.0, "R0": 0.30}


def _fit(c: Any, y: Any) -> dict:
    res = fit_curve(np.asarray(c), np.asarray(y), FitOptions())
    return {**res.to_dict(internal=True), "message": res.message}


def test_the_notice_says_why_and_how_much_compute() -> None:
    c, y = noisy_sigmoid(**TRUE, n=80, c_max=1.3 * TRUE["C_mid"], seed=3, sd=0.008)
    fit = _fit(c, y)
    note = F.withheld_notice(fit, "GPU-hours")
    assert note is not None
    assert note["title"] == "A is withheld: the data do not pin the ceiling down yet"
    assert note["reasons"] == [r["detail"] for r in fit["withheld"]["reasons"]]
    w = fit["withheld"]
    assert note["compute"] == (
        f"More compute would identify it: about {w['compute_to_identify_factor']:.2g} × the "
        f"compute so far, around {F.fmt(w['compute_to_identify'])} GPU-hours (simulated from "
        "this fit's posterior).")


def test_no_notice_when_a_is_claimed_or_nothing_is_fitted_yet() -> None:
    c, y = noisy_sigmoid(**TRUE, n=120, c_max=8 * TRUE["C_mid"], seed=3, sd=0.008)
    fit = _fit(c, y)
    assert fit["status"] == "ok" and F.withheld_notice(fit, "GPU-hours") is None
    assert F.withheld_notice(None, "GPU-hours") is None
    assert F.withheld_notice({"status": "pending", "withheld": None}, "steps") is None


def test_misspecified_and_out_of_reach_runs_say_so() -> None:
    c = np.linspace(100.0, 6 * 2542.0, 150)
    y = 0.6 - 0.4 * np.exp(-np.log(2.0) * c / 2542.0)
    fit = _fit(c, y + 0.004 * np.random.default_rng(1).standard_normal(c.size))
    note = F.withheld_notice(fit, "GPU-hours")
    assert note is not None
    assert note["title"] == "A is withheld: this run's data disagree with every sigmoid"
    assert note["compute"] == ""  # more of the same would not make it a sigmoid
    far = {"status": "unidentified", "withheld": {
        "reasons": [{"code": "interval_too_wide", "detail": "A's 95% interval is wide"}],
        "compute_to_identify": None, "compute_to_identify_factor": None, "max_factor": 8.0}}
    assert F.withheld_notice(far, "steps")["compute"] == (
        "Not within 8 × the compute so far, by a simulation from this fit's posterior.")
    unsearched = {**far, "withheld": {**far["withheld"], "max_factor": None}}
    assert F.withheld_notice(unsearched, "steps")["compute"] == ""


def _text(node: Any) -> str:
    if isinstance(node, str):
        return node
    kids = getattr(node, "children", None)
    if kids is None:
        return ""
    return " ".join(_text(k) for k in (kids if isinstance(kids, list) else [kids]))


def test_the_run_page_shows_the_box_beside_the_headline(sqlite_url: str) -> None:
    from scalewatch.dashboard import data
    from scalewatch.dashboard.pages.run import _header

    app = make_app(sqlite_url)
    store = app.state.store
    run, _ = store.get_or_create_run("p", "young", compute_unit="gpu_hours")
    c, y = noisy_sigmoid(**TRUE, n=80, c_max=1.3 * TRUE["C_mid"], seed=3, sd=0.008)
    store.ingest_points(run.id, [PointRow("val_pass_rate", i, float(ci), float(yi), None)
                                    for i, (ci, yi) in enumerate(zip(c, y, strict=True))])
    Refitter(store).run_once()
    d = data.run_detail(store, run.id)
    box = [k for k in _header(d).children if getattr(k, "id", None) == "run-withheld"]
    assert len(box) == 1 and box[0].className == "withheld"
    text = _text(box[0])
    assert text.startswith("A is withheld: the data do not pin the ceiling down yet")
    for r in d["fit"]["withheld"]["reasons"]:
        assert r["detail"] in text
    assert "More compute would identify it: about" in text and d["unit"] in text
    store.engine.dispose()
