"""Issue 13 item 3: the paper method's error sums over (A, C_mid) pairs x points are computed in
chunks of pairs, so memory is bounded however many points are sent, and the answer is the one
the whole-matrix computation gave, bit for bit."""

from __future__ import annotations

import tracemalloc

import numpy as np

from scalewatch.server.fitting import paper
from scalewatch.server.fitting.paper import A_GRID, fit_paper


def _curve(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    c = np.linspace(50, 12_000, n)
    y = 0.25 + 0.35 / (1 + (2500 / c) ** 1.8) + np.random.default_rng(seed).normal(0, 0.01, n)
    return c, y


def _whole_matrix(c: np.ndarray, y: np.ndarray, r0: float, cmg: np.ndarray,
                  exact: bool) -> tuple[float, float, float, float]:
    """fit_paper as it was before chunking: one (pairs, points) matrix."""
    aa, cc = np.meshgrid(A_GRID, cmg, indexing="ij")
    aa, cc = aa.ravel(), cc.ravel()
    if exact:
        bb = np.array([paper._b_exact(c, y, r0, float(a), float(m))
                       for a, m in zip(aa, cc, strict=True)])
    else:
        bb = paper._b_vectorised(c, y, r0, aa, cc)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        pred = r0 + (aa - r0)[:, None] / (1.0 + (cc[:, None] / c[None, :]) ** bb[:, None])
    ssr = ((pred - y[None, :]) ** 2).sum(1)
    ssr[~np.isfinite(ssr)] = np.inf
    i = int(np.argmin(ssr))
    return float(aa[i]), float(bb[i]), float(cc[i]), float(ssr[i])


def test_chunked_sums_give_the_same_answer_bit_for_bit(monkeypatch) -> None:
    c, y = _curve(300)
    cmg = np.linspace(100.0, 40000.0, 3)
    for exact in (False, True):
        want = _whole_matrix(c, y, 0.25, cmg, exact)
        # chunks of a few pairs (not a divisor of the 213 pairs), and one chunk of all of them
        for elements in (7 * c.size, 10**9):
            monkeypatch.setattr(paper, "CHUNK_ELEMENTS", elements)
            assert fit_paper(c, y, 0.25, cmg, exact=exact) == want, (exact, elements)


def test_memory_is_bounded_by_the_chunk_not_by_pairs_times_points() -> None:
    # 71 x 2 pairs x 60k points: the whole error matrix was 68 MB per temporary array (and
    # 5.7 GB with the paper's full grid at 100k points)
    c, y = _curve(60_000)
    cmg = np.linspace(100.0, 40000.0, 2)
    for exact in (True, False):
        tracemalloc.start()
        try:
            fit_paper(c, y, 0.25, cmg, exact=exact)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8 * paper.CHUNK_ELEMENTS * 8, f"exact={exact}: peak {peak / 1e6:.0f} MB"
