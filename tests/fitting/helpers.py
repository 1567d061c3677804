"""Shared helpers for the fitting tests (synthetic runs from the paper's Table 1)."""

from __future__ import annotations

import numpy as np

from scalewatch.server.fitting.synth import TABLE1, make_run

ROWS = {name: (c_mid, b, a) for name, c_mid, b, a in TABLE1}


def table1_run(name: str, budget: float, seed: int, **kw: float) -> tuple[np.ndarray, ...]:
    """(compute, observed, noiseless) for a Table 1 row; sigma 0.01 AR(1) noise by default."""
    c_mid, b, a = ROWS[name]
    rng = np.random.default_rng(seed)
    kw.setdefault("sigma", 0.01)
    kw.setdefault("rho", 0.6)
    kw.setdefault("n_evals", 120)
    return make_run(a, b, c_mid, budget, rng, **kw)
