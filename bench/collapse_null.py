"""The collapse test's threshold (``server/fitting/collapse.py``): how far the highest mean of
``k`` consecutive evaluations lies above the newest one, in sds of such a mean, when the
run is nothing but AR(1) noise.

    .venv/bin/python bench/collapse_null.py [--sims 20000]

Prints, per rho and number of evaluations ``n`` (``k`` = n / 10, at least 3, as the test
uses), the 99.9% quantile of (highest k-mean - newest k-mean) / sd(k-mean), with the sd the
true one: ``COLLAPSE_Z`` (6) lies above every entry, so noise alone passes the test on fewer
than 0.1% of fits (its noise sd is estimated in the product, from the residuals of a fit of
the rise; this table is for known noise).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.signal import lfilter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalewatch.server.fitting.collapse import COLLAPSE_Z  # noqa: E402
from scalewatch.server.fitting.intervals import mean_noise_sd  # noqa: E402

RHOS = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95)
NS = (20, 40, 80, 160, 300)


def quantile(rho: float, n: int, sims: int, rng: np.random.Generator) -> float:
    k = max(3, n // 10)
    burn = 60  # the AR(1) recursion starts at 0: let it reach its stationary spread
    e = lfilter([1.0], [1.0, -rho], rng.normal(size=(sims, n + burn)), axis=1)[:, burn:]
    e *= np.sqrt(1.0 - rho * rho)  # unit marginal sd
    cs = np.cumsum(np.pad(e, ((0, 0), (1, 0))), axis=1)
    means = (cs[:, k:] - cs[:, :-k]) / k
    stat = (means.max(axis=1) - means[:, -1]) / mean_noise_sd(1.0, (1 + rho) / (1 - rho), k)
    return float(np.quantile(stat, 0.999))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=20000)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(2)
    print(f"99.9% quantile of (highest k-mean - newest) / sd, AR(1) noise; "
          f"COLLAPSE_Z = {COLLAPSE_Z:g}")
    print("  rho   " + "".join(f"  n={n:<5d}" for n in NS))
    top = 0.0
    for rho in RHOS:
        row = [quantile(rho, n, args.sims, rng) for n in NS]
        top = max(top, *row)
        print(f"  {rho:4.2f}  " + "".join(f"  {q:7.2f}" for q in row))
    print(f"largest: {top:.2f} ({'below' if top < COLLAPSE_Z else 'NOT below'} COLLAPSE_Z)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
