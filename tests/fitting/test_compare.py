"""compare_fits: the paper's decision rule, crossovers and the winner at a budget."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, compare_fits, fit_curve
from scalewatch.server.fitting.synth import make_run

OPTS = FitOptions(warmup=1500.0)


def _run(a: float, b: float, c_mid: float, seed: int, budget: float = 64000) -> tuple:
    c, y, _ = make_run(a, b, c_mid, budget, np.random.default_rng(seed), sigma=0.005, rho=0.5,
                       n_evals=150)
    return c, y, fit_curve(c, y, OPTS)


def test_same_asymptote_higher_b_wins() -> None:
    s = {"fast": _run(0.61, 2.4, 2542, 1), "slow": _run(0.615, 1.6, 2542, 2)}
    assert all(v[2].status == "ok" for v in s.values())
    out = compare_fits(s, budget=None, options=OPTS)
    json.dumps(out, allow_nan=False)
    d = out["pairs"][0]["decision"]
    assert d["rule"] == "same_asymptote"
    assert d["delta_A"] <= 0.02
    assert d["fixed_A"] == pytest.approx((s["fast"][2].A + s["slow"][2].A) / 2)
    assert d["more_efficient"] == "fast"
    assert d["B_at_fixed_A"]["fast"] > d["B_at_fixed_A"]["slow"]
    assert out["pairs"][0]["winner_at_budget"] is None


def test_different_asymptote() -> None:
    s = {"low": _run(0.60, 2.0, 2542, 3), "high": _run(0.70, 1.7, 4000, 4)}
    out = compare_fits(s, budget=100000, options=OPTS)
    d = out["pairs"][0]["decision"]
    assert d["rule"] == "different_asymptote"
    assert d["higher_asymptote"] == "high"
    assert d["B_at_fixed_A"] is None
    w = out["pairs"][0]["winner_at_budget"]
    assert w["run"] == "high" and w["probability"] > 0.95
    assert out["runs"]["high"]["interval_at_budget"][0] < out["runs"]["high"][
        "predicted_at_budget"] < out["runs"]["high"]["interval_at_budget"][1]


def test_crossover() -> None:
    # "early" rises sooner but saturates lower; "late" overtakes it at ~6k GPU-h.
    early, late = (0.60, 2.0, 1500), (0.70, 2.0, 4000)
    s = {"early": _run(*early, 5), "late": _run(*late, 6)}
    out = compare_fits(s, budget=50000, options=OPTS)
    cx = out["pairs"][0]["crossover"]
    assert cx["better_before"] == "early" and cx["better_after"] == "late"
    grid = np.geomspace(1000, 50000, 20000)

    def f(p: tuple) -> np.ndarray:
        a, b, cm = p
        return 0.3 + (a - 0.3) / (1 + (cm / grid) ** b)

    true_cx = grid[np.argmax(f(late) > f(early))]
    lo, hi = cx["interval"]
    assert lo <= cx["compute"] <= hi
    assert lo <= true_cx <= hi
    assert abs(np.log(cx["compute"] / true_cx)) < 0.15
    assert cx["probability"] > 0.9
    w = out["pairs"][0]["winner_at_budget"]
    assert w["run"] == "late"
    # Before the crossover the early run is predicted to win.
    out2 = compare_fits(s, budget=2000, options=OPTS)
    assert out2["pairs"][0]["winner_at_budget"]["run"] == "early"


def test_unidentified_run_is_undetermined_but_still_compared() -> None:
    c, y, _ = make_run(0.645, 1.89, 11272, 8000, np.random.default_rng(7), sigma=0.01)
    pre = fit_curve(c, y, OPTS)
    assert pre.status == "unidentified"
    s = {"pre": (c, y, pre), "ok": _run(0.61, 1.92, 2542, 8)}
    out = compare_fits(s, budget=16000, options=OPTS)
    assert out["pairs"][0]["decision"]["rule"] == "undetermined"
    assert "pre" in out["pairs"][0]["decision"]["reason"]
    assert out["pairs"][0]["winner_at_budget"] is not None
    json.dumps(out, allow_nan=False)


def test_three_runs_give_three_pairs() -> None:
    s = {k: _run(0.6 + 0.01 * i, 2.0, 2500, 10 + i) for i, k in enumerate("abc")}
    out = compare_fits(s, budget=20000, options=OPTS)
    assert [p["runs"] for p in out["pairs"]] == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert set(out["runs"]) == {"a", "b", "c"}


@pytest.mark.parametrize("n_evals", [150, 6000])  # points as they are, and binned (> 4,000)
def test_fixed_a_refit_warm_started_from_the_run_finds_what_a_full_search_finds(
    n_evals: int,
) -> None:
    """A pair is refitted at an A next to each run's own, so the refit starts from the run's
    fit and a coarse check grid stands in for the full search; a start in the wrong basin (a
    C_mid 300x too low, B at its upper bound, where the refinement alone stays) must still
    end where the full search ends."""
    from scalewatch.server.fitting.compare import FixedARefit  # noqa: PLC0415

    c, y, _ = make_run(0.6, 1.6, 3000.0, 40000.0, np.random.default_rng(8), sigma=0.01,
                       rho=0.5, n_evals=n_evals)
    res = fit_curve(c, y, OPTS)
    a = float(res.A)
    cold = FixedARefit(c, y, OPTS)
    for near in (res.params, (a, 20.0, 10.0, 0.5)):
        warm = FixedARefit(c, y, OPTS, near=near)
        for at in (a - 0.02, a, a + 0.02):
            assert warm.at(at) == pytest.approx(cold.at(at), rel=2e-3)


def test_a_run_that_broke_is_named_as_broken_in_the_verdict() -> None:
    """A run without A because it broke: the verdict says so, with the bound on its new
    ceiling, instead of only "A not identified" (which reads as "too early to say")."""
    from dataclasses import replace  # noqa: PLC0415

    c1, y1, r1 = _run(0.6, 1.6, 3000.0, seed=1)
    c2, y2, r2 = _run(0.62, 1.5, 3500.0, seed=2)
    broke = replace(r2, A=None, break_={"compute": 20000.0, "step": 200, "drop": 0.1,
                                        "ceiling_upper": 0.5234, "regime": "too_few_points"})
    out = compare_fits({"steady": (c1, y1, r1), "broken": (c2, y2, broke)})
    reason = out["pairs"][0]["decision"]["reason"]
    assert reason == ("A not identified for broken (it broke; its ceiling is now at most "
                      "0.523)")
    # Not yet identified, no break: as before.
    out = compare_fits({"steady": (c1, y1, r1), "young": (c2, y2, replace(r2, A=None))})
    assert out["pairs"][0]["decision"]["reason"] == "A not identified for young"
