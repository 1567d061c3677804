"""Timing of the fitting engine (no assertions; prints a table).

    .venv/bin/python bench/fit_speed.py [--reps 30]

Series: the paper's ScaleRL Table 1 curve (A 0.61, B 1.92, C_mid 2542) over 32k GPU-h with
AR(1) noise, at 1k and 10k evaluation points.  ``warm`` = refit after 1% more points arrived,
warm-started from the previous result (what the background refitter does).

The time of a point fit depends on the noise draw: the break test refits the curve exactly
only where its linearised screen (``breakscreen.py``) sees a candidate break, which happens
on some stable series.  So the point fit at 1k points is also timed on ``--draws`` noise draws
of the same curve, and the median and slowest of their medians printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalewatch.server.fitting import FitOptions, fit_curve  # noqa: E402
from scalewatch.server.fitting.synth import make_run  # noqa: E402


def timeit(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm caches / imports
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1000 * float(np.median(ts))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--draws", type=int, default=20)
    args = ap.parse_args(argv)
    print(f"{'points':>7} {'what':<28} {'cold ms':>8} {'warm ms':>8} {'warm/cold':>9}")
    for n in (1000, 10000):
        c, y, _ = make_run(0.61, 1.92, 2542, 32000, np.random.default_rng(0), n_evals=n,
                           sigma=0.01, rho=0.6)
        k = int(0.99 * len(c))
        for label, opts in (("point fit", FitOptions(warmup=1500, intervals=False)),
                            ("fit with intervals", FitOptions(warmup=1500))):
            prev = fit_curve(c[:k], y[:k], opts)
            cold = timeit(lambda c=c, y=y, o=opts: fit_curve(c, y, o), args.reps)
            warm = timeit(lambda c=c, y=y, o=opts, p=prev: fit_curve(c, y, o, previous=p),
                          args.reps)
            print(f"{n:>7} {label:<28} {cold:8.2f} {warm:8.2f} {warm / cold:9.2f}", flush=True)
    opts = FitOptions(warmup=1500, intervals=False)
    per_draw = []
    for seed in range(1, args.draws + 1):
        c, y, _ = make_run(0.61, 1.92, 2542, 32000, np.random.default_rng(seed), n_evals=1000,
                           sigma=0.01, rho=0.6)
        prev = fit_curve(c[:990], y[:990], opts)
        per_draw.append(timeit(lambda c=c, y=y, p=prev: fit_curve(c, y, opts, previous=p),
                               max(args.reps // 3, 5)))
    print(f"point fit at 1k points, warm, over {args.draws} noise draws: median "
          f"{np.median(per_draw):.2f} ms, slowest draw {max(per_draw):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
