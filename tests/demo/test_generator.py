"""The simulator's pure generation: Table-1 shapes, serially correlated noise, early regime."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalewatch.server.demo.presets import PRESETS, resolve
from scalewatch.server.demo.realruns import load as load_real
from scalewatch.server.demo.simulator import (
    C_LIN,
    EVAL_SIGMA,
    chunk_points,
    generate,
    resume_chunk,
    true_curve,
)
from scalewatch.server.fitting.model import curve

TABLE1 = ("baseline", "gen32k", "bs2048", "gen8", "gen24", "gen32", "scout")


@pytest.mark.parametrize("key", TABLE1)
def test_curves_follow_their_table1_sigmoid_within_noise(key: str) -> None:
    r = PRESETS[key]
    t = generate(r, seed=1)
    late = t.eval_compute >= C_LIN
    sig = curve(t.eval_compute[late], r.a, r.b, r.c_mid, r.r0)
    resid = t.val_pass_rate[late] - sig
    # AR(1) noise with sigma 0.01: the mean residual is small, none is wild
    assert abs(resid.mean()) < 0.01, resid.mean()
    assert 0.005 < resid.std() < 0.02, resid.std()
    assert np.abs(resid).max() < 5 * EVAL_SIGMA
    # evaluations every 100 steps, reaching the target compute, starting at R0
    assert np.all(np.diff(t.eval_steps) == 100)
    assert t.eval_compute[-1] >= r.target > t.eval_compute[-2]
    assert abs(t.val_pass_rate[0] - r.r0) < 3 * EVAL_SIGMA


def test_noise_is_serially_correlated() -> None:
    lag1 = []
    for seed in range(20):
        t = generate(PRESETS["baseline"], seed)
        e = (t.val_pass_rate - t.truth)[1:]
        lag1.append(np.corrcoef(e[:-1], e[1:])[0, 1])
    # rho = 0.6; iid noise would give ~0 (sd ~0.1 per run)
    assert 0.4 < float(np.mean(lag1)) < 0.75, lag1


def test_training_reward_is_per_step_and_noisier() -> None:
    r = PRESETS["baseline"]
    t = generate(r, 0)
    assert t.reward.size == r.n_steps + 1
    noise = t.reward[1:] - true_curve(r, t.compute[1:])
    assert noise.std() > 3 * (t.val_pass_rate - t.truth).std()
    # the training reward is logged every step, the evaluation metrics only every 100 steps
    pts = chunk_points(r, t, 5)
    assert [p[0] for p in pts] == list(range(401, 501))
    assert set(pts[-1][2]) == {"reward", "val_pass_rate", "truncation_rate"}
    assert all(set(p[2]) == {"reward"} for p in pts[:-1])
    assert chunk_points(r, t, 0) == [(0, 0.0, {"val_pass_rate": t.val_pass_rate[0],
                                               "truncation_rate": t.truncation_rate[0]})]


def test_early_regime_is_linear_ish() -> None:
    r = PRESETS["baseline"]
    c = np.linspace(0, C_LIN, 50)
    y = true_curve(r, c)
    slope, icpt = np.polyfit(c, y, 1)
    assert slope > 0
    assert np.abs(y - (slope * c + icpt)).max() < 1e-9  # a straight line from R0
    assert abs(icpt - r.r0) < 1e-9
    # ... which the sigmoid is not (it is convex there): the paper skips this regime
    sig = curve(c, r.a, r.b, r.c_mid, r.r0)
    assert np.abs(sig - y).max() > 0.01


def test_drop_preset_late_points_fall_below_the_pre_drop_curve() -> None:
    r = PRESETS["drop"]
    assert r.drop is not None
    before = generate(dataclasses.replace(r, drop=None), seed=0)
    t = generate(r, seed=0)
    late = t.eval_compute > r.drop.at + 3 * r.drop.width
    early = t.eval_compute < r.drop.at
    assert np.allclose(t.truth[early], before.truth[early])
    gap = curve(t.eval_compute[late], r.a, r.b, r.c_mid, r.r0) - t.val_pass_rate[late]
    assert late.sum() >= 20
    assert np.all(gap > 0.05), gap.min()  # 5 noise sigmas below the pre-drop sigmoid
    # ... and onto the worse sigmoid
    worse = curve(t.eval_compute[late], r.drop.a_after, r.b, r.c_mid, r.r0)
    assert abs(float(np.mean(t.val_pass_rate[late] - worse))) < 0.01


def test_collapse_preset_collapses() -> None:
    r = PRESETS["collapse"]
    t = generate(r, 0)
    assert t.val_pass_rate[-1] < t.val_pass_rate[t.eval_compute <= r.collapse.at].max() - 0.2
    assert t.truncation_rate[-1] > 0.1 > t.truncation_rate[1]


def test_deterministic_in_the_seed_and_resume_position() -> None:
    a, b = generate(PRESETS["scout"], 3), generate(PRESETS["scout"], 3)
    assert np.array_equal(a.val_pass_rate, b.val_pass_rate)
    assert np.array_equal(a.reward, b.reward)
    assert not np.array_equal(a.val_pass_rate, generate(PRESETS["scout"], 4).val_pass_rate)
    assert resume_chunk(None, 100) == 0
    assert resume_chunk(0, 100) == 1
    assert resume_chunk(3700, 100) == 38
    assert resume_chunk(3750, 100) == 38  # the partly stored chunk is logged again


def test_presets_and_real_runs() -> None:
    assert len(resolve("all")) == len(PRESETS) == 9
    with pytest.raises(KeyError):
        resolve("nope")
    for r in PRESETS.values():
        cfg = r.config()
        assert cfg["batch_size"] == r.batch_size
        assert cfg["prompts_per_step"] * r.gens_per_prompt == r.batch_size
        assert f"bs{r.batch_size}" in r.tags()
    real = load_real()
    assert len(real) == 3
    for run in real:
        assert len(run.steps) == len(run.values) > 100
        assert run.compute[0] == 0.0 and run.compute[-1] == run.steps[-1] * 512
