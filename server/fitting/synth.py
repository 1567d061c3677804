"""Synthetic training curves from the paper's Table 1 fits (tests and benches).

Realistic features: evaluations every ~100 steps (a fixed compute step), an early roughly
linear regime before ~1.5k GPU-h that the sigmoid does not describe (the paper skips it), and
AR(1) evaluation noise (the same prompt set every evaluation makes errors persist).
"""

from __future__ import annotations

import numpy as np

from .model import FloatArray, curve

# (name, C_mid, B, A) from Table 1 of arXiv 2510.13786.
TABLE1: tuple[tuple[str, float, float, float], ...] = (
    ("ScaleRL", 2542, 1.92, 0.610),
    ("ScaleRL-32k", 11272, 1.89, 0.645),
    ("ScaleRL-8gen", 2542, 2.44, 0.585),
    ("ScaleRL-24gen", 3054, 2.22, 0.590),
    ("ScaleRL-32gen", 2936, 2.07, 0.595),
    ("ScaleRL-Scout", 4242, 1.65, 0.710),
    ("ScaleRL-bs512", 2818, 1.77, 0.605),
    ("ScaleRL-bs2048", 10909, 1.70, 0.645),
    ("math+code math", 2896, 2.05, 0.595),
    ("math+code code", 1675, 1.09, 0.615),
)


def ar1(n: int, sigma: float, rho: float, rng: np.random.Generator) -> FloatArray:
    """Stationary AR(1) noise with marginal standard deviation ``sigma``."""
    e = np.empty(n)
    e[0] = rng.normal(0.0, sigma)
    innov = rng.normal(0.0, sigma * np.sqrt(1.0 - rho * rho), n)
    for i in range(1, n):
        e[i] = rho * e[i - 1] + innov[i]
    return e


def true_curve(
    c: FloatArray, a: float, b: float, c_mid: float, r0: float, c_lin: float = 1500.0
) -> FloatArray:
    """Sigmoid after ``c_lin``; before it, a straight line from R0 to the sigmoid at ``c_lin``."""
    c = np.asarray(c, dtype=float)
    sig = curve(c, a, b, c_mid, r0)
    at_lin = float(curve([c_lin], a, b, c_mid, r0)[0])
    lin = r0 + (at_lin - r0) * c / c_lin
    return np.where(c < c_lin, lin, sig)


def make_run(
    a: float,
    b: float,
    c_mid: float,
    budget: float,
    rng: np.random.Generator,
    r0: float = 0.3,
    n_evals: int = 100,
    sigma: float = 0.01,
    rho: float = 0.6,
    c_lin: float = 1500.0,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(compute, observed, noiseless) with an evaluation at compute 0 (R0) and ``n_evals`` more."""
    c = np.linspace(0.0, budget, n_evals + 1)
    truth = true_curve(c, a, b, c_mid, r0, c_lin)
    obs = truth + ar1(c.size, sigma, rho, rng)
    obs[0] = r0 + rng.normal(0.0, sigma * 0.5)
    return c, np.clip(obs, 0.0, 1.0), truth


def make_prompt_run(
    a: float,
    b: float,
    c_mid: float,
    budget: float,
    rng: np.random.Generator,
    r0: float = 0.3,
    n_evals: int = 100,
    n_prompts: int = 1000,
    spread: float = 0.6,
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """A run evaluated on a fixed prompt set: one Bernoulli draw per prompt per evaluation.

    Each prompt has its own sigmoid (its own start, ceiling and C_mid, ln C_mid spread by
    ``spread``), so the run's expected pass rate is a *mixture* of sigmoids: the ScaleRL curve
    is only approximately right, which is what real evaluation sets give.  Returns
    (compute, observed, expected pass rate of this prompt set, its true ceiling).  The
    evaluation noise is binomial, sd ~ sqrt(p (1 - p) / n_prompts), independent across
    evaluations given the prompts.
    """
    # Per-prompt start and ceiling from Beta laws with the requested means (a prompt set
    # mixes easy and hard prompts); ceilings never below starts.
    k = 4.0
    p0 = rng.beta(r0 * k, (1 - r0) * k, n_prompts)
    gain = np.clip(a - r0, 0.0, 1.0)
    frac_gain = rng.beta(2.0, 2.0, n_prompts)  # which share of its headroom a prompt gains
    head = 1.0 - p0
    pa = p0 + head * frac_gain * gain / max(float((head * frac_gain).mean()), 1e-9)
    pa = np.clip(pa, p0, 1.0)
    cm = c_mid * np.exp(rng.normal(0.0, spread, n_prompts))
    c = np.linspace(0.0, budget, n_evals + 1)
    with np.errstate(divide="ignore"):
        s = 1.0 / (1.0 + (cm[None, :] / np.maximum(c[:, None], 1e-12)) ** b)
    p = p0[None, :] + (pa - p0)[None, :] * s  # (evals, prompts)
    expected = p.mean(axis=1)
    obs = (rng.random(p.shape) < p).mean(axis=1)
    return c, obs, expected, float(pa.mean())
