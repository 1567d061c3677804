"""The opt-in prior on B end to end: learned from the B of a project's finished, identified
runs by the refitter, given explicitly, and refused when malformed (SQLite and PostgreSQL)."""

from __future__ import annotations

import math

import numpy as np

from scalewatch.server.fitting.b_prior import NU, learn_b_prior, log_b_estimate
from scalewatch.server.fitting.synth import make_run
from tests.server.test_noise_prior import METRIC, _fitted, _post, _run
from tests.support.polling import wait_for


def _data(seed: int, b: float = 1.92) -> tuple[np.ndarray, np.ndarray]:
    c, y, _ = make_run(0.61, b, 2542.0, 20000.0, np.random.default_rng(seed), rho=0.3)
    return c, y


def _finish(client, project: str, name: str, seed: int, b: float) -> dict:
    rid = _run(client, project, name)
    c, y = _data(seed, b)
    _post(client, rid, c, y)
    fit = _fitted(client, rid, c.size)
    assert client.patch(f"/api/v1/runs/{rid}", json={"status": "finished"}).status_code == 200
    return fit


def test_project_b_prior_is_learned_from_three_identified_finished_runs(live_app):
    app, client = live_app
    r = client.patch("/api/v1/projects/recipes", json={"fit_metric": METRIC, "b_prior": "project"})
    assert r.status_code == 200 and r.json()["b_prior"] == "project", r.text
    fits = [_finish(client, "recipes", f"done-{i}", seed, b)
            for i, (seed, b) in enumerate(((1, 1.8), (2, 2.0)))]
    assert all(f["status"] == "ok" for f in fits), [f["message"] for f in fits]

    young = _run(client, "recipes", "young")
    c, y = _data(7)
    _post(client, young, c[:40], y[:40])
    assert _fitted(client, young, 40)["prior"] is None  # two finished runs: no spread yet

    fits.append(_finish(client, "recipes", "done-2", 3, 1.9))
    assert fits[-1]["status"] == "ok", fits[-1]["message"]
    _post(client, young, c[40:45], y[40:45], first_step=40)  # new points: the young run refits
    fit = _fitted(client, young, 45)
    centre, scale = learn_b_prior(log_b_estimate(f["ci"]["B"]) for f in fits) or (0.0, 0.0)
    assert fit["prior"] == {"B": {"median": round(math.exp(centre), 4),
                                  "log_sd": round(scale, 4), "dof": NU,
                                  "source": "project", "finished_runs": 3}}
    assert 1.6 < fit["prior"]["B"]["median"] < 2.3

    # Once finished, the run is fitted on its own B (it now teaches the others): no B prior.
    _post(client, young, c[45:], y[45:], first_step=45)
    _fitted(client, young, c.size)
    assert client.patch(f"/api/v1/runs/{young}", json={"status": "finished"}).status_code == 200
    final = wait_for(lambda: "hindcast" in (r := app.state.store.latest_fit(young)[1])["internal"]
                     and r)
    assert "B" not in (final.get("prior") or {}), final.get("prior")


def test_explicit_b_prior_through_patch_and_stateless_fit(live_app):
    _, client = live_app
    rid = _run(client, "p", "r")
    c, y = _data(4)
    _post(client, rid, c[:50], y[:50])
    assert _fitted(client, rid, 50)["prior"] is None
    r = client.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"b_prior": [0.64, 0.2]}})
    assert r.status_code == 200, r.text
    assert r.json()["fit_settings"]["b_prior"] == [0.64, 0.2]
    expected = {"B": {"median": round(math.exp(0.64), 4), "log_sd": 0.2, "dof": NU}}
    after = wait_for(lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["prior"] and f)
    assert after["prior"] == expected

    body = {"compute": [float(v) for v in c[:50]], "values": [float(v) for v in y[:50]],
            "target_compute": 20000, "b_prior": [0.64, 0.2], "noise_prior": [0.3, 0.1]}
    fit = client.post("/api/v1/fit", json=body)
    assert fit.status_code == 200, fit.text
    assert fit.json()["prior"] == {**expected, "rho": {"mean": 0.3, "sd": 0.1}}


def test_malformed_b_priors_are_refused_with_where_and_what(api):
    rid = _run(api, "p", "r")
    for bad, words in (([9.0, 0.1], "ln B"), ([0.5, 0.0], "(0, 5]"),
                       ("teammates", "b_prior"), ([0.5], "b_prior")):
        r = api.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"b_prior": bad}})
        assert r.status_code == 422, (bad, r.text)
        assert "b_prior" in r.text and words in r.text, (bad, r.text)
    assert api.get(f"/api/v1/runs/{rid}").json()["fit_settings"] == {}
    r = api.post("/api/v1/fit", json={"compute": [1.0, 2.0], "values": [0.1, 0.2],
                                      "b_prior": [0.6, -1.0]})
    assert r.status_code == 422 and "b_prior" in r.text
    r = api.patch("/api/v1/projects/p", json={"b_prior": [0.6, 9.0]})
    assert r.status_code == 422 and "b_prior" in r.text
    assert api.get("/api/v1/projects/p").json()["b_prior"] is None
