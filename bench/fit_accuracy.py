"""Backtest of the fitting methods: fit the first half of each run's compute, predict its end.

    .venv/bin/python bench/fit_accuracy.py [--reps 3] [--no-real] [--no-paper]

Two sets:

* **synthetic**: runs generated from the paper's Table 1 fits (``scalewatch.server.fitting.synth``):
  an evaluation every budget/n_evals GPU-h (n_evals 60-160, i.e. every ~100 steps), AR(1)
  evaluation noise (sigma 0.007-0.013, rho 0.3-0.8), an early linear regime up to 1.5k GPU-h,
  budgets 4k-64k GPU-h (the 4k/8k ones are often cut before their knee).  Protocol:
  fit_until = budget / 2, warmup = 1.5k GPU-h (as in the paper).
* **real**: ``/work/shared/data/real_curves/all_curves_long.csv`` (read in place, never copied),
  curves with >= 30 points, ``duplicate_of`` rows skipped; compute = gpu_hours (minus the
  start-up time at step 0), else cum_samples, else step.  For the paper method the
  C_mid grid [100, 40000] (GPU-h in the paper) is rescaled so that 8000 maps to the fit window's
  end, as in the paper's 8k-of-16k protocol.

What is compared with what (``TRUTHS`` below; printed with each table):

* |error| columns: the point prediction at the target vs. the *reference value* -- synthetic:
  the noiseless curve at the budget; real: the mean of the last k = max(3, n/20) evaluations
  (it carries evaluation noise of its own).
* ``cover95``: the engine's 95% *prediction* interval for the quantity the reference is --
  synthetic: ``predicted_interval`` (one evaluation at the target) vs. the run's actual final
  evaluation (noisy); real: ``predict_interval(result, c_k, n_evals=k)`` (the mean of k
  evaluations at the mean compute c_k of the last k points) vs. the mean of the last k
  evaluations.  A curve band would be the wrong yardstick for a noisy reference, and a
  one-evaluation interval too wide for a k-mean.
* Secondary coverages, printed under the table for the default method: the same interval
  without the engine's misspecification allowance; the *curve* band
  (``internal.curve_interval``) vs. the noiseless curve (synthetic) -- and, for real runs, the
  curve band vs. the last-k mean (what this bench reported before the prediction intervals;
  not a like-for-like comparison) and ``predicted_interval`` vs. the single final evaluation.

For the synthetic set the table is repeated for the runs whose fit window reaches twice the
true C_mid (past the knee: the asymptote is knowable) and for those cut earlier.

Columns: median and p90 |prediction - reference| (over every run with a prediction, and over
the runs whose status is ``ok``), coverage of the 95% interval (all, ok), and *confidently
wrong*: status ``ok`` and the truth more than 0.05 outside the interval (the baselines report no
interval, so for them: |error| > 0.05).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalewatch.server.fitting import FitOptions, fit_curve, predict_band, predict_interval  # noqa: E402
from scalewatch.server.fitting.fit import prepare  # noqa: E402
from scalewatch.server.fitting.paper import CMID_GRID, fit_baseline  # noqa: E402
from scalewatch.server.fitting.synth import TABLE1, make_run  # noqa: E402

REAL = Path("/work/shared/data/real_curves")
BUDGETS = (4000.0, 8000.0, 16000.0, 32000.0, 64000.0)


def synthetic_runs(reps: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    runs = []
    for rep in range(reps):
        for name, cm, b, a in TABLE1:
            for budget in BUDGETS:
                rho = rng.uniform(0.3, 0.8)
                c, y, truth = make_run(
                    a, b, cm, budget, rng, r0=rng.uniform(0.25, 0.40),
                    n_evals=int(rng.integers(60, 161)), sigma=rng.uniform(0.007, 0.013),
                    rho=rho)
                half = budget / 2
                checks = {"main": (float(y[-1]), 1, budget),
                          "curve band vs noiseless curve": (float(truth[-1]), 0, budget),
                          "cover95 w/o misspec. allowance": (float(y[-1]), 1, budget, False)}
                runs.append(dict(name=f"{name}/{int(budget)}/{rep}", c=c, y=y,
                                 truth=float(truth[-1]), checks=checks, fit_until=half,
                                 warmup=1500.0, target=budget, a_true=a,
                                 cmid_grid=None, rho=rho, past_knee=half >= 2 * cm))
    return runs


def real_runs() -> list[dict]:
    if not (REAL / "all_curves_long.csv").exists():
        return []
    dup = set()
    with open(REAL / "runs.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["duplicate_of"]:
                dup.add((r["source"], r["run_id"]))
    pts: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    with open(REAL / "all_curves_long.csv", newline="") as f:
        for r in csv.DictReader(f):
            if (r["source"], r["run_id"]) not in dup:
                pts[(r["source"], r["run_id"], r["metric"])].append(r)
    runs = []
    for (src, run, metric), rows in sorted(pts.items()):
        if len(rows) < 30:
            continue
        rows.sort(key=lambda r: float(r["step"]))
        for col in ("gpu_hours", "cum_samples", "step"):
            if all(r[col] != "" for r in rows):
                break
        c = np.array([float(r[col]) for r in rows])
        if col == "gpu_hours":
            c = c - c[0]  # W&B process time includes start-up before the first update
        y = np.array([float(r["value"]) for r in rows])
        k = max(3, len(y) // 20)
        half = float(c[-1]) / 2
        mean_k = float(y[-k:].mean())
        checks = {"main": (mean_k, k, float(c[-k:].mean())),
                  "cover95 w/o misspec. allowance": (mean_k, k, float(c[-k:].mean()), False),
                  "curve band vs last-k mean (old)": (mean_k, 0, float(c[-1])),
                  "predicted_interval vs final eval": (float(y[-1]), 1, float(c[-1]))}
        runs.append(dict(name=f"{src}/{run[:40]}", c=c, y=y, truth=mean_k, checks=checks,
                         fit_until=half, warmup=0.0, target=float(c[-1]), a_true=None,
                         cmid_grid=CMID_GRID * half / 8000.0, unit=col,
                         project=(src, metric)))
    return runs


def run_method(run: dict, method: str) -> dict:
    opts = FitOptions(warmup=run["warmup"], fit_until=run["fit_until"],
                      target_compute=run["target"], method=method)
    t0 = time.perf_counter()
    if method == "paper":
        prep = prepare(run["c"], run["y"], opts)
        res = fit_baseline(prep, opts, cmid_grid=run["cmid_grid"], exact=False)
    else:
        res = fit_curve(run["c"], run["y"], opts)
    dt = time.perf_counter() - t0
    pred = res.predicted_at_target
    out = dict(status=res.status, pred=pred, ms=dt * 1000, a=res.A, ci_a=None, other={})
    if res.ci:
        out["ci_a"] = res.ci.get("A")
    out["err"] = None if pred is None else pred - run["truth"]
    for key, (truth, n_evals, at, *allow) in run["checks"].items():
        iv = interval(res, n_evals, at, *allow)
        miss = None if iv is None else max(iv[0] - truth, truth - iv[1], 0.0)
        if key != "main":
            out["other"][key] = None if miss is None else miss == 0.0
            continue
        out["iv"], out["truth_iv"] = iv, truth
        if miss is not None:
            out["covered"] = miss == 0.0
            out["conf_wrong"] = res.status == "ok" and miss > 0.05
        else:
            out["covered"] = None
            # no interval (baselines): judged on the point error vs the reference value
            out["conf_wrong"] = (res.status == "ok" and pred is not None
                                 and abs(pred - run["truth"]) > 0.05)
    return out


def interval(res, n_evals: int, at: float, misspec: bool = True) -> tuple[float, float] | None:
    """The 95% interval matching a reference: 0 = the curve band, k = the mean of k evaluations.

    At the target these are the result's own ``curve_interval`` / ``predicted_interval``.
    ``misspec=False``: without the engine's misspecification allowance (for comparison).
    """
    if res.predicted_interval is None:
        return None
    at_target = at == res.target_compute
    if n_evals == 0:
        iv = res.curve_interval if at_target else tuple(v[0] for v in predict_band(res, [at]))
    elif n_evals == 1 and at_target and misspec:
        iv = res.predicted_interval
    else:
        iv = tuple(v[0] for v in predict_interval(res, [at], n_evals=n_evals,
                                                  misspecification=misspec))
    return None if iv is None or not np.all(np.isfinite(iv)) else (float(iv[0]), float(iv[1]))


def _q(v: list[float], q: float) -> str:
    return f"{np.quantile(v, q):.4f}" if v else "  -   "


def summarize(label: str, runs: list[dict], outs: list[dict]) -> str:
    errs = [abs(o["err"]) for o in outs if o["err"] is not None]
    ok = [abs(o["err"]) for o in outs if o["err"] is not None and o["status"] == "ok"]
    cov = [o["covered"] for o in outs if o["covered"] is not None]
    covs = f"{100 * np.mean(cov):5.1f}%" if cov else "   -  "
    cov_ok = [o["covered"] for o in outs if o["covered"] is not None and o["status"] == "ok"]
    covs += f" {100 * np.mean(cov_ok):5.1f}%" if cov_ok else "    -  "
    n_ok = sum(o["status"] == "ok" for o in outs)
    n_un = sum(o["status"] == "unidentified" for o in outs)
    n_in = sum(o["status"] == "insufficient_data" for o in outs)
    wrong = sum(bool(o["conf_wrong"]) for o in outs)
    a_cov = [o["ci_a"][0] <= r["a_true"] <= o["ci_a"][1] for r, o in zip(runs, outs, strict=True)
             if o["status"] == "ok" and o["ci_a"] and r["a_true"] is not None]
    a_covs = f"{100 * np.mean(a_cov):5.1f}%" if a_cov else "   -  "
    ms = np.median([o["ms"] for o in outs])
    return (f"{label:10s} {len(errs):4d} {_q(errs, .5)} {_q(errs, .9)}  {len(ok):4d} "
            f"{_q(ok, .5)} {_q(ok, .9)}  {covs}  {a_covs}  {wrong:5d}   "
            f"{n_ok:3d}/{n_un:3d}/{n_in:3d}  {ms:7.1f}")


def other_coverage(outs: list[dict]) -> list[str]:
    keys = sorted({k for o in outs for k in o["other"]})
    lines = []
    for k in keys:
        cov = [o["other"][k] for o in outs if o["other"].get(k) is not None]
        cov_ok = [o["other"][k] for o in outs
                  if o["other"].get(k) is not None and o["status"] == "ok"]
        if cov:
            ok = f"{100 * np.mean(cov_ok):5.1f}%" if cov_ok else "  -  "
            lines.append(f"    {k:34s} cover95 all {100 * np.mean(cov):5.1f}%  ok {ok}"
                         f"  (n {len(cov)}/{len(cov_ok)})")
    return lines


TRUTHS = {
    "synthetic": ("reference for |e|: noiseless curve at the budget; cover95: predicted_interval "
                  "(one evaluation) vs the run's final (noisy) evaluation"),
    "real": ("reference for |e|: mean of the last k=max(3,n/20) evaluations; cover95: "
             "prediction interval for the mean of k evaluations vs that mean"),
}

HEADER = ("method      n   med|e|  p90|e|   n_ok med_ok  p90_ok  cover95 (ok)   A-cover  "
          "conf_wrong  ok/unid/insuf  ms/fit")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-paper", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    methods = ["default", "curve_fit"] + ([] if args.no_paper else ["paper"])
    sets = [("synthetic (Table 1, AR(1) noise)", synthetic_runs(args.reps), "synthetic")]
    if not args.no_real:
        real = real_runs()
        if real:
            sets.append((f"real curves ({len(real)} runs, {REAL})", real, "real"))
    for title, runs, kind in sets:
        print(f"\n== {title}: {len(runs)} runs ==")
        print(f"   {TRUTHS[kind]}")
        print(HEADER)
        subsets: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
        for method in methods:
            outs = [run_method(r, method) for r in runs]
            print(summarize(method, runs, outs), flush=True)
            if method == "default":
                print("\n".join(other_coverage(outs)), flush=True)
            for r, o in zip(runs, outs, strict=True):
                if "past_knee" in r:
                    subsets[(method, r["past_knee"])].append((r, o))
            if args.verbose and method == "default":
                for r, o in zip(runs, outs, strict=True):
                    bad = o["covered"] is False
                    print(f"   {'!' if bad else ' '} {r['name']:45s} {o['status']:12s} "
                          f"err={o['err'] if o['err'] is None else round(o['err'], 4)} "
                          f"iv={o['iv'] and tuple(round(v, 3) for v in o['iv'])} "
                          f"truth={o['truth_iv']:.3f}")
        if subsets:
            for knee in (True, False):
                print(f"-- subset: fit window {'reaches' if knee else 'ends before'} 2 x the "
                      "true C_mid --")
                for method in methods:
                    pairs = subsets[(method, knee)]
                    print(summarize(method, [p[0] for p in pairs], [p[1] for p in pairs]))
                    if method == "default":
                        print("\n".join(other_coverage([p[1] for p in pairs])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
