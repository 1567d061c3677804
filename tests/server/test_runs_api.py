"""Runs API on both databases: create-or-resume, list/filter/paginate, patch, delete."""

from __future__ import annotations


def create(api, **kw):
    body = {"project": "math-rl", "name": "run-a", **kw}
    return api.post("/api/v1/runs", json=body)


def test_create_then_resume_returns_same_run(api):
    first = create(api, config={"lr": 1e-6}, tags=["baseline"], target_compute=16000)
    assert first.status_code == 201
    run = first.json()
    assert run["id"] > 0 and run["config"] == {"lr": 1e-6} and run["tags"] == ["baseline"]
    assert run["compute_unit"] == "gpu_hours" and run["status"] == "running"
    again = create(api)
    assert again.status_code == 200
    assert again.json()["id"] == run["id"]
    # Same name in another project is another run.
    other = api.post("/api/v1/runs", json={"project": "code-rl", "name": "run-a"})
    assert other.status_code == 201 and other.json()["id"] != run["id"]


def test_list_filters_and_pagination(api):
    for i in range(5):
        create(api, name=f"r{i}", tags=["even"] if i % 2 == 0 else ["odd"])
    api.post("/api/v1/runs", json={"project": "other", "name": "x"})
    rid = api.get("/api/v1/runs", params={"project": "math-rl"}).json()["runs"][0]["id"]
    api.patch(f"/api/v1/runs/{rid}", json={"status": "finished"})

    body = api.get("/api/v1/runs", params={"project": "math-rl"}).json()
    assert body["total"] == 5 and len(body["runs"]) == 5
    assert api.get("/api/v1/runs", params={"tag": "even"}).json()["total"] == 3
    assert api.get("/api/v1/runs", params={"status": "finished"}).json()["total"] == 1
    page = api.get("/api/v1/runs", params={"project": "math-rl", "limit": 2, "offset": 4}).json()
    assert page["total"] == 5 and len(page["runs"]) == 1
    assert api.get("/api/v1/runs").json()["total"] == 6


def test_run_list_carries_latest_values_and_fit_placeholder(api):
    rid = create(api).json()["id"]
    api.post(
        f"/api/v1/runs/{rid}/points",
        json={
            "points": [
                {"step": 1, "compute": 10.0, "metrics": {"reward": 0.2, "val_pass_rate": 0.1}},
                {"step": 2, "compute": 20.0, "metrics": {"reward": 0.3}},
            ]
        },
    )
    run = api.get("/api/v1/runs").json()["runs"][0]
    assert run["last_step"] == 2 and run["last_compute"] == 20.0
    assert run["latest"] == {"reward": 0.3, "val_pass_rate": 0.1}
    assert run["fit_metric"] == "val_pass_rate"
    assert "fit" in run


def test_patch_changes_fields_and_merges_fit_settings(api):
    rid = create(api, tags=["a"]).json()["id"]
    r = api.patch(
        f"/api/v1/runs/{rid}",
        json={
            "status": "failed",
            "tags": ["b", "c"],
            "notes": "diverged",
            "target_compute": 5000,
            "fit_settings": {"warmup": 1500, "value_range": [0, 1]},
        },
    )
    assert r.status_code == 200, r.text
    run = r.json()
    assert run["status"] == "failed" and run["tags"] == ["b", "c"] and run["notes"] == "diverged"
    assert run["target_compute"] == 5000
    assert run["fit_settings"] == {"warmup": 1500, "value_range": [0, 1]}
    run = api.patch(
        f"/api/v1/runs/{rid}", json={"fit_settings": {"r0": 0.3, "warmup": None}}
    ).json()
    assert run["fit_settings"] == {"value_range": [0, 1], "r0": 0.3}
    assert api.get("/api/v1/runs", params={"tag": "a"}).json()["total"] == 0
    assert api.get("/api/v1/runs", params={"tag": "c"}).json()["total"] == 1


def test_delete_removes_run_and_points(api):
    rid = create(api).json()["id"]
    api.post(
        f"/api/v1/runs/{rid}/points",
        json={"points": [{"step": 1, "compute": 1.0, "metrics": {"reward": 0.5}}]},
    )
    assert api.delete(f"/api/v1/runs/{rid}").status_code == 204
    assert api.get(f"/api/v1/runs/{rid}").status_code == 404
    assert api.delete(f"/api/v1/runs/{rid}").status_code == 404
    # The name is free again: a new run, not a resurrection.
    assert create(api).status_code == 201


def test_bad_run_input_is_422_with_location(api):
    cases = [
        {"project": "", "name": "x"},
        {"project": "p"},
        {"project": "p", "name": "x", "target_compute": -1},
        {"project": "p", "name": "x", "tags": "notalist"},
        {"project": "p", "name": "x\x00y"},
        {"project": "p", "name": "x", "unknown": 1},
        {"project": "p", "name": "x", "fit_settings": {"value_range": [1, 0]}},
        {"project": "p", "name": "x", "fit_settings": {"value_range": [0, 1e-6]}},
        {"project": "p", "name": "x", "fit_settings": {"value_range": [0, 1e300]}},
        {"project": "p", "name": "x", "fit_settings": {"value_range": [1e13, 1e13 + 1]}},
        {"project": "p", "name": "y" * 201},
    ]
    for body in cases:
        r = api.post("/api/v1/runs", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["code"] == "invalid" and r.json()["errors"][0]["loc"], r.text
    assert api.get("/api/v1/runs").json()["total"] == 0
    r = api.post(
        "/api/v1/runs",
        content=b'{"project": "p", "name": "x", "config": {"a": NaN}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422
    assert api.patch("/api/v1/runs/999", json={"status": "finished"}).status_code == 404
    rid = create(api).json()["id"]
    assert api.patch(f"/api/v1/runs/{rid}", json={"status": "exploded"}).status_code == 422
    assert api.patch(f"/api/v1/runs/{rid}", json={}).status_code == 422
    assert api.get("/api/v1/runs", params={"limit": 0}).status_code == 422
    assert api.get("/api/v1/runs/0").status_code == 422


def test_value_range_beyond_the_fits_span_is_422_everywhere(api):
    """The run's fit setting and a one-off fit refuse a range the fit's thresholds cannot
    scale to, saying so; nothing is written."""
    rid = create(api).json()["id"]
    for bad, words in (([0, 1e-6], "width"), ([0, 1e300], "width"), ([1e13, 1e13 + 1], "ends")):
        r = api.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"value_range": bad}})
        assert r.status_code == 422 and words in r.text and "value_range" in r.text, r.text
        r = api.post("/api/v1/fit", json={"compute": [1.0, 2.0, 3.0, 4.0, 5.0],
                                          "values": [0.1, 0.2, 0.3, 0.35, 0.4],
                                          "value_range": bad})
        assert r.status_code == 422 and words in r.text, r.text
    assert api.get(f"/api/v1/runs/{rid}").json()["fit_settings"] == {}
    r = api.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"value_range": [-1, 1]}})
    assert r.status_code == 200 and r.json()["fit_settings"] == {"value_range": [-1.0, 1.0]}


def test_a_resume_in_another_compute_unit_is_refused_once_the_run_has_points(api) -> None:
    """A run counted in FLOPs resumed (a sync, a follower) with GPU-hours: its points went onto
    the same axis with a 200. Now a 409 naming both; the same unit (any case) or no unit is
    a resume; a run without points yet takes the unit its trainer names."""
    run = api.post("/api/v1/runs", json={"project": "u", "name": "r",
                                         "compute_unit": "flops"}).json()
    empty = api.post("/api/v1/runs", json={"project": "u", "name": "r",
                                           "compute_unit": "gpu_hours"})
    assert empty.status_code == 200 and empty.json()["compute_unit"] == "gpu_hours"
    api.post(f"/api/v1/runs/{run['id']}/points", json={"points": [
        {"step": 1, "compute": 2.0, "metrics": {"acc": 0.5}}]})
    clash = api.post("/api/v1/runs", json={"project": "u", "name": "r", "compute_unit": "flops"})
    assert clash.status_code == 409 and "counts compute in gpu_hours, not flops" in clash.text
    for same in ({"compute_unit": "GPU_hours"}, {}):
        again = api.post("/api/v1/runs", json={"project": "u", "name": "r", **same})
        assert again.status_code == 200 and again.json()["compute_unit"] == "gpu_hours"
