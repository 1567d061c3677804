"""The group family of the calibration harness: a recipe run with several seeds.

    .venv/bin/python bench/groups.py [--reps 2] [--seed 1] [--families ...]

Each recipe is one of the paper's Table 1 shapes run to 8 x C_mid with 5 seeds; a seed's
ceiling is the recipe's plus a seed effect (sd ``spread``: 0, or 0.01, about the paper's
+-0.02 between seeds), its R0 drawn per seed.  Groups of 2, 3 and 5 seeds (the first k seeds)
are fitted with :func:`fit_group` on windows that end at 1.5, 2, 3 and 5 x C_mid, beside
each seed's own fit.  The truth a group's A interval must cover is the recipe's ceiling (the
mean of the seed population, not of the k seeds drawn).

Per group size and window it prints: the share of groups whose pooled A is identified
(``ok``) and of single seeds that are; the median width of the pooled A interval over the
median width of its seeds' own intervals (1/sqrt(k) is what pooling k agreeing seeds would
give a Gaussian estimate); coverage of the recipe's A by the pooled 95% interval (all groups,
and those ``ok``); confidently wrong (``ok`` and the truth more than 0.05 outside).  Then the
earliest window at which A is identified, pooled vs single seeds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalewatch.server.fitting import FitOptions, fit_curve  # noqa: E402
from scalewatch.server.fitting.group import GroupMember, fit_group  # noqa: E402
from scalewatch.server.fitting.synth import TABLE1, make_prompt_run, make_run  # noqa: E402

WINDOWS = (1.5, 2.0, 3.0, 5.0)
SIZES = (2, 3, 5)
END = 8.0
FAMILIES: dict[str, dict] = {
    "ar1 rho=0.5": dict(kind="ar1", rho=0.5, spread=0.0),
    "ar1 rho=0.5, spread 0.01": dict(kind="ar1", rho=0.5, spread=0.01),
    "ar1 rho=0.8, spread 0.01": dict(kind="ar1", rho=0.8, spread=0.01),
    "prompts 500, spread 0.01": dict(kind="prompts", n_prompts=500, spread=0.01),
}


def make_seeds(fam: dict, shape: tuple, rng: np.random.Generator, k: int = 5) -> list[dict]:
    _, cm, b, a = shape
    out = []
    for _ in range(k):
        a_i = float(np.clip(a + rng.normal(0.0, fam["spread"]), 0.05, 0.95))
        r0 = float(rng.uniform(0.25, 0.40))
        if fam["kind"] == "prompts":
            c, y, _, _ = make_prompt_run(a_i, b, cm, END * cm, rng, r0=r0, n_evals=160,
                                         n_prompts=fam["n_prompts"])
        else:
            c, y, _ = make_run(a_i, b, cm, END * cm, rng, r0=r0, n_evals=160, sigma=0.01,
                               rho=fam["rho"], c_lin=1e-9)
        out.append(dict(c=c, y=y))
    return out


def _width(ci: dict | None) -> float | None:
    return None if not ci or ci.get("A") is None else float(ci["A"][1] - ci["A"][0])


def run(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    fams = {k: v for k, v in FAMILIES.items() if not args.families or k in args.families}
    # (family, k, window) -> list of dicts
    rows: dict[tuple[str, int, float], list[dict]] = defaultdict(list)
    earliest: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    t_pool: list[float] = []
    for fname, fam in fams.items():
        for shape in TABLE1:
            cm, a_true = shape[1], shape[3]
            for _ in range(args.reps):
                seeds = make_seeds(fam, shape, rng)
                first_ok = {k: np.inf for k in SIZES}
                first_single = [np.inf] * len(seeds)
                for w in WINDOWS:
                    opts = FitOptions(fit_until=w * cm, target_compute=END * cm)
                    singles = [fit_curve(s["c"], s["y"], opts) for s in seeds]
                    for i, f in enumerate(singles):
                        if f.status == "ok":
                            first_single[i] = min(first_single[i], w)
                    for k in SIZES:
                        members = [GroupMember(s["c"], s["y"], fit=f)
                                   for s, f in zip(seeds[:k], singles[:k], strict=True)]
                        t0 = time.perf_counter()
                        g = fit_group(members, opts)
                        t_pool.append(time.perf_counter() - t0)
                        p = g.pooled
                        ci = p.ci["A"] if p.ci else None
                        widths = [v for f in singles[:k] if (v := _width(f.ci)) is not None]
                        if p.status == "ok":
                            first_ok[k] = min(first_ok[k], w)
                        rows[(fname, k, w)].append(dict(
                            ok=p.status == "ok", ci=ci, a=a_true,
                            single_ok=[f.status == "ok" for f in singles[:k]],
                            width=_width(p.ci),
                            single_width=float(np.median(widths)) if widths else None))
                for k in SIZES:
                    earliest[(fname, k)].append(
                        (first_ok[k], float(np.median(first_single[:k]))))
    print(f"pooled fit time (member fits supplied): median {1000 * np.median(t_pool):.0f} ms, "
          f"p90 {1000 * np.quantile(t_pool, 0.9):.0f} ms over {len(t_pool)} fits\n")
    for fname in fams:
        print(f"## {fname} ({args.reps} reps x {len(TABLE1)} shapes)")
        print("k  window  ok pooled  ok single  width ratio  (1/sqrt k)  cover all  cover ok  "
              "conf_wrong")
        for k in SIZES:
            for w in WINDOWS:
                r = rows[(fname, k, w)]
                ok = np.mean([x["ok"] for x in r])
                single = np.mean([v for x in r for v in x["single_ok"]])
                ratios = [x["width"] / x["single_width"] for x in r
                          if x["width"] is not None and x["single_width"]]
                cov = [x["ci"][0] <= x["a"] <= x["ci"][1] for x in r if x["ci"] is not None]
                cov_ok = [x["ci"][0] <= x["a"] <= x["ci"][1] for x in r
                          if x["ok"] and x["ci"] is not None]
                wrong = sum(1 for x in r if x["ok"] and x["ci"] is not None and (
                    x["a"] < x["ci"][0] - 0.05 or x["a"] > x["ci"][1] + 0.05))
                print(f"{k}  {w:>4}x   {100 * ok:5.0f}%    {100 * single:5.0f}%     "
                      f"{np.median(ratios) if ratios else float('nan'):6.2f}      "
                      f"({1 / np.sqrt(k):.2f})     "
                      f"{100 * np.mean(cov) if cov else float('nan'):5.0f}%    "
                      f"{100 * np.mean(cov_ok) if cov_ok else float('nan'):5.0f}%     {wrong}")
        print("earliest window with A identified (median over groups; 'never' counts as inf):")
        for k in SIZES:
            e = np.array(earliest[(fname, k)])
            print(f"  k={k}: pooled {np.median(e[:, 0])}x, single seeds {np.median(e[:, 1])}x")
        print()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--families", nargs="*", default=None)
    args = ap.parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
