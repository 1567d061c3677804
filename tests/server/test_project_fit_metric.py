"""A project's default fit metric (PATCH /api/v1/projects/{name}), overridden by a run's own,
on SQLite and PostgreSQL: the run says which metric it fits and why, ingest marks that
series for a refit, and fit reads default to it."""

from __future__ import annotations

from sqlalchemy import select


def _refits(api, run_id: int) -> dict[str, int]:  # noqa: ANN001
    from scalewatch.server.db.models import Series

    with api.app.state.store.engine.connect() as c:
        rows = c.execute(select(Series.name, Series.refit_requested).where(
            Series.run_id == run_id)).all()
    return dict(rows)  # type: ignore[arg-type]


def _post(api, run_id: int, steps: range) -> None:  # noqa: ANN001
    pts = [{"step": s, "compute": float(s), "metrics": {
        "eval_reward": s / 100, "train/pass": s / 50}} for s in steps]
    assert api.post(f"/api/v1/runs/{run_id}/points", json={"points": pts}).status_code == 200


def test_project_default_then_run_override(api) -> None:  # noqa: ANN001
    a = api.post("/api/v1/runs", json={"project": "p", "name": "a"}).json()
    b = api.post("/api/v1/runs", json={"project": "p", "name": "b",
                                       "fit_metric": "eval_reward"}).json()
    _post(api, a["id"], range(1, 5))
    _post(api, b["id"], range(1, 5))
    run = api.get(f"/api/v1/runs/{a['id']}").json()
    assert (run["fit_metric"], run["fit_metric_reason"]) == (
        "eval_reward", "recognised: TRL / HF eval reward")

    r = api.patch("/api/v1/projects/p", json={"fit_metric": "train/pass"})
    assert r.status_code == 200, r.text
    assert r.json()["fit_metric"] == "train/pass"
    assert api.get("/api/v1/projects/p").json()["fit_metric"] == "train/pass"
    run = api.get(f"/api/v1/runs/{a['id']}").json()
    assert (run["fit_metric"], run["fit_metric_reason"]) == ("train/pass",
                                                              "the project's default")
    own = api.get(f"/api/v1/runs/{b['id']}").json()  # a run's own choice wins
    assert (own["fit_metric"], own["fit_metric_reason"]) == ("eval_reward", "set for this run")

    # Ingest marks the project default's series for a refit (not the recognised one).
    before = _refits(api, a["id"])
    _post(api, a["id"], range(5, 8))
    after = _refits(api, a["id"])
    assert after["train/pass"] > before["train/pass"]
    assert after["eval_reward"] == before["eval_reward"]
    assert api.get(f"/api/v1/runs/{a['id']}/fit").json()["metric"] == "train/pass"

    # A run overrides it (PATCH), and clearing the project default goes back to recognition.
    api.patch(f"/api/v1/runs/{a['id']}", json={"fit_metric": "eval_reward"})
    assert api.get(f"/api/v1/runs/{a['id']}").json()["fit_metric_reason"] == "set for this run"
    assert api.patch("/api/v1/projects/p", json={"fit_metric": None}).json()["fit_metric"] is None
    assert api.get("/api/v1/projects/nope").status_code == 404
    assert api.patch("/api/v1/projects/p", json={"fit_metric": ""}).status_code == 422


def test_a_project_named_with_slashes_is_addressable(api) -> None:  # noqa: ANN001
    """Project names may hold "/" (MLflow experiments such as "/Shared/math-rl", "team/math"):
    POST /runs takes them, but GET and PATCH /projects/{name} answered 404 "Not Found" even
    with the slash escaped (%2F is decoded before routing), so `scalewatch fit-metric --project
    team/math` could not set that project's default."""
    from urllib.parse import quote

    for name in ("team/math", "/Shared/math-rl", "a//b/"):
        made = api.post("/api/v1/runs", json={"project": name, "name": "r"})
        assert made.status_code == 201, made.text
        url = f"/api/v1/projects/{quote(name, safe='')}"  # as the client sends it
        r = api.patch(url, json={"fit_metric": "val/acc"})
        assert r.status_code == 200 and r.json()["name"] == name, r.text
        got = api.get(url)
        assert got.status_code == 200, got.text
        assert (got.json()["name"], got.json()["fit_metric"]) == (name, "val/acc")
        run = api.get(f"/api/v1/runs/{made.json()['id']}").json()
        assert run["fit_metric"] == "val/acc"
    other = api.get("/api/v1/projects/team")  # a prefix is another project: not found
    assert other.status_code == 404 and other.json()["detail"] == "project 'team' not found"
