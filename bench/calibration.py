"""Calibration harness for the forecast: is each 95% interval right 95% of the time?

    .venv/bin/python bench/calibration.py [--reps 6] [--paper-reps 1] [--oracle-reps 40]
                                          [--no-real] [--families ...] [--noise-prior]

Synthetic runs are shaped by the paper's Table 1 fits and run to 8 x C_mid.  Each is fitted on
windows that end at 1, 1.5, 2, 3 and 5 x C_mid and forecasts the run's end.  The noise
families deliberately differ from the one the method was designed on:

* ``ar1 rho=R``: AR(1) evaluation noise (sd 0.01) with rho from 0 to 0.95;
* ``prompts N``: a fixed prompt set of N prompts, one Bernoulli draw per prompt per evaluation,
  per-prompt difficulty (a mixture of sigmoids, so the model is only approximately right);
* ``sparse``: 40 evaluations in the whole run instead of 160;
* ``linear start``: the early linear regime of the paper, R0 given, the paper's 1.5k warm-up;
* ``R0 fitted``: no evaluation at compute 0.

Per window position (all families pooled, then per family for the default method) it prints:
identification rate (share ``ok``) and the *oracle* rate (share of runs whose true sampling
sd of A-hat, measured by a Monte Carlo of its own over ``--oracle-reps`` fresh runs of the same
shape and family, would give a 95% interval narrower than the product's threshold);
A-interval coverage and median width among ``ok`` answers; forecast median / p90 |error|
against the noiseless value at the run's end; forecast-interval coverage (``predicted_interval``
vs the run's final noisy evaluation) and median width; confidently wrong (``ok`` and the true
A more than 0.05 outside A's interval).  Beside it, a plain least-squares fit (``curve_fit``)
and the paper's method.  Then the claims the default method would make without its
past-the-knee rule (``fit.too_early``), binned by how far the window's end lies past the fitted
C_mid, with their A coverage: the evidence that rule's 2.5 x rests on.  Last, the forecast
errors of an oracle that knows each run's true shape (B, C_mid) and fits only A and R0: the
floor under any point forecast that must learn the shape from the run.

``--noise-prior`` adds the default method as a project with finished runs gets it: a noise
family stands for a project (one evaluation set, the ten Table-1 recipes), and what each run
learns is learned from the *other* runs of its family, fitted to their end (leave-one-out), as
the server learns it from a project's finished runs.  ``+hindcasts``: the drift allowance from
their hindcasts (on by default once a project has 19 finished runs); ``+rho prior``: that and
the opt-in noise prior; ``+B prior``: those and the opt-in prior on B (``fitting/b_prior.py``).
``--b-prior-from recipes`` learns each run's B prior from the *other recipes* only (its own
recipe's runs left out): a project trying a recipe unlike any it has finished.

Real curves (``/work/shared/data/real_curves``, read in place, never copied) are fitted on
the first half of their compute and forecast their end, as in ``bench/fit_accuracy.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalewatch.server.fitting import FitOptions, fit_curve, predict_interval  # noqa: E402
from scalewatch.server.fitting.b_prior import learn_b_prior, log_b_estimate  # noqa: E402
from scalewatch.server.fitting.fit import (  # noqa: E402
    ID_MAX_WIDTH,
    PAST_KNEE,
    prepare,
    withheld_because,
)
from scalewatch.server.fitting.hindcast import (  # noqa: E402
    HORIZON_FRACTIONS,
    hindcast_of,
    hindcasts_of,
    learn_drift_rate,
    needed_rate,
)
from scalewatch.server.fitting.intervals import DRIFT_RATE  # noqa: E402
from scalewatch.server.fitting.model import curve  # noqa: E402
from scalewatch.server.fitting.noise_prior import learn_rho_prior  # noqa: E402
from scalewatch.server.fitting.paper import fit_baseline  # noqa: E402
from scalewatch.server.fitting.synth import TABLE1, make_prompt_run, make_run  # noqa: E402

WINDOWS = (1.0, 1.5, 2.0, 3.0, 5.0)
END = 8.0  # runs last 8 x C_mid

FAMILIES: dict[str, dict] = {
    "ar1 rho=0": dict(kind="ar1", rho=0.0),
    "ar1 rho=0.5": dict(kind="ar1", rho=0.5),
    "ar1 rho=0.8": dict(kind="ar1", rho=0.8),
    "ar1 rho=0.95": dict(kind="ar1", rho=0.95),
    "prompts 200": dict(kind="prompts", n_prompts=200),
    "prompts 2000": dict(kind="prompts", n_prompts=2000),
    "sparse (40 evals)": dict(kind="ar1", rho=0.5, n_evals=40),
    "linear start, R0 given": dict(kind="ar1", rho=0.6, linear=True),
    "R0 fitted": dict(kind="ar1", rho=0.6, fit_r0=True),
}


def make(fam: dict, shape: tuple, rng: np.random.Generator) -> dict:
    _, cm, b, a = shape
    end = END * cm
    r0 = float(rng.uniform(0.25, 0.40))
    n_evals = fam.get("n_evals", 160)
    if fam["kind"] == "prompts":
        c, y, truth, a_true = make_prompt_run(a, b, cm, end, rng, r0=r0, n_evals=n_evals,
                                              n_prompts=fam["n_prompts"])
    else:
        c_lin = 1500.0 if fam.get("linear") else 0.0
        c, y, truth = make_run(a, b, cm, end, rng, r0=r0, n_evals=n_evals, sigma=0.01,
                               rho=fam["rho"], c_lin=max(c_lin, 1e-9))
        a_true = a
    run = dict(c=c, y=y, truth_end=float(truth[-1]), obs_end=float(y[-1]), a_true=a_true,
               cm=cm, b=b, end=end, r0=None, warmup=0.0)
    if fam.get("linear"):
        run.update(r0=r0, warmup=1500.0)
    if fam.get("fit_r0"):
        run.update(c=c[1:], y=y[1:])
    return run


HINDCASTS = "+hindcasts"  # the default in a project with enough finished runs: their drift
PRIOR = "+rho prior"  # the default method with the noise prior learned leave-one-out
BPRIOR = "+B prior"  # and with the prior on B too
PRIORS = (HINDCASTS, PRIOR, BPRIOR)
DEFAULTS = ("default", "", *PRIORS)  # rows judged on their intervals (the others: point error)
Pair = tuple[float, float]
# (noise prior, drift rate from hindcasts fitted with it, B prior, drift rate from hindcasts
# fitted without a prior: what a project without the opt-in priors learns)
Prior = tuple[Pair | None, float | None, Pair | None, float | None]
NO_PRIOR: Prior = (None, None, None, None)


def options_for(method: str, prior: Prior, **kw: object) -> FitOptions:
    """The fit options of ``method`` (a baseline, the default, or it with project priors)."""
    if method not in PRIORS:
        return FitOptions(method=method, **kw)  # type: ignore[arg-type]
    if method == HINDCASTS:
        return FitOptions(drift_rate=prior[3], **kw)  # type: ignore[arg-type]
    return FitOptions(noise_prior=prior[0], drift_rate=prior[1],
                      b_prior=prior[2] if method == BPRIOR else None, **kw)  # type: ignore[arg-type]


def fit_one(run: dict, window: float, method: str, prior: Prior = NO_PRIOR) -> dict:
    opts = options_for(method, prior, r0=run["r0"], warmup=run["warmup"],
                       fit_until=window * run["cm"], target_compute=run["end"])
    t0 = time.perf_counter()
    if method == "paper":
        res = fit_baseline(prepare(run["c"], run["y"], opts), opts, exact=False)
    else:
        res = fit_curve(run["c"], run["y"], opts)
    ms = 1000 * (time.perf_counter() - t0)
    ci_a = res.ci.get("A") if res.ci else None
    # Past the knee?  The window's end over the fitted C_mid, and whether A would be claimed
    # without the too_early rule: the evidence for that rule (``past_knee_table``).
    ratio = would_claim = None
    if res.fit_range is not None and res.C_mid and ci_a is not None and res.ci:
        ratio = float(res.fit_range[1]) / float(res.C_mid)
        would_claim = withheld_because(tuple(ci_a), res.ci.get("C_mid"), res.fit_range[1],
                                       tuple(res.value_range)) is None
    piv0 = None
    if res.predicted_interval is not None:
        piv0 = tuple(float(v[0]) for v in predict_interval(res, [run["end"]],
                                                           misspecification=False))
    return dict(status=res.status, pred=res.predicted_at_target, a_hat=res.a_fit, ci_a=ci_a,
                piv=res.predicted_interval, piv0=piv0, ms=ms, ratio=ratio,
                would_claim=would_claim, brk=getattr(res, "break_", None) is not None)


def _pct(v: list[bool]) -> str:
    return f"{100 * np.mean(v):5.1f}%" if v else "   -  "


def _q(v: list[float], q: float) -> str:
    return f"{np.quantile(v, q):.4f}" if v else "  -   "


HEAD = ("  window  method      n   ident  oracle  A-cov   A-width  f-med   f-p90   f-cov   "
        "f-width  conf_wrong  ms    f-cov/width w/o drift allowance")


def row(label: str, method: str, rows: list[tuple[dict, dict]], oracle: str) -> str:
    ok = [(r, o) for r, o in rows if o["status"] == "ok"]
    ident = _pct([o["status"] == "ok" for _, o in rows])
    a_cov = [o["ci_a"][0] <= r["a_true"] <= o["ci_a"][1] for r, o in ok if o["ci_a"]]
    a_w = [o["ci_a"][1] - o["ci_a"][0] for _, o in ok if o["ci_a"]]
    err = [abs(o["pred"] - r["truth_end"]) for r, o in rows if o["pred"] is not None]
    f_cov = [o["piv"][0] <= r["obs_end"] <= o["piv"][1] for r, o in rows if o["piv"]]
    f_w = [o["piv"][1] - o["piv"][0] for _, o in rows if o["piv"]]
    wrong = sum(1 for r, o in ok if o["ci_a"] and max(o["ci_a"][0] - r["a_true"],
                                                      r["a_true"] - o["ci_a"][1]) > 0.05)
    if method not in DEFAULTS:  # the baselines (no interval): judged on the point error
        wrong = sum(1 for r, o in ok if o["a_hat"] is not None
                    and abs(o["a_hat"] - r["a_true"]) > 0.05)
    ms = np.median([o["ms"] for _, o in rows])
    with0 = [(r, o) for r, o in rows if o.get("piv0") and np.all(np.isfinite(o["piv0"]))]
    f0 = [o["piv0"][0] <= r["obs_end"] <= o["piv0"][1] for r, o in with0]
    f0_w = [o["piv0"][1] - o["piv0"][0] for _, o in with0]
    return (f"  {label:7s} {method:9s} {len(rows):4d}  {ident}  {oracle:6s}  {_pct(a_cov)}  "
            f"{_q(a_w, .5)}  {_q(err, .5)}  {_q(err, .9)}  {_pct(f_cov)}  {_q(f_w, .5)}  "
            f"{wrong:5d}     {ms:6.1f}  {_pct(f0)} {_q(f0_w, .5)}  "
            f"{sum(bool(o.get('brk')) for _, o in rows):4d}")


def oracle_sds(fams: dict[str, dict], reps: int, seed: int) -> dict[tuple, float]:
    """Per (family, shape, window): the sampling sd of the point fit's A over ``reps`` fresh
    runs of that shape and family -- the spread an honest interval must cover.  The spread is
    of the *error*, A-hat minus the run's own true ceiling: a fixed-prompt-set run's ceiling
    is that set's (``make_prompt_run``), and a fresh set has another, so the sd of A-hat alone
    counted the sets' differences as estimation error (with 200 prompts their ceilings alone
    differ by an sd of 0.014; the oracle read 0% at 5 x C_mid where the engine held 92%
    coverage with 0.07-wide intervals).

    A Monte Carlo of its own (point fits only, ~2 ms each), not the ``--reps`` runs being
    judged: an sd from 6 values is so noisy that a shape just beyond the threshold often looks
    inside it (at 2 x C_mid, 6 reps gave an oracle of 17.8% where 24 gave 5.6%).
    """
    rng = np.random.default_rng(seed + 10_000)
    out: dict[tuple, float] = {}
    for fname, fam in fams.items():
        for si, shape in enumerate(TABLE1):
            errors: dict[float, list[float]] = defaultdict(list)  # A-hat minus the truth
            for _ in range(reps):
                run = make(fam, shape, rng)
                for w in WINDOWS:
                    res = fit_curve(run["c"], run["y"], FitOptions(
                        r0=run["r0"], warmup=run["warmup"], fit_until=w * run["cm"],
                        intervals=False))
                    if res.a_fit is not None:
                        errors[w].append(res.a_fit - run["a_true"])
            for w in WINDOWS:
                v = errors[w]
                out[(fname, si, w)] = float(np.std(v, ddof=1)) if len(v) >= 3 else np.inf
    return out


def oracle_rate(rows: list[tuple[dict, dict]], sds: dict[tuple, float]) -> str:
    """Share of runs whose shape's Monte Carlo sd of A-hat allows an interval below the
    threshold (``oracle_sds``)."""
    return _pct([2 * 1.96 * sds.get(r["cell"], np.inf) <= ID_MAX_WIDTH for r, _ in rows])


def synthetic(args: argparse.Namespace) -> None:
    fams = {k: v for k, v in FAMILIES.items() if not args.families or k in args.families}
    results: dict[tuple[str, str, float], list[tuple[dict, dict]]] = defaultdict(list)
    rng = np.random.default_rng(args.seed)
    for fname, fam in fams.items():
        runs = [(si, rep, dict(make(fam, shape, rng), project=fname))
                for si, shape in enumerate(TABLE1) for rep in range(args.reps)]
        priors = (learned_priors([dict(run, recipe=si) for si, _, run in runs],
                                 args.b_prior_from) if args.noise_prior else [])
        for i, (si, rep, run) in enumerate(runs):
            for w in WINDOWS:
                r = dict(run, cell=(fname, si, w))
                results[(fname, "default", w)].append((r, fit_one(run, w, "default")))
                for method in PRIORS if priors else ():
                    results[(fname, method, w)].append((r, fit_one(run, w, method, priors[i])))
                if args.baselines:
                    results[(fname, "curve_fit", w)].append(
                        (r, fit_one(run, w, "curve_fit")))
                if args.baselines and rep < args.paper_reps:
                    results[(fname, "paper", w)].append((r, fit_one(run, w, "paper")))
        rates = [p[1] for p in priors if p[1] is not None]
        print(f"  .. {fname} done" + (f" (learned drift rate, median {np.median(rates):.4f})"
                                      if rates else ""), file=sys.stderr, flush=True)
    sds = oracle_sds(fams, args.oracle_reps, args.seed)
    print(f"\n== synthetic: {len(fams)} families x {len(TABLE1)} Table-1 shapes x {args.reps} "
          f"reps (paper method: {args.paper_reps} rep; oracle: {args.oracle_reps} reps), "
          f"windows at {WINDOWS} x C_mid, "
          f"forecast at {END:g} x C_mid; ok = A's 95% interval narrower than {ID_MAX_WIDTH} ==")
    print(HEAD)
    for w in WINDOWS:
        pooled_default = [x for f in fams for x in results[(f, "default", w)]]
        oracle = oracle_rate(pooled_default, sds)
        for method in ("default", *PRIORS, "curve_fit", "paper"):
            rows = [x for f in fams for x in results[(f, method, w)]]
            if rows:
                print(row(f"{w:g}x", method, rows, oracle if method in DEFAULTS else ""))
    pooled = [w for w in WINDOWS if w >= 2.0]
    for method in ("default", *PRIORS, "curve_fit", "paper"):
        rows = [x for f in fams for w in pooled for x in results[(f, method, w)]]
        if rows:
            print(row(">=2x", method, rows, ""))
    past_knee_table([x for f in fams for w in WINDOWS for x in results[(f, "default", w)]])
    shape_oracle_table([x for f in fams for w in WINDOWS for x in results[(f, "default", w)]])
    print("\n-- default method, per family --")
    print(HEAD.replace("  window  method    ", "  window  family    "))
    for f in fams:
        print(f"  {f}")
        for w in WINDOWS:
            rows = results[(f, "default", w)]
            print(row(f"{w:g}x", "", rows, oracle_rate(rows, sds)))  # "": the default method
            for method in PRIORS:
                if results[(f, method, w)]:
                    print(row(f"{w:g}x", method, results[(f, method, w)], oracle_rate(rows, sds)))


def past_knee_table(rows: list[tuple[dict, dict]]) -> None:
    """A coverage of the claims the fit would make without ``fit.too_early``, by how far the
    window's end lies past the fitted C_mid (all windows pooled): what PAST_KNEE is set from."""
    claims = [(o["ratio"], r["a_true"], o["ci_a"]) for r, o in rows if o.get("would_claim")]
    print(f"\n-- default method: claims without the {PAST_KNEE:g} x rule, by window end / "
          "fitted C_mid (all windows) --")
    for lo, hi in ((0.0, 2.0), (2.0, 2.5), (2.5, 3.0), (3.0, 4.0), (4.0, np.inf)):
        cov = [a_lo <= a <= a_hi for q, a, (a_lo, a_hi) in claims if lo <= q < hi]
        flag = "  withheld" if hi <= PAST_KNEE else ""
        print(f"  {f'[{lo:g}, {hi:g}) x':12s} claims {len(cov):4d}   A coverage {_pct(cov)}{flag}")


def shape_oracle_error(run: dict, window: float) -> float:
    """|forecast - truth| at the run's end of a fit that knows the true shape (B, C_mid) and
    fits only A and R0 (R0 too when the run does not give it) by least squares on the window:
    what no method that must learn the shape from the run can beat, short of a prior on it."""
    c, y = run["c"], run["y"]
    keep = (c <= window * run["cm"]) & (c >= run["warmup"])
    # The share of the gain reached: the model's curve from 0 to 1 (0 at compute 0).
    s = curve(c[keep], 1.0, run["b"], run["cm"], 0.0)
    s_end = float(curve([run["end"]], 1.0, run["b"], run["cm"], 0.0)[0])
    if run["r0"] is not None:
        gain = float(s @ (y[keep] - run["r0"]) / (s @ s))
        pred = run["r0"] + gain * s_end
    else:
        r0, a = np.linalg.lstsq(np.stack([1.0 - s, s], axis=1), y[keep], rcond=None)[0]
        pred = r0 * (1.0 - s_end) + a * s_end
    return abs(float(pred) - run["truth_end"])


def shape_oracle_table(rows: list[tuple[dict, dict]]) -> None:
    """The forecast errors of ``shape_oracle_error`` per window (all families): the floor
    under the "p90 lower than a plain fit's" target that only a prior on the shape can move."""
    print("\n-- forecast of an oracle that knows each run's shape (B, C_mid), fits A and R0 --")
    pooled: list[float] = []
    for w in WINDOWS:
        err = [shape_oracle_error(r, w) for r, _ in rows if r["cell"][2] == w]
        pooled += err if w >= 2.0 else []
        print(f"  {f'{w:g}x':6s} f-med {_q(err, .5)}  f-p90 {_q(err, .9)}")
    print(f"  {'>=2x':6s} f-med {_q(pooled, .5)}  f-p90 {_q(pooled, .9)}")


def learned_priors(runs: list[dict], b_from: str = "runs") -> list[Prior]:
    """Per run, what the server learns from a project's finished runs, learned here from the
    *other* runs (leave-one-out) of its project: their noise posteriors and B (fitted to their
    end; B from ``ok`` fits, as the server does) and their hindcasts (fitted on their first
    half, forecasting their end).  ``b_from="recipes"``: the B prior from other recipes only."""
    def others(i: int) -> list[int]:
        return [j for j, o in enumerate(runs) if j != i and o["project"] == runs[i]["project"]]

    def other_recipes(i: int) -> list[int]:
        return [j for j in others(i) if runs[j].get("recipe", j) != runs[i].get("recipe", i)]

    fits = [fit_curve(r["c"], r["y"], FitOptions(r0=r["r0"], warmup=r["warmup"])) for r in runs]
    full = [f.rho for f in fits]
    b_est = [log_b_estimate((f.ci or {}).get("B")) if f.status == "ok" else None for f in fits]
    b_src = other_recipes if b_from == "recipes" else others
    rho = [learn_rho_prior([full[j] for j in others(i)]) for i in range(len(runs))]
    # As the server does: a finished run's hindcast is fitted with its own (learned) prior.
    hind = [hindcast_of(r["c"], r["y"], FitOptions(r0=r["r0"], warmup=r["warmup"],
                                                   noise_prior=rho[i]))
            for i, r in enumerate(runs)]
    plain = [hindcast_of(r["c"], r["y"], FitOptions(r0=r["r0"], warmup=r["warmup"]))
             for r in runs]
    return [(rho[i], learn_drift_rate([hind[j] for j in others(i)]),
             learn_b_prior([b_est[j] for j in b_src(i)]),
             learn_drift_rate([plain[j] for j in others(i)])) for i in range(len(runs))]


def real(args: argparse.Namespace) -> None:
    from fit_accuracy import real_runs  # noqa: PLC0415 (bench-local module)

    runs = real_runs()
    if not runs:
        print("\n(real curves not found; skipped)")
        return
    print(f"\n== real curves: {len(runs)} runs, fit on the first half, forecast the end "
          "(reference: mean of the last k evaluations) ==")
    print("  method      n   ok      f-med   f-p90   f-cov(ok)  f-cov(all)  f-width")
    priors: list[Prior] = [NO_PRIOR] * len(runs)
    if args.noise_prior:  # a source's runs of one metric share their evaluation set: a project
        priors = learned_priors([dict(r, r0=None) for r in runs])
        print(f"  ({sum(p[0] is not None for p in priors)} of {len(runs)} runs have another run "
              f"of their source and metric to learn the noise prior from, "
              f"{sum(p[1] is not None for p in priors)} enough to learn the drift rate, "
              f"{sum(p[2] is not None for p in priors)} the B prior)")
    for method in ("default", "curve_fit") + (PRIORS if args.noise_prior else ()):
        errs, cov_all, cov_ok, width, n_ok = [], [], [], [], 0
        for i, run in enumerate(runs):
            opts = options_for(method, priors[i], fit_until=run["fit_until"],
                               target_compute=run["target"])
            res = fit_curve(run["c"], run["y"], opts)
            n_ok += res.status == "ok"
            if res.predicted_at_target is not None:
                errs.append(abs(res.predicted_at_target - run["truth"]))
            truth, k, at = run["checks"]["main"][:3]
            if res.predicted_interval is not None:
                from scalewatch.server.fitting import predict_interval  # noqa: PLC0415

                lo, hi = (float(v[0]) for v in predict_interval(res, [at], n_evals=k))
                hit = lo <= truth <= hi
                cov_all.append(hit)
                width.append(hi - lo)
                if res.status == "ok":
                    cov_ok.append(hit)
        print(f"  {method:9s} {len(runs):4d} {n_ok:4d}    {_q(errs, .5)}  {_q(errs, .9)}  "
              f"{_pct(cov_ok)}     {_pct(cov_all)}   {_q(width, .5)}")


def learn_drift() -> None:
    """The misspecification allowance: per real run, the smallest drift rate its forecast miss
    needs beyond the curve + noise interval; the rate is their 95th percentile, checked by
    leave-one-out (each run judged with the rate learned on the others)."""
    from fit_accuracy import real_runs  # noqa: PLC0415

    from scalewatch.server.fitting import predict  # noqa: PLC0415

    need = []
    runs = real_runs()
    for run in runs:
        res = fit_curve(run["c"], run["y"], FitOptions(fit_until=run["fit_until"],
                                                       target_compute=run["target"]))
        if res.predicted_interval is None or res.fit_range is None:
            continue
        truth, k, at = run["checks"]["main"][:3]
        lo, hi = (float(v[0]) for v in predict_interval(res, [at], n_evals=k,
                                                        misspecification=False))
        centre = float(predict(res, [at])[0])
        beyond = float(np.log(at / res.fit_range[1]))
        d = truth - centre
        half = hi - centre if d > 0 else centre - lo
        need.append(np.sqrt(max(d * d - half * half, 0.0)) / (1.96 * beyond)
                    if abs(d) > half and beyond > 0 else 0.0)
    need_a = np.array(need)
    loo = [need_a[i] <= np.quantile(np.delete(need_a, i), 0.95) for i in range(need_a.size)]
    print(f"\n== misspecification allowance on {need_a.size} real curves ==")
    print(f"  drift rate needed per run: median {np.median(need_a):.4f}, 90% "
          f"{np.quantile(need_a, 0.9):.4f}, 95% {np.quantile(need_a, 0.95):.4f}; "
          f"leave-one-out coverage with the 95% rate: {100 * np.mean(loo):.1f}%")
    drift_shape(runs)


def drift_shape(runs: list[dict]) -> None:
    """Whether the default allowance should grow in proportion to the distance past the window
    (it does: one rate) or level off, as a project's learned allowance may
    (``hindcast.allowance_knots``): each real curve cut at every ``HORIZON_FRACTIONS`` of its
    compute (``hindcasts_of``, the server's own hindcasts), per cut the rate and the sd beyond
    the exact-model band its forecast of the end needed, and the coverage ``DRIFT_RATE``
    gives there.  A rate that stays put (or grows) from cut to cut says proportional (or
    faster); one that falls says the allowance levels off (RESULTS-calibration-sampled.md,
    round 13)."""
    cuts = [hindcasts_of(run["c"], run["y"], FitOptions(warmup=run["warmup"])) for run in runs]
    print(f"\n== the allowance's shape on the real curves: hindcasts cut at "
          f"{', '.join(f'{f:.2f}' for f in HORIZON_FRACTIONS)} of each run ==")
    print("  cut    n  beyond  rate q50   q90     q95   sd q90   q95    cover @ DRIFT_RATE")
    for i, fraction in enumerate(HORIZON_FRACTIONS):
        hs = [h[i] for h in cuts if h[i] is not None]
        rate = [needed_rate(h) for h in hs]
        sd = [rate_h * h.beyond for rate_h, h in zip(rate, hs, strict=True)]
        hit = [abs(h.miss) <= 1.96 * np.hypot(h.sd, DRIFT_RATE * h.beyond) for h in hs]
        print(f"  {fraction:.2f} {len(hs):4d}  {np.median([h.beyond for h in hs]):5.2f}   "
              f"{_q(rate, .5)} {_q(rate, .9)} {_q(rate, .95)}  {_q(sd, .9)} {_q(sd, .95)}  "
              f"{_pct(hit)}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--paper-reps", type=int, default=1)
    ap.add_argument("--oracle-reps", type=int, default=40,
                    help="fresh runs per shape and family for the oracle's Monte Carlo")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--learn-drift", action="store_true",
                    help="learn the misspecification allowance on the real curves")
    ap.add_argument("--no-baselines", dest="baselines", action="store_false",
                    help="fit with the default method only (faster)")
    ap.add_argument("--families", nargs="*", default=None)
    ap.add_argument("--noise-prior", action="store_true",
                    help="also fit with the project priors learned leave-one-out per family")
    ap.add_argument("--b-prior-from", choices=("runs", "recipes"), default="runs",
                    help="learn a run's B prior from its project's other runs (default) or "
                         "from its other recipes only")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if not args.no_synthetic:
        synthetic(args)
    if not args.no_real:
        real(args)
    if args.learn_drift:
        learn_drift()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
