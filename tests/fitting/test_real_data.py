"""Fits on real GRPO curves vendored from befocuss/Deep-GRPO (Apache-2.0, see the README there).

The CSVs live once, in server/demo/data/ (the demo ships them in the package)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from scalewatch.server.fitting import FitOptions, compare_fits, fit_curve

DATA = Path(__file__).resolve().parents[2] / "server" / "demo" / "data"
SAMPLES_PER_STEP = 64 * 8  # 64 prompts x 8 rollouts (verl config at the vendored commit)


def load(file: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    with open(DATA / file, newline="") as f:
        rows = list(csv.reader(f))
    out = {}
    for i, name in enumerate(rows[0]):
        if name.endswith("mean@1"):
            pts = [(float(r[0]), float(r[i])) for r in rows[1:] if r[i] != ""]
            step, val = np.array(pts).T
            out[name.split(" - ")[0]] = (step * SAMPLES_PER_STEP, val)
    return out


def test_full_curves_fit_and_compare() -> None:
    runs = load("training_dynamics__test_reward.csv")
    assert len(runs) == 2
    series = {}
    for name, (c, y) in runs.items():
        res = fit_curve(c, y)
        assert res.r0_source == "first_point"
        assert res.status == "ok", res.message
        assert 0.62 < res.A < 0.70
        # the asymptote is not below what the run has already reached (smoothed)
        assert res.ci["A"][1] >= np.convolve(y, np.ones(20) / 20, "valid").max() - 0.01
        series[name] = (c, y, res)
    out = compare_fits(series, budget=float(max(c[-1] for c, _ in runs.values())))
    json.dumps(out, allow_nan=False)
    pair = out["pairs"][0]
    crpo = next(n for n in runs if "CRPO" in n)
    # Deep-GRPO's claim: its method ends higher than the GRPO baseline.
    assert pair["winner_at_budget"]["run"] == crpo
    assert pair["decision"]["rule"] in ("different_asymptote", "same_asymptote")
    if pair["decision"]["rule"] == "different_asymptote":
        assert pair["decision"]["higher_asymptote"] == crpo


def test_backtest_half_is_not_confidently_wrong() -> None:
    for file in ("training_dynamics__test_reward.csv",
                 "tree_methods_training_instability__test_reward.csv"):
        for name, (c, y) in load(file).items():
            res = fit_curve(c, y, FitOptions(fit_until=c[-1] / 2))
            truth = y[-max(3, len(y) // 20):].mean()
            assert res.status in ("ok", "unidentified", "insufficient_data"), name
            if res.status == "ok":
                lo, hi = res.predicted_interval
                assert lo - 0.05 <= truth <= hi + 0.05, name
                assert abs(res.predicted_at_target - truth) < 0.05, name
