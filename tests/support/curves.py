"""Synthetic evaluation curves: the ScaleRL sigmoid plus serially correlated noise.

Deliberately independent of ``scalewatch.server.fitting`` (a fit test must not generate its
truth with the code it checks). Each helper draws from its own ``numpy`` generator seeded by
``seed``, so a curve depends only on its arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ar1_noise", "compute_axis", "noisy_sigmoid", "sigmoid"]


def sigmoid(c: Any, A: float, B: float, C_mid: float, R0: float) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)."""
    return R0 + (A - R0) / (1 + (C_mid / np.asarray(c, dtype=float)) ** B)


def ar1_noise(n: int, seed: int, sd: float, phi: float = 0.5) -> np.ndarray:
    """AR(1) noise starting at 0 (real evaluation noise is serially correlated)."""
    rng = np.random.default_rng(seed)
    noise = np.zeros(n)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + rng.normal(0, sd)
    return noise


def compute_axis(n: int, c_max: float) -> np.ndarray:
    """``n`` evaluations evenly spaced up to ``c_max`` (the first at ``c_max / n``, not 0)."""
    return np.linspace(c_max / n, c_max, n)


def noisy_sigmoid(
    A: float,
    B: float,
    C_mid: float,
    R0: float,
    n: int = 80,
    c_max: float = 8000.0,
    seed: int = 0,
    sd: float = 0.008,
) -> tuple[np.ndarray, np.ndarray]:
    """(compute, observed): a sigmoid sampled on :func:`compute_axis` with AR(1) noise."""
    c = compute_axis(n, c_max)
    return c, sigmoid(c, A, B, C_mid, R0) + ar1_noise(n, seed, sd)
