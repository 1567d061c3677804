"""Synthetic runs whose every parameter is drawn at random over wide ranges (issue 34).

Used by ``bench/calibration_sampled.py`` and ``bench/alerts.py --sampled``.  A run is drawn as:

* its **shape**: A in [0.3, 0.95]; R0 near 0 (in [0, 0.03]) or not (in [0.05, A - 0.15]),
  half the runs each; B in [0.5, 6]; C_mid log-uniform over two decades, [300, 30,000]; the run
  lasts ``END`` x C_mid (the forecast's target);
* its **evaluations**: 15-300 of them (log-uniform) over the whole run, evenly spaced in
  compute or not (``C = end * (i / n)^p``, p in [0.5, 2], jittered: compute per step that grows
  or shrinks, evaluations every few steps early and every few hundred late or the reverse);
  an evaluation at compute 0 (R0 given by the first point) on 80% of runs, else R0 is fitted;
* its **noise**: half the runs AR(1) in evaluation order, marginal sd log-uniform in
  [0.003, 0.04], rho in [0, 0.95]; the other half a fixed prompt set of 100-5,000 prompts
  (log-uniform), one Bernoulli draw per prompt per evaluation, prompts of different difficulty
  (each prompt's pass probability is the family's curve shifted in logit by a N(0, s^2), s in
  [0.3, 1.5]: the set's expected curve is a mixture, so only approximately the family's).

Families (every one has a "C_mid", the compute at which half the gain is reached, so windows
at k x C_mid mean the same thing in each):

* ``sigmoid``: the ScaleRL curve itself;
* ``power law``: error decaying as a power law in compute (arXiv 2509.25300's form,
  err = E_inf + k C^-alpha), written ``A - (A - R0) (1 + C / c_s)^-alpha``, alpha in [0.4, 1.5];
* ``exp saturation``: ``A - (A - R0) exp(-C / tau)`` (arXiv 2507.18014);
* ``late drift``: the sigmoid, then from where it has reached 90% of its gain a slow linear
  drift in compute of +-0.002 to 0.008 per C_mid;
* ``plateau sigmoid``: flat at R0 until C_p in [0.2, 0.6] x C_mid, then a sigmoid in
  ln(C - C_p) (a logistic in log-compute that starts late): not a ScaleRL curve.

``a_true`` is what a claimed A must hold: the limit of the run's expected value as compute
grows (for a prompt set, that set's limit), for every family but ``late drift``; a linear drift
has no limit, so there it is the expected value at the end of the run (END x C_mid), the
level the run actually ends at (and the forecast's target).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit, logit

from scalewatch.server.fitting.model import FloatArray, curve
from scalewatch.server.fitting.synth import ar1

END = 8.0  # runs last 8 x C_mid
FAMILIES = ("sigmoid", "power law", "exp saturation", "late drift", "plateau sigmoid")
Curve = Callable[[FloatArray], FloatArray]


def draw_params(family: str, rng: np.random.Generator) -> dict:
    """Every parameter of one run (shape, evaluations, noise), as a plain dict."""
    a = float(rng.uniform(0.3, 0.95))
    r0 = (float(rng.uniform(0.0, 0.03)) if rng.random() < 0.5 or a - 0.15 <= 0.05
          else float(rng.uniform(0.05, a - 0.15)))
    p = dict(family=family, a=a, r0=r0, b=float(rng.uniform(0.5, 6.0)),
             cm=float(np.exp(rng.uniform(np.log(300.0), np.log(30000.0)))),
             n_evals=int(round(np.exp(rng.uniform(np.log(15), np.log(300))))),
             uneven=bool(rng.random() < 0.5), power=float(np.exp(rng.uniform(np.log(0.5),
                                                                                np.log(2.0)))),
             at_zero=bool(rng.random() < 0.8))
    if rng.random() < 0.5:
        p.update(noise="ar1", sd=float(np.exp(rng.uniform(np.log(0.003), np.log(0.04)))),
                 rho=float(rng.uniform(0.0, 0.95)))
    else:
        p.update(noise="prompts", n_prompts=int(round(np.exp(rng.uniform(np.log(100),
                                                                           np.log(5000))))),
                 spread=float(rng.uniform(0.3, 1.5)))
    p.update(alpha=float(rng.uniform(0.4, 1.5)),
             drift=float(rng.choice([-1.0, 1.0]) * rng.uniform(0.002, 0.008)),
             plateau=float(rng.uniform(0.2, 0.6)))
    return p


def family_curve(p: dict) -> Curve:
    """The family's expected value as a function of compute (before the prompt mixture)."""
    a, r0, b, cm, fam = p["a"], p["r0"], p["b"], p["cm"], p["family"]
    if fam == "sigmoid":
        return lambda c: curve(c, a, b, cm, r0)
    if fam == "power law":
        c_s = cm / (2.0 ** (1.0 / p["alpha"]) - 1.0)  # half the gain at cm
        return lambda c: a - (a - r0) * (1.0 + np.asarray(c, float) / c_s) ** -p["alpha"]
    if fam == "exp saturation":
        tau = cm / np.log(2.0)
        return lambda c: a - (a - r0) * np.exp(-np.asarray(c, float) / tau)
    if fam == "late drift":
        c_s = cm * 9.0 ** (1.0 / b)  # 90% of the gain reached: the drift starts there

        def drift(c: FloatArray) -> FloatArray:
            c = np.asarray(c, float)
            return np.clip(curve(c, a, b, cm, r0) + p["drift"] * np.maximum(c - c_s, 0.0) / cm,
                           0.0, 1.0)
        return drift
    if fam == "plateau sigmoid":
        c_p = p["plateau"] * cm

        def plateau(c: FloatArray) -> FloatArray:
            c = np.asarray(c, float)
            return np.where(c > c_p, curve(c - c_p, a, b, cm - c_p, r0), r0)
        return plateau
    raise ValueError(f"unknown family {fam!r}")


def compute_grid(p: dict, rng: np.random.Generator) -> FloatArray:
    """Evaluation computes: ``n_evals`` up to the run's end (plus 0 when the run has it)."""
    end, n = END * p["cm"], p["n_evals"]
    t = np.arange(1, n + 1) / n
    if p["uneven"]:
        jitter = rng.uniform(-0.3, 0.3, n) / n
        t = np.sort(np.clip(t + jitter, 0.2 / n, 1.0))
        t[-1] = 1.0
        t = t ** p["power"]
    c = end * t
    return np.concatenate([[0.0], c]) if p["at_zero"] else c


def make_sampled(p: dict, rng: np.random.Generator) -> dict:
    """One run of parameters ``p``: its data, the truth at its end and the ``a_true`` a
    claimed A must hold (module docstring), in the dict ``bench/calibration.py`` fits."""
    g = family_curve(p)
    c = compute_grid(p, rng)
    end = END * p["cm"]
    far = end * 1e6 if p["family"] != "late drift" else end  # the limit (drift: the end)
    pts = np.concatenate([c, [end, far]])
    if p["noise"] == "ar1":
        mean = g(pts)
        y = np.clip(mean[:-2] + ar1(c.size, p["sd"], p["rho"], rng), 0.0, 1.0)
        sd = np.full(c.size, p["sd"])
    else:
        shift = rng.normal(0.0, p["spread"], p["n_prompts"])
        base = logit(np.clip(g(pts), 1e-6, 1 - 1e-6))
        prob = expit(base[:, None] + shift[None, :])  # (computes, prompts)
        mean = prob.mean(axis=1)
        y = (rng.random(prob[:-2].shape) < prob[:-2]).mean(axis=1)
        sd = np.sqrt((prob[:-2] * (1.0 - prob[:-2])).mean(axis=1) / p["n_prompts"])
    # ``truth`` and ``noise_sd``: the expected value and the noise's sd at every evaluation
    # (what ``bench/alerts_sampled.py``'s oracle knows).
    return dict(c=c, y=y, truth=mean[:-2], noise_sd=sd, truth_end=float(mean[-2]),
                obs_end=float(y[-1]), a_true=float(mean[-1]), cm=p["cm"], end=end, r0=None,
                warmup=0.0, params=p)
