"""What any detector could achieve on ``bench/alerts.py``'s broken and sliding runs.

An *oracle* knows what no real detector knows: the run's true curve and its exact noise model
(AR(1), the scenarios' sigma 0.01 and rho 0.5).  Its residuals are then pure noise until the
change starts, and the best test of "a departure started at some evaluation t0" is a
generalised likelihood ratio scanned over t0.  Two oracles:

* **known shape**: it also knows the change exactly (-0.10 over 20 evaluations, or -0.06
  over 40) and only not when it starts: the Neyman-Pearson bound, no detector does better;
* **ramp of unknown size**: the departure is a ramp of unknown slope (the shape the product's
  break test uses), still with the true curve and noise.

Each alarm threshold is set so that the oracle raises an alarm on at most 1% (and 2%) of
stable runs of the same noise over the same evaluations; and, with ``--oracle 10000`` or more
stable runs, 0.1%: the level at which "0 alerts over 50 stable runs" holds with 95%
probability (at 1% a run it holds only 61% of the time).  The printed delays are then a
floor: a detector that must estimate the curve and the noise from the run itself cannot be
faster at that level.

    .venv/bin/python bench/alerts.py --oracle 1000
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scalewatch.server.fitting.synth import ar1

SIGMA, RHO = 0.01, 0.5  # the noise of the broken and sliding scenarios
Shape = Callable[[np.ndarray, int], np.ndarray]


def broken_shape(idx: np.ndarray, t0: int) -> np.ndarray:
    return -0.10 * np.clip((idx - t0) / 20.0, 0.0, 1.0)


def sliding_shape(idx: np.ndarray, t0: int) -> np.ndarray:
    return -0.06 * np.clip((idx - t0) / 40.0, 0.0, 1.0)


def _unit_ramp(idx: np.ndarray, t0: int) -> np.ndarray:
    return -np.clip(idx - t0, 0.0, None).astype(float)


def _whiten(v: np.ndarray, sigma: float = SIGMA, rho: float = RHO) -> np.ndarray:
    """Prais-Winsten: AR(1) noise with (sigma, rho) becomes white with unit variance."""
    w = np.empty_like(v)
    w[0] = v[0] / sigma
    w[1:] = (v[1:] - rho * v[:-1]) / (sigma * np.sqrt(1.0 - rho * rho))
    return w


def scan(resid: np.ndarray, shape: Shape, known: bool, first: int, sigma: float = SIGMA,
         rho: float = RHO) -> np.ndarray:
    """Per evaluation count n, the largest statistic over onsets t0 seen by then.

    ``known``: log likelihood ratio of the exact shape; else the z of the best-fitting ramp
    size (matched filter).  ``resid``: the observed values minus the true curve; (``sigma``,
    ``rho``): its AR(1) noise (``bench/alerts_sampled.py`` gives each run its own)."""
    n_all = resid.size
    idx = np.arange(n_all)
    u = _whiten(resid, sigma, rho)
    best = np.full(n_all + 1, -np.inf)
    for t0 in range(first // 2, n_all - 2):
        s = _whiten(shape(idx, t0), sigma, rho)
        num, den = np.cumsum(s * u), np.cumsum(s * s)
        stat = num - 0.5 * den if known else num / np.sqrt(np.maximum(den, 1e-300))
        ns = np.arange(max(t0 + 3, first), n_all + 1)
        best[ns] = np.maximum(best[ns], stat[ns - 1])
    return best


def delays(rng: np.random.Generator, n_null: int, n_alt: int, evals: int, first: int
           ) -> list[str]:
    """Printable lines: oracle delays on broken and sliding runs at 1% and 2% false alarms."""
    n_all, start = evals + 1, (evals + 1) // 2
    idx = np.arange(n_all)
    lines = []
    for label, shape, known in (("known shape, broken", broken_shape, True),
                                ("known shape, sliding", sliding_shape, True),
                                ("ramp of unknown size", _unit_ramp, False)):
        null = np.array([scan(ar1(n_all, SIGMA, RHO, rng), shape, known, first).max()
                         for _ in range(n_null)])
        targets = ([broken_shape] if "broken" in label else [sliding_shape] if known
                   else [broken_shape, sliding_shape])
        for true in targets:
            stats = [scan(ar1(n_all, SIGMA, RHO, rng) + true(idx, start), shape, known, first)
                     for _ in range(n_alt)]
            for fa in (0.001, 0.01, 0.02) if n_null >= 10000 else (0.01, 0.02):
                h = float(np.quantile(null, 1.0 - fa))
                d = []
                for s in stats:
                    hit = np.nonzero(s[start + 1:] > h)[0]
                    d.append(int(hit[0]) + 1 if hit.size else evals)
                name = "broken" if true is broken_shape else "sliding"
                lines.append(f"  oracle {label:22s} {name:8s} false alarms {fa:.1%}/run: delay "
                             f"median {np.median(d):.0f}, p90 {np.quantile(d, 0.9):.0f}, "
                             f"max {max(d)}")
    return lines
