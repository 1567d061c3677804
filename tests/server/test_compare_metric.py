"""Compare uses one metric for every run, and says which (never a chart of mixed metrics); runs
that count compute in different units get no crossover or budget winner."""

from __future__ import annotations

from scalewatch.dashboard import data
from tests.support.curves import noisy_sigmoid


def _run(api, name: str, metric: str, unit: str = "gpu_hours") -> int:
    rid = api.post("/api/v1/runs", json={"project": "p", "name": name, "fit_metric": metric,
                                         "compute_unit": unit}).json()["id"]
    c, y = noisy_sigmoid(0.6, 1.9, 2500.0, 0.2, n=60, seed=len(name))
    pts = [{"step": i + 1, "compute": float(ci), "metrics": {metric: float(yi),
                                                              "reward": float(yi) / 2}}
           for i, (ci, yi) in enumerate(zip(c, y, strict=True))]
    assert api.post(f"/api/v1/runs/{rid}/points", json={"points": pts}).status_code == 200
    return rid


def test_runs_on_different_metrics_need_a_metric(api) -> None:
    a = _run(api, "a", "val_pass_rate")
    b = _run(api, "b", "eval_accuracy")
    r = api.get("/api/v1/compare", params={"run": [a, b]})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "val_pass_rate: a" in detail and "eval_accuracy: b" in detail and "metric=" in detail
    # Naming the metric compares both runs on it, and the answer says which.
    r = api.get("/api/v1/compare", params={"run": [a, b], "metric": "reward"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["metric"] == "reward" and {x["metric"] for x in body["runs"]} == {"reward"}


def test_runs_on_one_metric_use_it_and_say_so(api) -> None:
    a = _run(api, "a", "val_pass_rate")
    b = _run(api, "bb", "val_pass_rate")
    body = api.get("/api/v1/compare", params={"run": [a, b]}).json()
    assert body["metric"] == "val_pass_rate"
    assert {x["metric"] for x in body["runs"]} == {"val_pass_rate"}


def test_dashboard_compare_says_why_it_cannot_mix_metrics(api) -> None:
    a = _run(api, "a", "val_pass_rate")
    b = _run(api, "b", "eval_accuracy")
    store = api.app.state.store
    detail = data.compare_detail(store, [a, b], None, None)
    assert detail["items"] == [] and "different metrics" in detail["error"]
    detail = data.compare_detail(store, [a, b], "reward", None)
    assert detail["metric"] == "reward" and len(detail["items"]) == 2


def test_dashboard_compare_of_runs_in_different_units_gives_no_crossover_or_budget(api) -> None:
    """A and B do not depend on the compute unit; C_mid, crossovers and a budget do. Comparing
    a run in GPU-hours with one in FLOPs, the page says so instead of a crossover computed on
    numbers that mean different things."""
    a = _run(api, "a", "val_pass_rate")
    b = _run(api, "bb", "val_pass_rate", unit="flops")
    store = api.app.state.store
    detail = data.compare_detail(store, [a, b], None, None)
    assert detail["unit"] == "compute" and detail["units"] == ["FLOPs", "GPU-hours"]
    (line,) = data.verdict_lines(detail["comparison"], detail["unit"], detail["units"])
    assert "different units (FLOPs, GPU-hours)" in line["crossover"]
    assert line["winner"].startswith("no winner at a budget")
    assert "A" in line["rule"] or "ceiling" in line["rule"] or "asymptote" in line["rule"]
    assert "FLOPs, GPU-hours" in data.mixed_units_note(detail["units"])
    # The REST API names each run's unit, so a script can tell too.
    body = api.get("/api/v1/compare", params={"run": [a, b]}).json()
    assert [r["compute_unit"] for r in body["runs"]] == ["gpu_hours", "flops"]
    # One unit: the crossover and the winner are as before (here: no fits yet).
    c = _run(api, "ccc", "val_pass_rate")
    detail = data.compare_detail(store, [a, c], None, None)
    assert detail["unit"] == "GPU-hours" and detail["units"] == ["GPU-hours"]
    (line,) = data.verdict_lines(detail["comparison"], detail["unit"], detail["units"])
    assert "different units" not in line["crossover"] + line["winner"]
    assert data.mixed_units_note(detail["units"]) == ""
