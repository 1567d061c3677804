"""Why A is withheld (``server/fitting/withheld.py``): is it honest, and what does it cost?

    .venv/bin/python bench/withheld.py [--runs 120] [--seed 7]

No assertions; prints four tables:

1. **misspecified**: how often the misfit test fires (and withholds A) on sampled sigmoid runs
   (parameters drawn over wide ranges, AR(1) noise: every firing is a false alarm), on runs
   of a fixed prompt set (a mixture of sigmoids, nearly one), and on families no sigmoid
   describes (power-law error decay, exponential saturation, a slow linear drift after
   saturation, a plateau before the rise).
2. **real curves**: how many of the public real curves it fires on (fit on the first half, and
   on the whole run).
3. **compute to identify**: for sampled sigmoid runs withheld at their window, the predicted
   factor f beside the actual one (the same run, its noise continued at its own pace, fitted
   at each multiple until A is identified): their median ratio, and the share of runs
   identified by f, by 1.5 f and (too early a promise would show here) by f / 1.5.
4. **cost**: fit time with and without the withheld work (misfit test + simulation), and
   the two parts alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scalewatch.server.fitting import FitOptions, fit_curve  # noqa: E402
from scalewatch.server.fitting import fit as F  # noqa: E402
from scalewatch.server.fitting import withheld as W  # noqa: E402
from scalewatch.server.fitting.model import curve  # noqa: E402
from scalewatch.server.fitting.synth import ar1, make_prompt_run  # noqa: E402


def sampled(rng: np.random.Generator, kind: str, window: float) -> tuple[np.ndarray, ...]:
    """(compute, observed, noiseless) of one sampled run ending at ``window`` x its C_mid
    (for the misspecified families: at ``window`` x the compute of half its gain)."""
    a = rng.uniform(0.3, 0.95)
    r0 = rng.choice([0.0, rng.uniform(0.02, 0.25)])
    cm = 10 ** rng.uniform(2.0, 4.0)
    b = np.exp(rng.uniform(np.log(0.5), np.log(6.0)))
    n = int(rng.integers(30, 300))
    c = np.sort(rng.uniform(0.02, 1.0, n)) if rng.random() < 0.5 else np.linspace(0.02, 1, n)
    c = c * window * cm
    sd, rho = rng.uniform(0.003, 0.04), rng.uniform(0.0, 0.95)
    gain = a - r0
    if kind == "sigmoid":
        truth = curve(c, a, b, cm, r0)
    elif kind == "power_law":  # error decaying as a power law in compute
        truth = a - gain * (1.0 + c / cm) ** -b
    elif kind == "exp_saturation":
        truth = a - gain * np.exp(-np.log(2.0) * c / cm)
    elif kind == "linear_drift":  # a sigmoid, then a slow linear gain after saturation
        truth = curve(c, a, b, cm, r0) + 0.02 * np.maximum(c / cm - 2.0, 0.0)
    else:  # plateau: flat at R0 until C_mid / 3, then a sigmoid in log-compute
        x = np.log(np.maximum(c / (cm / 3.0), 1.0))
        truth = r0 + gain * (1.0 - np.exp(-(x / np.log(3.0)) ** 2 * np.log(2.0)))
    y = np.clip(truth + ar1(c.size, sd, rho, rng), 0.0, 1.0)
    return c, y, truth


def misspecified_table(args: argparse.Namespace) -> None:
    print("== 1. the misfit test: share of fits it withholds A from (misspecified) ==")
    print(f"  {'family':<16}{'window':>8}{'runs':>6}{'misfit':>8}{'ok w/o it':>11}")
    rng = np.random.default_rng(args.seed)
    for kind in ("sigmoid", "prompt_set", "power_law", "exp_saturation", "linear_drift",
                 "plateau"):
        for window in (2.0, 5.0):
            hits, freed = 0, 0
            for _ in range(args.runs if kind == "sigmoid" else args.runs // 3):
                if kind == "prompt_set":
                    c, y, _, _ = make_prompt_run(rng.uniform(0.4, 0.9), rng.uniform(1, 3), 2500,
                                                 window * 2500, rng, r0=0.1,
                                                 n_evals=int(rng.integers(30, 300)),
                                                 n_prompts=int(rng.integers(100, 5000)))
                else:
                    c, y, _ = sampled(rng, kind, window)
                res = fit_curve(c, y, FitOptions())
                codes = {r["code"] for r in (res.withheld or {}).get("reasons", [])}
                hits += "misspecified" in codes
                freed += codes == {"misspecified"}
            n = args.runs if kind == "sigmoid" else args.runs // 3
            print(f"  {kind:<16}{window:>7g}x{n:>6}{hits / n:>8.1%}{freed / n:>11.1%}",
                  flush=True)


def real_table() -> None:
    from fit_accuracy import real_runs  # noqa: PLC0415 (bench-local module)

    runs = real_runs()
    if not runs:
        print("\n(real curves not found; skipped)")
        return
    print(f"\n== 2. real curves ({len(runs)} runs): fits the misfit test withholds A from ==")
    for label, until in (("first half", True), ("whole run", False)):
        hits, names = 0, []
        for run in runs:
            res = fit_curve(run["c"], run["y"],
                            FitOptions(fit_until=run["fit_until"] if until else None))
            codes = {r["code"] for r in (res.withheld or {}).get("reasons", [])}
            if "misspecified" in codes:
                hits += 1
                names.append(run["name"])
        print(f"  {label:<12} {hits} of {len(runs)}" + (f": {', '.join(names)}" if names else ""))


def identify_table(args: argparse.Namespace) -> None:
    print("\n== 3. compute_to_identify: sampled sigmoid runs withheld at their window, each "
          "continued at its own pace with its own noise ==")
    print("  f: the predicted factor; actual: the first of FACTORS at which the run's fit is ok "
          "(bisection)")
    print(f"  {'window':>7}{'withheld':>9}{'predicted':>10}{'f/actual':>9}"
          f"{'ok by f':>9}{'ok by 1.5f':>11}{'ok by f/1.5':>12}{'never (8x)':>11}")
    rng = np.random.default_rng(args.seed + 1)
    factors = list(W.FACTORS)
    for window in (1.0, 1.5, 2.0, 3.0):
        withheld = 0
        pairs: list[tuple[float, float | None]] = []
        for _ in range(args.runs // 2):
            a, r0 = rng.uniform(0.3, 0.95), rng.choice([0.0, rng.uniform(0.02, 0.25)])
            cm, b = 10 ** rng.uniform(2.0, 4.0), np.exp(rng.uniform(np.log(0.5), np.log(6.0)))
            n, sd, rho = int(rng.integers(30, 300)), rng.uniform(0.003, 0.04), rng.uniform(0, .95)
            end = window * cm
            inside = np.linspace(0.02, 1.0, n) * end
            pace = inside[1] - inside[0]
            c = np.concatenate([inside, end + pace * np.arange(1, int(7 * end / pace) + 2)])
            y = np.clip(curve(c, a, b, cm, r0) + ar1(c.size, sd, rho, rng), 0.0, 1.0)
            res = fit_curve(inside, y[:n], FitOptions())
            codes = {r["code"] for r in (res.withheld or {}).get("reasons", [])}
            if res.status != "unidentified" or codes & {"recent_break", "misspecified"}:
                continue
            withheld += 1
            f = (res.withheld or {}).get("compute_to_identify_factor")
            if f is None:
                continue

            def ok(i: int, c: np.ndarray = c, y: np.ndarray = y, end: float = end) -> bool:
                keep = c <= factors[i] * end * (1 + 1e-9)
                return fit_curve(c[keep], y[keep], FitOptions()).status == "ok"

            actual = None
            if ok(len(factors) - 1):
                lo, hi = -1, len(factors) - 1
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if ok(mid) else (mid, hi)
                actual = factors[hi]
            pairs.append((f, actual))
        got = [(f, t) for f, t in pairs if t is not None]
        ratio = f"{np.median([f / t for f, t in got]):.2f}" if got else "-"

        def share(k: float, pairs: list = pairs) -> str:
            return f"{np.mean([t is not None and t <= k * f for f, t in pairs]):.0%}" \
                if pairs else "-"

        never = f"{np.mean([t is None for _, t in pairs]):.0%}" if pairs else "-"
        print(f"  {window:>6g}x{withheld:>9}{len(pairs):>10}{ratio:>9}{share(1.0):>9}"
              f"{share(1.5):>11}{share(1 / 1.5):>12}{never:>11}", flush=True)


def timeit(fn: Callable[[], object], reps: int) -> float:
    """The fastest of ``reps`` calls, in ms: on a shared, busy machine the minimum is what the
    code costs, the median what the neighbours do."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1000 * float(np.min(ts))


def cost_table(args: argparse.Namespace) -> None:
    print("\n== 4. cost per fit (ms, fastest of --reps): with and without the withheld work ==")
    print(f"  {'run':<34}{'with':>8}{'without':>9}{'ratio':>7}")
    from scalewatch.server.fitting.synth import make_run  # noqa: PLC0415

    real_misfit, real_explain = F.misfit, F.explain

    def no_explain(*a: object, **k: object) -> dict:
        return {}

    for label, window, n in (("withheld (1.5 x C_mid), 120 evals", 1.5, 120),
                             ("withheld (1.5 x C_mid), 1k evals", 1.5, 1000),
                             ("identified (5 x C_mid), 1k evals", 5.0, 1000)):
        c, y, _ = make_run(0.61, 1.92, 2542, window * 2542, np.random.default_rng(0),
                           n_evals=n, c_lin=1e-9)
        with_ = timeit(lambda c=c, y=y: fit_curve(c, y, FitOptions()), args.reps)
        F.misfit, F.explain = (lambda *a, **k: None), no_explain  # type: ignore[assignment]
        try:
            without = timeit(lambda c=c, y=y: fit_curve(c, y, FitOptions()), args.reps)
        finally:
            F.misfit, F.explain = real_misfit, real_explain
        print(f"  {label:<34}{with_:8.1f}{without:9.1f}{with_ / without:7.2f}", flush=True)
        res = fit_curve(c, y, FitOptions())
        if res.status != "unidentified" or not res.ci or res.C_mid is None:
            continue
        prep = F.prepare(c, y, FitOptions())
        th = (float(res.a_fit or 0.0), float(np.log(res.C_mid / prep.c0)), float(res.B or 0.0),
              float(res.R0 or 0.0))
        draws = np.array(res.draws)
        t_mis = timeit(lambda p=prep, th=th: W.misfit(p.x, p.y, th, True), 3 * args.reps)
        t_exp = timeit(lambda p=prep, r=res, d=draws: W.explain(
            p.x, d, True, r.ci["A"], r.ci["C_mid"], r.C_mid, p.c0, (0.0, 1.0), r.rho, F.RULES,
            None, r.message), 3 * args.reps)
        print(f"  {'':<4}alone: misfit {t_mis:.2f} ms, explain (reasons + compute to identify) "
              f"{t_exp:.2f} ms", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=120)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", choices=("misfit", "real", "identify", "cost"))
    args = ap.parse_args(argv)
    if args.only in (None, "misfit"):
        misspecified_table(args)
    if args.only in (None, "real"):
        real_table()
    if args.only in (None, "identify"):
        identify_table(args)
    if args.only in (None, "cost"):
        cost_table(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
