"""Point fits, intervals, status, serialisation and warm starts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, FitResult, fit_curve, predict, predict_band
from scalewatch.server.fitting import grid as G
from scalewatch.server.fitting.fit import PAST_KNEE, point_fit, prepare, too_early
from scalewatch.server.fitting.result import PUBLIC_KEYS

from .helpers import ROWS, table1_run

PAPER = FitOptions(warmup=1500.0)


@pytest.mark.parametrize(
    ("name", "seed"),
    [("ScaleRL", 1), ("ScaleRL-8gen", 2), ("ScaleRL-Scout", 3), ("math+code code", 4),
     ("ScaleRL-bs512", 5)],
)
def test_recovers_table1_parameters(name: str, seed: int) -> None:
    c_mid, b, a = ROWS[name]
    c, y, truth = table1_run(name, 64000, seed)
    res = fit_curve(c, y, PAPER)
    assert res.status == "ok", res.message
    assert res.r0_source == "first_point"
    assert abs(res.A - a) < 0.02
    lo, hi = res.ci["A"]
    assert lo <= a <= hi
    plo, phi = res.predicted_interval
    assert plo <= truth[-1] <= phi
    assert abs(res.B - b) / b < 0.3
    assert abs(np.log(res.C_mid / c_mid)) < 0.2


def test_intervals_cover_table1_parameters_across_seeds() -> None:
    # A 95% interval misses one run in twenty by design, so coverage is judged over many.
    hits = {"A": 0, "B": 0, "C_mid": 0}
    n = 0
    for name in ("ScaleRL", "ScaleRL-8gen", "math+code code"):
        c_mid, b, a = ROWS[name]
        for seed in range(8):
            c, y, _ = table1_run(name, 64000, 100 + seed)
            res = fit_curve(c, y, PAPER)
            n += 1
            for key, true in (("A", a), ("B", b), ("C_mid", c_mid)):
                hits[key] += res.ci[key][0] <= true <= res.ci[key][1]
    assert all(h >= 0.85 * n for h in hits.values()), (hits, n)


def test_extrapolation_from_half_the_budget_is_honest() -> None:
    # The paper's protocol: fit 1.5k..8k GPU-h, predict 16k.
    c, y, truth = table1_run("ScaleRL-8gen", 16000, 7, n_evals=160, rho=0.4)
    res = fit_curve(c, y, FitOptions(warmup=1500, fit_until=8000))
    assert res.target_compute == 16000
    lo, hi = res.predicted_interval
    assert lo <= truth[-1] <= hi
    assert abs(res.predicted_at_target - truth[-1]) < 0.02


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pre_knee_data_is_unidentified(seed: int) -> None:
    # ScaleRL-32k has C_mid ~11k: data up to 8k GPU-h have not passed the knee.
    c, y, truth = table1_run("ScaleRL-32k", 8000, seed)
    res = fit_curve(c, y, PAPER)
    assert res.status == "unidentified", res.to_dict()
    d = res.to_dict()
    assert d["A"] is None
    assert d["A_lower_bound"] is not None
    # A defensible lower bound: not above the true asymptote.
    assert d["A_lower_bound"] <= ROWS["ScaleRL-32k"][2]
    # ... and informative: at least about the level the run has already reached.
    assert d["A_lower_bound"] >= truth[c <= 8000][-1] - 0.05
    assert "knee" in res.message


def test_early_window_is_not_confidently_wrong() -> None:
    # Only 1.5k..2k GPU-h of a run with C_mid ~2.9k: a short plateau-looking window.
    for seed in range(6):
        c, y, truth = table1_run("ScaleRL-32gen", 4000, seed, n_evals=140)
        res = fit_curve(c, y, FitOptions(warmup=1500, fit_until=2000, target_compute=4000))
        # Before the knee A is not identified: the fit says so, gives a lower bound at most the
        # truth, and its forecast interval at the target still covers the truth.
        assert res.status == "unidentified", (seed, res.to_dict())
        assert res.A_lower_bound is not None and res.A_lower_bound <= truth[-1], seed
        lo, hi = res.predicted_interval
        assert lo - 0.01 <= truth[-1] <= hi + 0.01, (seed, lo, hi, truth[-1])


def test_r0_sources() -> None:
    c, y, _ = table1_run("ScaleRL", 32000, 11)
    assert fit_curve(c, y, PAPER).r0_source == "first_point"
    given = fit_curve(c, y, FitOptions(warmup=1500, r0=0.31))
    assert given.r0_source == "given" and given.R0 == 0.31
    fitted = fit_curve(c[1:], y[1:], FitOptions())
    assert fitted.r0_source == "fitted"
    assert fitted.status == "ok", fitted.message
    assert abs(fitted.A - 0.61) < 0.02


def test_value_range_minus_one_to_one() -> None:
    c, y, _ = table1_run("ScaleRL", 64000, 12)
    res01 = fit_curve(c, y, PAPER)
    res = fit_curve(c, 2 * y - 1, FitOptions(warmup=1500, value_range=(-1.0, 1.0)))
    assert res.status == "ok"
    assert pytest.approx(2 * res01.A - 1, abs=1e-4) == res.A
    assert pytest.approx(res01.B, rel=1e-3) == res.B


def test_to_dict_exact_keys_and_round_trip() -> None:
    c, y, _ = table1_run("ScaleRL", 32000, 13)
    res = fit_curve(c, y, PAPER)
    d = res.to_dict()
    assert tuple(d) == PUBLIC_KEYS
    assert set(d["ci"]) == {"A", "B", "C_mid"}
    json.dumps(d, allow_nan=False)
    full = json.loads(json.dumps(res.to_dict(internal=True), allow_nan=False))
    back = FitResult.from_dict(full)
    assert back.to_dict() == json.loads(json.dumps(d))
    grid_c = np.geomspace(1500, 1e5, 30)
    lo1, hi1 = predict_band(res, grid_c)
    lo2, hi2 = predict_band(back, grid_c)
    np.testing.assert_allclose(lo1, lo2, atol=1e-5)
    np.testing.assert_allclose(hi1, hi2, atol=1e-5)
    assert np.all(lo1 <= predict(res, grid_c) + 1e-9)
    assert np.all(hi1 >= predict(res, grid_c) - 1e-9)
    # Reloading the public dict alone still predicts (no band).
    # (the public A is the posterior median, the curve the posterior median curve: close)
    assert np.allclose(predict(FitResult.from_dict(d), grid_c), predict(res, grid_c), atol=5e-3)


def test_intervals_can_be_skipped() -> None:
    c, y, _ = table1_run("ScaleRL", 32000, 14)
    res = fit_curve(c, y, FitOptions(warmup=1500, intervals=False))
    assert res.ci is None and res.predicted_interval is None
    assert res.status in ("ok", "unidentified")
    assert res.predicted_at_target is not None


def test_protocol_knobs() -> None:
    c, y, _ = table1_run("ScaleRL", 32000, 15)
    res = fit_curve(c, y, FitOptions(warmup=2000, fit_until=20000, target_compute=50000))
    assert res.fit_range[0] >= 2000 and res.fit_range[1] <= 20000
    assert res.n_points == int(((c >= 2000) & (c <= 20000)).sum())
    assert res.target_compute == 50000
    assert res.predicted_at_target == pytest.approx(float(predict(res, [50000])[0]))


def test_refinement_never_worse_than_grid() -> None:
    for seed in range(5):
        c, y, _ = table1_run("math+code code", 32000, seed, sigma=0.02)
        prep = prepare(c, y, PAPER)
        pf = point_fit(prep.x, prep.y, prep.r0, (0.0, 1.0))
        gr = pf.grid
        a, m, b, r0 = gr.a[gr.best], gr.m[gr.best], gr.b[gr.best], gr.r0[gr.best]
        e = prep.y - (r0 + (a - r0) / (1 + np.exp(-b * (prep.x - m))))
        assert pf.ssr <= float(e @ e) + 1e-12


def test_grid_closed_form_matches_brute_force() -> None:
    c, y, _ = table1_run("ScaleRL", 16000, 16)
    prep = prepare(c, y, PAPER)
    data = G.bin_data(prep.x, prep.y, max_bins=1000)  # no binning
    gr = G.search(data, prep.r0, (0.0, 1.0), np.array([0.3 + np.log(2542 / prep.c0)]),
                  np.array([1.9]))
    s = 1 / (1 + np.exp(-1.9 * (prep.x - gr.m[0])))
    a_grid = np.linspace(0.3, 1.0, 7001)
    ssr = [(((prep.r0 + (a - prep.r0) * s) - prep.y) ** 2).sum() for a in a_grid]
    assert gr.a[0] == pytest.approx(a_grid[int(np.argmin(ssr))], abs=2e-4)
    assert gr.ssr[0] <= min(ssr) + 1e-12  # closed form is the exact optimum


@pytest.mark.parametrize("name", ["ScaleRL", "ScaleRL-Scout", "math+code code"])
def test_warm_start_equals_cold(name: str) -> None:
    c, y, _ = table1_run(name, 64000, 21)
    n = len(c)
    prev = fit_curve(c[: int(0.85 * n)], y[: int(0.85 * n)], PAPER)
    for extra in (1, 5, 20):
        k = int(0.85 * n) + extra
        cold = fit_curve(c[:k], y[:k], PAPER)
        warm = fit_curve(c[:k], y[:k], PAPER, previous=prev)
        assert warm.status == cold.status
        assert warm.a_fit == pytest.approx(cold.a_fit, abs=1e-5)
        assert pytest.approx(cold.B, rel=1e-4) == warm.B
        assert warm.C_mid == pytest.approx(cold.C_mid, rel=1e-4)
        assert warm.ssr == pytest.approx(cold.ssr, rel=1e-7)
    prep = prepare(c, y, PAPER)
    a, b, cm, r0 = prev.params
    pf = point_fit(prep.x, prep.y, prep.r0, (0.0, 1.0), (a, np.log(cm / prep.c0), b, r0))
    assert pf.used_grid == "warm"


def test_bad_warm_start_falls_back_to_full_grid() -> None:
    c, y, _ = table1_run("ScaleRL", 64000, 22)
    cold = fit_curve(c, y, PAPER)
    # A previous result from a completely different curve lands in a poor basin.
    bogus = FitResult(status="ok", A=0.99, a_fit=0.99, B=0.2, C_mid=1e9, R0=0.3)
    warm = fit_curve(c, y, PAPER, previous=bogus)
    assert warm.ssr == pytest.approx(cold.ssr, rel=1e-6)
    assert warm.a_fit == pytest.approx(cold.a_fit, abs=1e-5)


def test_a_is_claimed_only_well_past_the_knee() -> None:
    # A narrow interval is not enough while the window ends short of PAST_KNEE x the fitted
    # C_mid: such claims held the true A only 80% of the time in bench/calibration.py.
    early = too_early(2400.0, 1.8 * 2400.0)
    assert early is not None and "1.8 x past its fitted C_mid" in early
    assert early.endswith("claimed from 2 x, at compute 4,800")
    assert too_early(2400.0, PAST_KNEE * 2400.0) is None and too_early(2400.0, 3 * 2400.0) is None
    # A real run at 2 x C_mid whose persistent noise makes its interval look narrow: withheld,
    # with the reason in words (and no "not passed its knee": it has).  Since the rule starts
    # at 2 x (A's interval carries the model form's uncertainty), what holds it back is that
    # other saturating curves fit its window as well and level off elsewhere.
    c, y, _ = table1_run("ScaleRL", 2542 * 8, 8, rho=0.95, n_evals=160)
    res = fit_curve(c, y, FitOptions(fit_until=2.0 * 2542))
    lo, hi = res.ci["A"]
    assert res.status == "unidentified" and hi - lo <= 0.1
    assert "model form" in res.message and "not passed" not in res.message
    assert res.withheld is not None
    assert [r["code"] for r in res.withheld["reasons"]] == ["interval_too_wide"]
    assert res.to_dict()["A"] is None and res.A_lower_bound is not None
