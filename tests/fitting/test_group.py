"""A recipe fitted on its seeds jointly (``fit_group``): tighter than one seed, still honest."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalewatch.server.fitting import FitOptions, compare_fits, fit_curve, predict, predict_band
from scalewatch.server.fitting.group import GroupFitResult, GroupMember, fit_group
from scalewatch.server.fitting.synth import make_run

A, B, C_MID = 0.61, 1.92, 2542.0
END = 8 * C_MID


def _seeds(k: int, seed: int, spread: float = 0.0, a: float = A, sigma: float = 0.012,
           ) -> list[GroupMember]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        a_i = a + rng.normal(0.0, spread)
        c, y, _ = make_run(a_i, B, C_MID, END, rng, r0=float(rng.uniform(0.25, 0.4)),
                           n_evals=120, sigma=sigma, rho=0.5, c_lin=1e-9)
        out.append(GroupMember(c, y, steps=np.arange(c.size) * 100))
    return out


OPTS = FitOptions(fit_until=3 * C_MID, target_compute=END)


def _width(ci: tuple[float, float]) -> float:
    return ci[1] - ci[0]


def test_three_agreeing_seeds_pin_the_ceiling_down_better_than_one() -> None:
    ratios, covered = [], 0
    for seed in range(4):
        g = fit_group(_seeds(3, seed), OPTS)
        assert g.pooled.ci is not None and len(g.members) == 3
        single = np.median([_width(m.ci["A"]) for m in g.members if m.ci])
        ratios.append(_width(g.pooled.ci["A"]) / single)
        covered += g.pooled.ci["A"][0] <= A <= g.pooled.ci["A"][1]
        assert g.seed_spread["n"] == 3
        assert all(info["included"] and not info["off_curve"] for info in g.member_info)
    # 1/sqrt(3) = 0.58 for a Gaussian estimate; the seed spread's prior costs a little.
    assert np.median(ratios) < 0.8, ratios
    assert covered >= 3


def test_seeds_of_too_few_evaluations_claim_no_recipe_ceiling() -> None:
    """Three quiet seeds of 9 evaluations each to 6 x C_mid pin the pooled A down, but 9
    computes cannot tell the sigmoid from other saturating curves, however many seeds share
    them: withheld, as a run's would be; with 12 evaluations each, claimed."""
    from scalewatch.server.fitting.model import curve

    rng = np.random.default_rng(5)
    c = C_MID * 6.0 * np.arange(1, 13) / 9

    def seeds(n: int) -> list[GroupMember]:
        return [GroupMember(c[:n], curve(c[:n], A, B, C_MID, 0.0) + rng.normal(0, 0.004, n))
                for _ in range(3)]

    opts = FitOptions(r0=0.0, target_compute=END)
    short = fit_group(seeds(9), opts).pooled
    assert short.status == "unidentified" and short.A is None
    assert _width(short.ci["A"]) <= 0.1
    assert "holds 9 evaluations" in short.message and "claimed from 12" in short.message
    assert fit_group(seeds(12), opts).pooled.status == "ok"


def test_a_single_member_group_matches_its_run() -> None:
    members = _seeds(1, 7)
    g = fit_group(members, OPTS)
    own = fit_curve(members[0].compute, members[0].values, OPTS)
    assert g.pooled.status == own.status
    assert g.pooled.ci is not None and own.ci is not None
    # Same data, same shape posterior: A agrees within a fraction of its interval.
    assert abs(g.pooled.a_fit - own.a_fit) < 0.25 * _width(own.ci["A"])
    assert g.seed_spread["sd"] is None and g.seed_spread["n"] == 1


def test_a_seed_with_a_lower_ceiling_is_off_the_recipes_curve() -> None:
    members = _seeds(3, 3, sigma=0.008)
    low = _seeds(1, 99, a=A - 0.08, sigma=0.008)[0]
    g = fit_group([*members, low], FitOptions(fit_until=5 * C_MID, target_compute=END))
    info = g.member_info[3]
    assert info["off_curve"] and info["offset"] < -0.03, info
    assert "off the recipe" in info["reason"]
    assert not any(i["off_curve"] for i in g.member_info[:3])
    # The spread it reveals is reported (and reaches the prediction of a seed's evaluation).
    assert g.seed_spread["ci"][1] > 0.02


def test_a_broken_seed_is_reported_and_left_out_of_the_pool() -> None:
    members = _seeds(3, 11)
    c = np.asarray(members[2].compute)
    y = np.array(members[2].values, dtype=float)
    start = int(np.searchsorted(c, END / 2))
    y[start:] -= 0.10 * np.clip((np.arange(y.size - start)) / 20, 0.0, 1.0)
    n = start + 30
    broken = GroupMember(c[:n], y[:n], steps=np.arange(n) * 100)
    g = fit_group([members[0], members[1], broken], FitOptions(target_compute=END))
    info = g.member_info[2]
    assert g.members[2].break_ is not None
    assert not info["included"] and info["off_curve"] and "broke at step" in info["reason"]
    assert g.seed_spread["n"] == 2
    assert g.pooled.ci is not None and g.pooled.ci["A"][0] <= A + 0.02


def test_no_member_with_a_curve_gives_insufficient_data() -> None:
    tiny = GroupMember([0, 1, 2], [0.3, 0.31, 0.32])
    g = fit_group([tiny, tiny], OPTS)
    assert g.pooled.status == "insufficient_data"
    assert "no seed" in g.pooled.message
    assert all(not i["included"] for i in g.member_info)


def test_the_result_round_trips_through_json_and_feeds_predict_and_compare() -> None:
    members = _seeds(3, 5)
    g = fit_group(members, OPTS)
    d = json.loads(json.dumps(g.to_dict(internal=True)))
    assert d["seed_spread"]["n"] == 3 and len(d["members"]) == 3
    assert {"included", "offset", "offset_ci", "off_curve", "reason"} <= set(d["members"][0])
    back = GroupFitResult.from_dict(d)
    grid = np.geomspace(1000, END, 5)
    assert np.allclose(predict(back.pooled, grid), predict(g.pooled, grid), atol=1e-6)
    lo, hi = predict_band(back.pooled, grid)
    assert np.all(lo <= predict(back.pooled, grid) + 1e-9)
    assert back.member_info == g.member_info
    # A recipe compares like a run (the decision rule refits the seeds' points together).
    lower = _seeds(3, 6, a=A - 0.06)
    other = fit_group(lower, OPTS)

    def joined(ms: list[GroupMember]) -> tuple[np.ndarray, np.ndarray]:
        return (np.concatenate([np.asarray(m.compute) for m in ms]),
                np.concatenate([np.asarray(m.values) for m in ms]))

    allc, ally = joined(members)
    oc, oy = joined(lower)
    out = compare_fits({"g1": (allc, ally, g.pooled), "g2": (oc, oy, other.pooled)},
                       budget=END, options=OPTS)
    assert out["pairs"][0]["decision"]["higher_asymptote"] in ("g1", None)


@pytest.mark.parametrize("k", [2, 5])
def test_member_fits_supplied_by_the_caller_are_used_as_given(k: int) -> None:
    members = _seeds(k, 21)
    fits = [fit_curve(m.compute, m.values, OPTS, steps=m.steps) for m in members]
    supplied = [GroupMember(m.compute, m.values, fit=f) for m, f in zip(members, fits, strict=True)]
    a = fit_group(supplied, OPTS)
    b = fit_group(members, OPTS)
    assert a.members == tuple(fits)
    assert a.to_dict() == b.to_dict()  # the same fits, so the same pooled posterior
