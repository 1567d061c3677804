"""Item 7, stored runs: points the store accepts but the fitting engine raises on end as a stored
fit with a status and a message, never a 500 from `/runs/{id}/fit` or `/compare`.

No monkeypatching: the inputs are real ones the engine fails on today (compute spanning
1e-300 … 1e300 breaks the grid's binning; values of ±1.7e308 make the SVD not converge). Both
are finite, non-negative numbers, so ingest accepts them, as it should.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalewatch.server.refit import Refitter

N = 60
SIGMOID = (0.2 + 0.5 / (1 + np.exp(-np.linspace(-5, 5, N)))).tolist()
UNFITTABLE = {
    "compute spanning 1e-300 to 1e300": (np.logspace(-300, 300, N).tolist(), SIGMOID),
    "values at the ends of float range": (
        np.linspace(1, 100, N).tolist(),
        [-1.7e308] * (N // 2) + [1.7e308] * (N - N // 2),
    ),
}


def _run_with(client: Any, name: str, compute: list[float], values: list[float]) -> int:
    rid = int(client.post("/api/v1/runs", json={"project": "p", "name": name}).json()["id"])
    pts = [
        {"step": i, "compute": c, "metrics": {"val_pass_rate": v}}
        for i, (c, v) in enumerate(zip(compute, values, strict=True))
    ]
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": pts})
    assert r.status_code == 200, r.text
    return rid


@pytest.mark.parametrize("case", list(UNFITTABLE))
def test_a_run_the_engine_cannot_fit_gets_a_fit_status(api, case) -> None:
    compute, values = UNFITTABLE[case]
    rid = _run_with(api, "bad", compute, values)
    good = _run_with(
        api, "good", np.linspace(10, 8000, N).tolist(),
        (0.3 + 0.3 / (1 + (2500 / np.linspace(10, 8000, N)) ** 1.9)).tolist(),
    )
    store = api.app.state.store
    Refitter(store).run_once()

    r = api.get(f"/api/v1/runs/{rid}/fit")
    assert r.status_code == 200, r.text
    fit = r.json()
    assert fit["status"] == "insufficient_data", fit
    if case == "values at the ends of float range":
        # Told in words before the engine is reached: nothing of it lies in the value range.
        assert "outside the value range [0, 1]" in fit["message"], fit
    else:
        assert fit["message"].startswith("fit failed: "), fit
    assert fit["fit_id"] is not None  # stored, so it is not re-queued forever as "pending"
    assert fit["n_points"] == N
    assert Refitter(store).run_once() == 0  # a deterministic failure does not spin

    history = api.get(f"/api/v1/runs/{rid}/fits").json()["fits"]
    assert [f["status"] for f in history] == ["insufficient_data"]
    assert api.get("/api/v1/runs", params={"project": "p"}).status_code == 200

    r = api.get("/api/v1/compare", params={"run": [rid, good], "budget": 1e4})
    assert r.status_code < 500, r.text
    if r.status_code == 200:
        statuses = {x["id"]: x["fit"]["status"] for x in r.json()["runs"]}
        assert statuses[rid] == "insufficient_data"
    else:
        assert r.json()["detail"], r.text


def test_a_comparison_the_engine_cannot_make_is_a_message_not_a_500(api) -> None:
    """Both runs fit (run b's warmup and fit_until leave out its points at 1e-300 and 1e300),
    but the paper's same-asymptote rule refits every point at a fixed A, and that refit raises
    on those two. The runs' fits are still answered, with a message instead of a verdict."""
    c = np.linspace(10, 8000, 80)
    y = 0.3 + 0.3 / (1 + (2500 / c) ** 1.9) + np.random.default_rng(0).normal(0, 0.005, 80)
    a = _run_with(api, "a", c.tolist(), y.tolist())
    b = int(api.post("/api/v1/runs", json={
        "project": "p", "name": "b", "fit_settings": {"warmup": 5.0, "fit_until": 9000.0},
    }).json()["id"])
    cb, yb = np.r_[1e-300, c, 1e300], np.r_[0.3, y, 0.6]
    pts = [{"step": i, "compute": float(ci), "metrics": {"val_pass_rate": float(yi)}}
           for i, (ci, yi) in enumerate(zip(cb, yb, strict=True))]
    assert api.post(f"/api/v1/runs/{b}/points", json={"points": pts}).status_code == 200
    Refitter(api.app.state.store).run_once()
    assert api.get(f"/api/v1/runs/{b}/fit").json()["status"] == "ok"

    r = api.get("/api/v1/compare", params={"run": [a, b], "budget": 1e4})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [x["fit"]["status"] for x in body["runs"]] == ["ok", "ok"]
    assert body["comparison"]["message"].startswith("comparison failed: "), body["comparison"]
    assert body["comparison"]["pairs"] == []
    # the dashboard's Compare page shares the service and shows the message as its verdict
    from scalewatch.dashboard import data

    detail = data.compare_detail(api.app.state.store, [a, b], None, 1e4)
    lines = data.verdict_lines(detail["comparison"], "GPU-h")
    assert lines and lines[0]["rule"].startswith("comparison failed: "), lines
