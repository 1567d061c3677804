"""What a project's finished runs teach its fits, end to end: the drift allowance (always) and
the opt-in noise prior, learned by the refitter; the noise prior given explicitly, and refused
when malformed (SQLite and PostgreSQL)."""

from __future__ import annotations

import numpy as np

from scalewatch.server.db.models import Fit, Project, Run, Series
from scalewatch.server.fitting.hindcast import HORIZON_FRACTIONS, MIN_HINDCASTS, allowance_knots
from scalewatch.server.fitting.intervals import DRIFT_RATE, allowance_rate, widen
from scalewatch.server.fitting.synth import make_run
from scalewatch.server.store import fits_sql
from tests.support.polling import wait_for

METRIC = "val_pass_rate"


def _post(client, rid: int, c, y, first_step: int = 0) -> None:
    pts = [{"step": i, "compute": float(ci), "metrics": {METRIC: float(yi)}}
           for i, (ci, yi) in enumerate(zip(c, y, strict=True), start=first_step)]
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": pts})
    assert r.status_code == 200, r.text


def _run(client, project: str, name: str, **extra) -> int:
    r = client.post("/api/v1/runs", json={"project": project, "name": name,
                                          "target_compute": 20000, **extra})
    assert r.status_code in (200, 201), r.text
    return int(r.json()["id"])


def _fitted(client, rid: int, posted: int) -> dict:
    """The fit of all ``posted`` points (the one at compute 0 is R0, not a fitted point)."""
    n = posted - 1
    return wait_for(lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["n_points"] == n
                    and f.get("fit_id") and f)


def _data(seed: int, rho: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    c, y, _ = make_run(0.61, 1.92, 2542.0, 20000.0, np.random.default_rng(seed), rho=rho)
    return c, y


def test_project_prior_is_learned_from_finished_runs_only(live_app):
    app, client = live_app
    done = _run(client, "noisy", "finished-1")
    c, y = _data(1)
    _post(client, done, c, y)
    _fitted(client, done, c.size)
    assert client.patch(f"/api/v1/runs/{done}", json={"status": "finished"}).status_code == 200
    _, record = app.state.store.latest_fit(done)
    rho_mean, rho_sd = record["internal"]["rho"]
    assert 0.0 <= rho_mean <= 0.98 and rho_sd >= 0.0

    # A running run of the same project is no teacher: its fit may still change.
    running = _run(client, "noisy", "running-1")
    c2, y2 = _data(2, rho=0.0)
    _post(client, running, c2, y2)
    _fitted(client, running, c2.size)

    new = _run(client, "noisy", "new", fit_settings={"noise_prior": "project"})
    c3, y3 = _data(3)
    _post(client, new, c3[:40], y3[:40])
    fit = _fitted(client, new, 40)
    assert fit["prior"] == {"rho": {"mean": round(rho_mean, 4), "sd": round(max(rho_sd, 0.05), 4)},
                            "source": "project", "finished_runs": 1}

    # A project without finished runs has nothing to learn from: no prior, a normal fit.
    alone = _run(client, "elsewhere", "alone", fit_settings={"noise_prior": "project"})
    _post(client, alone, c3[:40], y3[:40])
    assert _fitted(client, alone, 40)["prior"] is None


def test_explicit_prior_through_patch_and_stateless_fit(live_app):
    _, client = live_app
    rid = _run(client, "p", "r")
    c, y = _data(4)
    _post(client, rid, c[:50], y[:50])
    before = _fitted(client, rid, 50)
    assert before["prior"] is None
    r = client.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"noise_prior": [0.8, 0.05]}})
    assert r.status_code == 200, r.text
    assert r.json()["fit_settings"]["noise_prior"] == [0.8, 0.05]
    after = wait_for(lambda: (f := client.get(f"/api/v1/runs/{rid}/fit").json())["prior"] and f)
    assert after["prior"] == {"rho": {"mean": 0.8, "sd": 0.05}}

    body = {"compute": [float(v) for v in c[:50]], "values": [float(v) for v in y[:50]],
            "target_compute": 20000, "noise_prior": [0.8, 0.05]}
    fit = client.post("/api/v1/fit", json=body)
    assert fit.status_code == 200, fit.text
    assert fit.json()["prior"] == {"rho": {"mean": 0.8, "sd": 0.05}}


def test_malformed_priors_are_refused_with_where_and_what(api):
    rid = _run(api, "p", "r")
    for bad, words in (([1.5, 0.1], "[0, 0.98]"), ([0.5, 0.0], "(0, 1]"),
                       ("teammates", "noise_prior"), ([0.5], "noise_prior")):
        r = api.patch(f"/api/v1/runs/{rid}", json={"fit_settings": {"noise_prior": bad}})
        assert r.status_code == 422, (bad, r.text)
        assert "noise_prior" in r.text and words in r.text, (bad, r.text)
    assert api.get(f"/api/v1/runs/{rid}").json()["fit_settings"] == {}
    r = api.post("/api/v1/fit", json={"compute": [1.0, 2.0], "values": [0.1, 0.2],
                                      "noise_prior": [0.99, 0.1]})
    assert r.status_code == 422 and "noise_prior" in r.text
    # A run's prior given where a project's goes: refused, saying where it belongs (it was
    # once accepted and silently dropped).
    for key in ("noise_prior", "b_prior"):
        r = api.patch(f"/api/v1/runs/{rid}", json={key: "project", "tags": ["t"]})
        assert r.status_code == 422, r.text
        assert f"fit_settings.{key}" in r.text and "/api/v1/projects/" in r.text, r.text
    assert api.get(f"/api/v1/runs/{rid}").json()["tags"] == []


def test_a_project_default_applies_to_runs_without_their_own(live_app):
    _, client = live_app
    r = client.patch("/api/v1/projects/team", json={"fit_metric": METRIC})
    assert r.status_code == 200 and r.json()["noise_prior"] is None
    done = _run(client, "team", "finished")
    c, y = _data(5)
    _post(client, done, c, y)
    _fitted(client, done, c.size)
    client.patch(f"/api/v1/runs/{done}", json={"status": "finished"})
    own = _run(client, "team", "own", fit_settings={"noise_prior": [0.3, 0.1]})
    inherits = _run(client, "team", "inherits")
    for rid in (own, inherits):
        _post(client, rid, c[:40], y[:40])
        assert _fitted(client, rid, 40)["prior"] in (None, {"rho": {"mean": 0.3, "sd": 0.1}})
    r = client.patch("/api/v1/projects/team", json={"noise_prior": "project"})
    assert r.status_code == 200, r.text
    # Setting one default leaves the other alone.
    assert r.json() == {**r.json(), "fit_metric": METRIC, "noise_prior": "project"}
    learned = wait_for(lambda: (f := client.get(f"/api/v1/runs/{inherits}/fit").json())["prior"]
                       and f)
    assert learned["prior"]["source"] == "project" and learned["prior"]["finished_runs"] == 1
    assert client.get(f"/api/v1/runs/{own}/fit").json()["prior"] == {"rho": {"mean": 0.3,
                                                                           "sd": 0.1}}
    r = client.patch("/api/v1/projects/team", json={"noise_prior": [2.0, 0.1]})
    assert r.status_code == 422 and "noise_prior" in r.text
    assert client.get("/api/v1/projects/team").json()["noise_prior"] == "project"


def _hindcast_of(app, rid: int) -> list | None:
    """The hindcast stored with a run's latest fit (only a finished run's fit has one)."""
    _, record = app.state.store.latest_fit(rid)
    return (record or {}).get("internal", {}).get("hindcast", "absent")


def _drift_sd(app, rid: int) -> float:
    return float(app.state.store.latest_fit(rid)[1]["internal"]["drift_sd"])


def _learned_allowance(app, rid: int) -> tuple[tuple[float, float], ...]:
    """The per-horizon allowance the store's finished runs teach run ``rid``'s project."""
    with app.state.store.session() as s:
        pid = s.get(Run, rid).project_id
        hindcasts = fits_sql.finished_runs_teach(s, pid, METRIC, but=rid)["hindcasts"]
    knots = allowance_knots(hindcasts)
    assert knots is not None and len(knots) == len(HORIZON_FRACTIONS), hindcasts
    return knots


def _rate_at_own_horizon(app, rid: int, knots: tuple[tuple[float, float], ...]) -> float:
    """The drift rate ``knots`` give run ``rid``'s latest fit at ln(its target / window end)."""
    record = app.state.store.latest_fit(rid)[1]
    rate = allowance_rate(knots, float(np.log(record["target_compute"]
                                              / record["fit_range"][1])))
    assert rate is not None
    return rate


def test_finished_runs_teach_the_project_its_drift_rate(live_app):
    """A run that finishes is fitted once more with its hindcast; with enough of them
    (``MIN_HINDCASTS``) the project's runs get a drift rate (the prior says so), with or
    without the opt-in priors; a finished run whose fit predates its hindcast (an upgraded
    database) is refitted by the next run that learns from it."""
    app, client = live_app
    finished = []
    for seed in range(MIN_HINDCASTS):
        rid = _run(client, "drift", f"done-{seed}")
        c, y = _data(100 + seed, rho=0.5)
        _post(client, rid, c, y)
        finished.append(rid)
    for rid in finished:
        _fitted(client, rid, c.size)
        assert _hindcast_of(app, rid) == "absent"  # running: no hindcast yet
        assert client.patch(f"/api/v1/runs/{rid}", json={"status": "finished"}).status_code == 200
    for rid in finished:
        # One hindcast per horizon (HORIZON_FRACTIONS: cut at 1/2, 1/3, 1/5 of its compute).
        per_horizon = wait_for(lambda rid=rid: isinstance(h := _hindcast_of(app, rid), list)
                               and h)
        assert len(per_horizon) == len(HORIZON_FRACTIONS), per_horizon
        assert all(isinstance(h, list) and len(h) == 3 for h in per_horizon), per_horizon
        miss, sd, beyond = per_horizon[0]
        assert abs(miss) < 0.1 and sd > 0 and beyond > 0
        # An earlier cut forecasts farther past its window, with a wider exact-model band.
        beyonds = [h[2] for h in per_horizon]
        assert beyonds == sorted(beyonds) and len(set(beyonds)) == 3, per_horizon
        assert all(h[1] > 0 for h in per_horizon), per_horizon

    # Make the first one look like a fit stored before hindcasts existed.
    with app.state.store.session() as s:
        series = s.query(Series).filter(Series.run_id == finished[0],
                                        Series.name == METRIC).one()
        fit = s.get(Fit, series.latest_fit_id)
        fit.summary = {k: v for k, v in fit.summary.items() if k != "hindcast"}
        internal = dict(fit.result["internal"])
        internal.pop("hindcast")
        fit.result = {**fit.result, "internal": internal}

    plain = _run(client, "drift", "plain")  # no opt-in prior
    c, y = _data(14, rho=0.5)
    _post(client, plain, c[:60], y[:60])
    first = _fitted(client, plain, 60)
    # One hindcast short (the stripped one is not counted): the default allowance.
    assert first["prior"] is None, first["prior"]
    assert app.state.store.latest_fit(plain)[1]["internal"]["drift_sd"] == DRIFT_RATE
    wait_for(lambda: isinstance(_hindcast_of(app, finished[0]), list))  # ... but refitted
    _post(client, plain, c[60:80], y[60:80], first_step=60)
    prior = _fitted(client, plain, 80)["prior"]
    assert prior == {"drift_rate": prior["drift_rate"], "hindcasts": MIN_HINDCASTS}, prior
    assert 0.0 <= prior["drift_rate"] < 0.5, prior
    knots = _learned_allowance(app, plain)
    assert abs(_drift_sd(app, plain) - _rate_at_own_horizon(app, plain, knots)) < 1e-12
    assert abs(_drift_sd(app, plain) - prior["drift_rate"]) < 1e-4

    # With the noise prior too, both are named, each with what it was learned from; the
    # drift rate is the allowance at this fit's own horizon (a shorter window: farther).
    opted = _run(client, "drift", "opted", fit_settings={"noise_prior": "project"})
    _post(client, opted, c[:60], y[:60])
    both = _fitted(client, opted, 60)["prior"]
    assert both["source"] == "project" and both["finished_runs"] == MIN_HINDCASTS, both
    assert both["hindcasts"] == MIN_HINDCASTS, both
    assert both["drift_rate"] == round(_rate_at_own_horizon(app, opted, knots), 4), both
    assert both["rho"]["sd"] > 0, both

    # A group's pooled fit takes the project's allowance too.
    for k in range(2):
        seed_run = _run(client, "drift", f"seed-{k}", group="recipe")
        c, y = _data(40 + k, rho=0.5)
        _post(client, seed_run, c[:60], y[:60])
    pooled = wait_for(lambda: (f := client.get("/api/v1/groups/fit", params={
        "project": "drift", "group": "recipe"}).json()).get("fit_id") and f["n_points"] == 118
        and f)
    # ... at its own horizon: from its window's end (the members' latest) to its target.
    g_rate = allowance_rate(knots, float(np.log(pooled["target_compute"]
                                                / pooled["fit_range"][1])))
    assert g_rate is not None
    assert pooled["prior"] == {"drift_rate": round(g_rate, 4),
                               "hindcasts": MIN_HINDCASTS}, pooled

    # The width follows the horizon: the same curve forecast near (its target) and far (8 x
    # farther) takes the learned allowance at each one's own distance past its window, and
    # that is what widens each forecast interval.
    c, y = _data(15, rho=0.5)
    near = _run(client, "drift", "near")
    far = _run(client, "drift", "far", target_compute=160000)
    for rid in (near, far):
        _post(client, rid, c[:80], y[:80])
    width = {}
    for rid in (near, far):
        _fitted(client, rid, 80)
        record = app.state.store.latest_fit(rid)[1]
        beyond = float(np.log(record["target_compute"] / record["fit_range"][1]))
        rate = _rate_at_own_horizon(app, rid, knots)
        assert abs(record["internal"]["drift_sd"] - rate) < 1e-12
        # The allowance's sd at this distance is the learned per-horizon one, interpolated.
        xs, ys = [0.0, *(k[0] for k in knots)], [0.0, *(k[1] for k in knots)]
        sd = (float(np.interp(beyond, xs, ys)) if beyond <= xs[-1]
              else ys[-1] * beyond / xs[-1])
        assert abs(rate * beyond - sd) < 1e-12
        # ... and it is what widened the forecast interval (intervals.at_target's arithmetic).
        internal = record["internal"]
        c_lo, c_hi = internal["curve_interval"]
        extra = float(np.hypot(internal["q"] * internal["eval_sd"], 1.96 * sd))
        lo, hi = widen(np.array([c_lo]), np.array([c_hi]),
                       np.array([record["predicted_at_target"]]), extra)
        v_lo, v_hi = internal["value_range"]
        expected = (max(float(lo[0]), v_lo), min(float(hi[0]), v_hi))
        assert np.allclose(record["predicted_interval"], expected, atol=1e-9), (record, expected)
        width[rid] = (record["predicted_interval"][1] - record["predicted_interval"][0], sd)
    # The farther forecast (past the farthest horizon: the allowance grows in proportion)
    # takes the larger allowance, and its interval is the wider.
    assert width[far][1] > width[near][1], (width, knots)
    assert width[far][0] > width[near][0], width


def test_fits_learn_from_the_newest_finished_runs_only(store, monkeypatch) -> None:
    """Every refit reads what its project's finished runs teach, so it reads only the newest
    ``LEARN_FROM_NEWEST`` of them (a project of thousands must not slow every fit), never the
    run itself, and never a running one."""
    with store.session() as s:
        project = Project(name="many")
        s.add(project)
        s.flush()
        ids = []
        for i in range(6):
            run = Run(project_id=project.id, name=f"r{i}",
                      status="running" if i == 4 else "finished")
            s.add(run)
            s.flush()
            series = Series(run_id=run.id, name=METRIC)
            s.add(series)
            s.flush()
            # r5 stored one hindcast per horizon (None: that cut had no band), the others
            # one triple, as fits stored before there were several horizons.
            hindcast = ([[0.05, 0.01, 0.7], None, [0.05, 0.02, 1.6]] if i == 5
                        else [0.01 * i, 0.01, 0.5])
            fit = Fit(series_id=series.id, status="ok", n_points=100, result={},
                      summary={"status": "ok", "hindcast": hindcast})
            s.add(fit)
            s.flush()
            series.latest_fit_id = fit.id
            ids.append(run.id)
        pid = project.id
    monkeypatch.setattr(fits_sql, "LEARN_FROM_NEWEST", 3)
    with store.session() as s:
        taught = fits_sql.finished_runs_teach(s, pid, METRIC, but=ids[5])
        everyone = fits_sql.finished_runs_teach(s, pid, METRIC)
    # r5 is the run itself and r4 still running: the newest three others are r3, r2, r1.
    # Their one stored triple (a fit from before the horizons) is their half-run hindcast.
    assert taught["hindcasts"] == [[(0.01 * i, 0.01, 0.5)] for i in (3, 2, 1)]
    assert everyone["hindcasts"] == [[(0.05, 0.01, 0.7), None, (0.05, 0.02, 1.6)],
                                     [(0.03, 0.01, 0.5)], [(0.02, 0.01, 0.5)]]
