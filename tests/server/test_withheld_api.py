"""Why A is withheld, through the API (SQLite and PostgreSQL): GET /runs/{id}/fit, /fits, the
run list's fit summary, and POST /fit carry the fit's ``withheld`` object."""

from __future__ import annotations

import numpy as np
import pytest

from scalewatch.server.refit import Refitter
from tests.support.curves import noisy_sigmoid

TRUE = {"A": 0.61, "B": 1.92, "C_mid": 2542.0, "R0": 0.30}
CODES = {"recent_break", "misspecified", "interval_at_bound", "interval_too_wide",
         "noise_persistent", "short_of_knee", "insufficient_data", "not_identified"}


def _post(client, rid, c, y, metric="val_pass_rate"):  # noqa: ANN001, ANN202
    pts = [{"step": i, "compute": float(ci), "metrics": {metric: float(yi)}}
           for i, (ci, yi) in enumerate(zip(c, y, strict=True))]
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": pts})
    assert r.status_code == 200, r.text


def _fitted_run(api, name, c_max, n=80):  # noqa: ANN001, ANN202
    rid = api.post("/api/v1/runs", json={"project": "p", "name": name}).json()["id"]
    c, y = noisy_sigmoid(**TRUE, n=n, c_max=c_max, seed=3, sd=0.008)
    _post(api, rid, c, y)
    Refitter(api.app.state.store).run_once()
    fit = api.get(f"/api/v1/runs/{rid}/fit").json()
    assert fit["fit_id"] is not None, fit
    return rid, fit


def test_a_young_runs_fit_says_why_and_how_much_more_compute(api) -> None:  # noqa: ANN001
    rid, fit = _fitted_run(api, "young", c_max=1.3 * TRUE["C_mid"])
    assert fit["status"] == "unidentified" and fit["A"] is None
    w = fit["withheld"]
    codes = [r["code"] for r in w["reasons"]]
    assert codes and set(codes) <= CODES and "interval_too_wide" in codes, w
    assert all(r["detail"] for r in w["reasons"])
    end = fit["fit_range"][1]
    assert w["compute_to_identify"] > end
    assert w["compute_to_identify"] == pytest.approx(w["compute_to_identify_factor"] * end,
                                                     rel=1e-3)
    # The history row and the run list's summary carry the same object.
    history = api.get(f"/api/v1/runs/{rid}/fits").json()["fits"]
    assert history[-1]["withheld"] == w
    listed = api.get("/api/v1/runs", params={"project": "p"}).json()["runs"]
    assert [r["fit"]["withheld"] for r in listed if r["id"] == rid] == [w]


def test_an_identified_fit_withholds_nothing(api) -> None:  # noqa: ANN001
    rid, fit = _fitted_run(api, "grown", c_max=8 * TRUE["C_mid"], n=120)
    assert fit["status"] == "ok" and fit["A"] is not None
    assert "withheld" in fit and fit["withheld"] is None
    assert api.get(f"/api/v1/runs/{rid}/fits").json()["fits"][-1]["withheld"] is None


def test_too_few_points_are_a_reason_too(api) -> None:  # noqa: ANN001
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "short"}).json()["id"]
    _post(api, rid, [1.0, 2.0, 3.0], [0.1, 0.2, 0.25])
    Refitter(api.app.state.store).run_once()
    fit = api.get(f"/api/v1/runs/{rid}/fit").json()
    assert fit["status"] == "insufficient_data"
    assert fit["withheld"]["reasons"] == [{"code": "insufficient_data", "detail": fit["message"]}]


def test_a_stateless_fit_of_data_no_sigmoid_describes_says_misspecified(api) -> None:  # noqa: ANN001
    """Exponential saturation in compute (sharper than any sigmoid in log-compute)."""
    c = np.linspace(100.0, 6 * 2542.0, 150)
    y = 0.6 - 0.4 * np.exp(-np.log(2.0) * c / 2542.0)
    y = y + 0.004 * np.random.default_rng(1).standard_normal(c.size)
    r = api.post("/api/v1/fit", json={"compute": c.tolist(), "values": y.tolist()})
    assert r.status_code == 200, r.text
    fit = r.json()
    assert fit["status"] == "unidentified" and fit["A"] is None
    assert fit["withheld"]["reasons"][0]["code"] == "misspecified"
    assert fit["withheld"]["compute_to_identify"] is None
    assert "internal" not in fit
