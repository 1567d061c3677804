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
from scipy.optimize import brentq
from scipy.stats import binom

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
    """Prais-Winsten along the last axis: AR(1) noise with (sigma, rho) becomes white with
    unit variance."""
    w = np.empty_like(v, dtype=float)
    w[..., 0] = v[..., 0] / sigma
    w[..., 1:] = (v[..., 1:] - rho * v[..., :-1]) / (sigma * np.sqrt(1.0 - rho * rho))
    return w


def scan(resid: np.ndarray, shape: Shape, known: bool, first: int, sigma: float = SIGMA,
         rho: float = RHO) -> np.ndarray:
    """Per evaluation count n, the largest statistic over onsets t0 seen by then.

    ``known``: log likelihood ratio of the exact shape; else the z of the best-fitting ramp
    size (matched filter).  ``resid``: the observed values minus the true curve, one run
    (n,) or a batch of runs (runs, n) scanned at once; (``sigma``, ``rho``): its AR(1) noise
    (``bench/alerts_sampled.py`` gives each run its own)."""
    n_all = resid.shape[-1]
    idx = np.arange(n_all)
    u = _whiten(resid, sigma, rho)
    best = np.full(resid.shape[:-1] + (n_all + 1,), -np.inf)
    for t0 in range(first // 2, n_all - 2):
        s = _whiten(shape(idx, t0), sigma, rho)
        num, den = np.cumsum(s * u, axis=-1), np.cumsum(s * s)
        stat = num - 0.5 * den if known else num / np.sqrt(np.maximum(den, 1e-300))
        ns = np.arange(max(t0 + 3, first), n_all + 1)
        best[..., ns] = np.maximum(best[..., ns], stat[..., ns - 1])
    return best


def null_maxima(n: int, n_null: int, shape: Shape, known: bool, first: int, sigma: float,
                rho: float, rng: np.random.Generator, batch: int = 2000) -> np.ndarray:
    """The statistic's maximum over whole stable runs of ``n`` evaluations (AR(1) noise
    (``sigma``, ``rho``)): the null distribution an alarm threshold is read from."""
    out = []
    for lo in range(0, n_null, batch):
        k = min(batch, n_null - lo)
        noise = np.stack([ar1(n, sigma, rho, rng) for _ in range(k)])
        out.append(scan(noise, shape, known, first, sigma, rho).max(axis=-1))
    return np.concatenate(out)


def like_for_like_rate(alarms: int, runs: int) -> float:
    """The per-run false-alarm rate to hold the oracle to when a detector raised ``alarms``
    false alarms on ``runs`` stable runs: the rate at which a detector would raise at most
    that many with probability one half (median-unbiased; 0 of 200 is 0.35%, 4 of 200 2.3%).
    Reading 0 of 200 as 1/200 = 0.5% would let the oracle expect one false alarm on the very
    runs where ours raised none, and so shorten its delays."""
    return float(brentq(lambda p: binom.cdf(alarms, runs, p) - 0.5, 1e-9, 1.0 - 1e-9))


def delays(rng: np.random.Generator, n_null: int, n_alt: int, evals: int, first: int
           ) -> list[str]:
    """Printable lines: oracle delays on broken and sliding runs at 1% and 2% false alarms."""
    n_all, start = evals + 1, (evals + 1) // 2
    idx = np.arange(n_all)
    lines = []
    for label, shape, known in (("known shape, broken", broken_shape, True),
                                ("known shape, sliding", sliding_shape, True),
                                ("ramp of unknown size", _unit_ramp, False)):
        null = null_maxima(n_all, n_null, shape, known, first, SIGMA, RHO, rng)
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
