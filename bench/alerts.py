"""Detection delays and false alarms of `asymptote_drop`, refitting after every evaluation.

    .venv/bin/python bench/alerts.py [--stable 50] [--broken 10] [--evals 100] [--oracle 1000]
    .venv/bin/python bench/alerts.py --sampled --stable 200 --broken 12 --oracle 4000

``--sampled``: runs drawn at random over wide ranges, five families (``bench/alerts_sampled.py``).

The engine and the rule exactly as the server runs them (``fit_curve`` with the previous fit
as warm start, then ``scalewatch.server.alerts.evaluate.asymptote_drop`` against the best
``ok`` fit so far, with the open/closed state carried between refits), without the HTTP and
database round trips, so hundreds of runs stay affordable.  Runs are shaped by the paper's Table 1
fits and last 8 x C_mid:

* **broken**: from half its compute the run's values fall by 0.10 over 20 evaluations and
  stay there (a data-mix change, entropy collapse);
* **sliding**: from half its compute the ceiling slides by 0.06 over 40 evaluations;
* **stable**: no change, noise from the calibration harness's families (AR(1) with rho 0 to
  0.95, a fixed prompt set of 200 or 2,000 prompts).

Printed: per scenario the delay (evaluations from the start of the change to the alert
opening), how many runs fired, opened more than once (flapping), and false alarms; then the
delays of an oracle that knows the true curve and noise (``alert_oracle.py``) at the false-alarm
level the product aims for: no detector that must learn both from the run can beat them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import alert_oracle  # noqa: E402

from scalewatch.server.alerts import evaluate as ev  # noqa: E402
from scalewatch.server.fitting import FitOptions, FitResult, fit_curve  # noqa: E402
from scalewatch.server.fitting.synth import TABLE1, make_prompt_run, make_run  # noqa: E402

PARAMS = {"delta": 0.02}
NOISE = (("ar1 rho=0", 0.0, None), ("ar1 rho=0.5", 0.5, None), ("ar1 rho=0.8", 0.8, None),
         ("ar1 rho=0.95", 0.95, None), ("prompts 200", None, 200), ("prompts 2000", None, 2000))
FIRST = 15  # the first refit sees this many evaluations


def _lower(fit: dict) -> float:
    ci = (fit.get("ci") or {}).get("A") or [None, None]
    return float("-inf") if ci[0] is None else float(ci[0])


def replay(c: np.ndarray, y: np.ndarray, target: float, reasons: list[str] | None = None
           ) -> list[int]:
    """Refit after every evaluation; the evaluation counts at which an alert opened (and, in
    ``reasons``, the alerts' messages)."""
    opened: list[int] = []
    active = False
    best: dict | None = None
    previous: FitResult | None = None
    steps = np.arange(c.size) * 100
    for n in range(FIRST, c.size + 1):
        res = fit_curve(c[:n], y[:n], FitOptions(target_compute=target), previous=previous,
                        steps=steps[:n])
        previous = res if res.status != "insufficient_data" else None
        fit = res.to_dict()
        verdict = ev.asymptote_drop(PARAMS, fit, best, active)
        if verdict.fire is True and not active:
            opened.append(n)
            active = True
            if reasons is not None:
                reasons.append(verdict.message)
        elif verdict.fire is False:
            active = False
        if fit["status"] == "ok" and (best is None or _lower(fit) > _lower(best)):
            best = fit
    return opened


def scenario(kind: str, rng: np.random.Generator, i: int, evals: int) -> tuple:
    name, cm, b, a = TABLE1[i % len(TABLE1)]
    end = 8.0 * cm
    r0 = float(rng.uniform(0.25, 0.4))
    if kind == "stable":
        label, rho, prompts = NOISE[i % len(NOISE)]
        if prompts:
            c, y, _, _ = make_prompt_run(a, b, cm, end, rng, r0=r0, n_evals=evals,
                                         n_prompts=prompts)
        else:
            c, y, _ = make_run(a, b, cm, end, rng, r0=r0, n_evals=evals, rho=rho, c_lin=1e-9)
        return f"{name} / {label}", c, y, end, None
    c, y, _ = make_run(a, b, cm, end, rng, r0=r0, n_evals=evals, rho=0.5, c_lin=1e-9)
    start = int(np.searchsorted(c, end / 2))
    idx = np.arange(c.size)
    if kind == "broken":  # -0.10 over 20 evaluations, then stays down
        y = y - 0.10 * np.clip((idx - start) / 20.0, 0.0, 1.0)
    else:  # the ceiling slides by 0.06 over 40 evaluations
        y = y - 0.06 * np.clip((idx - start) / 40.0, 0.0, 1.0)
    return f"{name} / ar1 rho=0.5", c, y, end, start


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stable", type=int, default=50)
    ap.add_argument("--broken", type=int, default=10)
    ap.add_argument("--evals", type=int, default=100)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--oracle", type=int, default=1000,
                    help="stable runs that set the oracle's alarm threshold (0: no oracle)")
    ap.add_argument("--sampled", action="store_true",
                    help="runs drawn at random from bench/sampled_runs.py's families, each "
                         "change beside the oracle's delay (bench/alerts_sampled.py)")
    ap.add_argument("--stable-alarms", type=int, default=None,
                    help="with --sampled: false alarms already measured on the stable runs of "
                         "this seed and engine; they are not replayed (changed runs only)")
    ap.add_argument("--only-stable", type=str, default=None,
                    help="with --sampled: comma-separated stable-run indices to replay (the "
                         "others are drawn, not replayed; --stable-alarms counts them)")
    ap.add_argument("--only-changed", type=str, default=None,
                    help="with --sampled: comma-separated changed-run indices to replay")
    ap.add_argument("--feasible", type=int, default=300,
                    help="with --sampled: simulated stable runs per threshold of the feasible "
                         "(fitted-curve) oracle, bench/alert_feasible.py (0: not run)")
    ap.add_argument("--feasible-check", type=int, default=0,
                    help="with --sampled: count the feasible oracle's false alarms on this many "
                         "of the stable runs (a check of its threshold)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    if args.sampled:
        import alerts_sampled  # noqa: PLC0415 (imports this module)

        def ints(v: str | None) -> set[int] | None:
            return None if v is None else {int(t) for t in v.split(",") if t}

        alerts_sampled.run_sampled(args.stable, args.broken, args.oracle, args.seed,
                                   args.stable_alarms, ints(args.only_stable),
                                   ints(args.only_changed), args.feasible,
                                   args.feasible_check)
        print(f"({time.perf_counter() - t0:.0f} s)")
        return 0
    print(f"asymptote_drop (delta {PARAMS['delta']}), refit after every evaluation, "
          f"{args.evals} evaluations a run")
    for kind, count in (("broken", args.broken), ("sliding", args.broken),
                        ("stable", args.stable)):
        delays, fired, flapped, early = [], 0, 0, 0
        for i in range(count):
            label, c, y, end, start = scenario(kind, rng, i, args.evals)
            opened = replay(c, y, end)
            fired += bool(opened)
            flapped += len(opened) > 1
            if start is not None and opened:
                if opened[0] <= start:
                    early += 1  # fired before the change: a false alarm
                else:
                    delays.append(opened[0] - start)
            if kind == "stable" and opened:
                print(f"   false alarm: {label} at evaluation {opened[0]}", flush=True)
        if kind == "stable":
            print(f"  stable   {count:3d} runs: {fired} raised an alert (false alarms), "
                  f"{flapped} more than once", flush=True)
        else:
            d = np.array(delays) if delays else np.array([np.nan])
            print(f"  {kind:8s} {count:3d} runs: fired {fired}, before the change {early}, "
                  f"more than once {flapped}; delay (evaluations after the change starts) "
                  f"median {np.nanmedian(d):.0f}, max {np.nanmax(d):.0f}, all {sorted(delays)}",
                  flush=True)
    if args.oracle:
        print(f"the same changes seen by an oracle (true curve and noise; threshold from "
              f"{args.oracle} stable runs):", flush=True)
        for line in alert_oracle.delays(np.random.default_rng(args.seed + 1), args.oracle,
                                        max(args.broken, 100), args.evals, FIRST):
            print(line, flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
