"""Comparing fitted runs: the paper's decision rule, crossovers and a winner at a budget."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import grid as G
from .fit import _refine, binned_ssr, coarse_check, point_fit, prepare, refine_bounds, warm_holds
from .model import FloatArray, curves_many, value_span
from .result import FitOptions, FitResult

SAME_A_MARGIN = 0.02  # the paper's error margin on A (App. A.5)
N_CROSS_GRID = 900  # one grid for every pair: a little denser than the per-pair one was
MAX_DRAWS = 200  # posterior draws per run used for crossover and winner probabilities
BINNED_REFIT_ABOVE = 4000  # points; above it the fixed-A refit runs on binned data
REFIT_BINS = 400


class FixedARefit:
    """Refits of one run with A fixed (the paper's slope comparison) at any A: the data are
    prepared and binned once, since a comparison refits a run at a different A per pair.

    ``near`` (the run's own fit, rows A, B, C_mid, R0) warm-starts every refit: a pair is only
    refitted at a fixed A within ``SAME_A_MARGIN`` of each run's own A, so the best curve there
    lies next to the run's own, and a coarse check grid (as for a warm refit, ``point_fit``)
    replaces the full grid search unless it finds a better basin."""

    def __init__(self, compute: ArrayLike, values: ArrayLike, options: FitOptions,
                 near: tuple[float, float, float, float] | None = None) -> None:
        self.prep = prepare(compute, values, options)
        lo, hi = options.value_range
        self.vr = (float(lo), float(hi))
        self.binned = self.coarse = None
        self.start: tuple[float, float, float, float] | None = None
        if near is not None and near[2] > 0 and self.prep.y.size:
            a, b, cm, r0 = (float(v) for v in near)
            self.start = (a, float(np.log(cm / self.prep.c0)), b, r0)
        if self.prep.y.size > BINNED_REFIT_ABOVE:
            # A long run (the API compares 100k-point runs): refine on REFIT_BINS bins in
            # log-compute weighted by their counts; the same SSR up to the curve's spread
            # inside a bin, at a hundredth of the cost of least squares over every point.
            self.binned = G.bin_data(self.prep.x, self.prep.y, max_bins=REFIT_BINS)
            self.coarse = G.bin_data(self.prep.x, self.prep.y)

    def at(self, a: float) -> tuple[float, float, float] | None:
        """(B, C_mid, R0) of the best curve with A = ``a``."""
        prep = self.prep
        if prep.y.size < 3:
            return None
        if self.binned is None or self.coarse is None:
            _, m, b, r0 = point_fit(prep.x, prep.y, prep.r0, self.vr, start=self.start,
                                    fixed_a=a).theta
            return b, prep.c0 * float(np.exp(m)), r0
        m_axis, b_axis = G.default_axes(float(prep.x[0]))
        m_bounds = refine_bounds(m_axis)
        bx, by, bw = self.binned.x, self.binned.y, self.binned.w
        fit_r0 = prep.r0 is None
        if self.start is not None:
            _, m0, b0, r00 = self.start
            warm = _refine(bx, by, (a, m0, b0, r00 if fit_r0 else float(prep.r0 or 0.0)),
                           fit_r0, self.vr, m_bounds, fixed_a=a, weights=bw)
            # Both SSRs over the same coarse bins (as point_fit's and prefix_fit's warm paths).
            check = coarse_check(self.coarse, prep.r0, self.vr, float(prep.x[0]), a)
            if warm_holds(binned_ssr(self.coarse, warm), check):
                return warm[2], prep.c0 * float(np.exp(warm[1])), warm[3]
        gr = G.search(self.coarse, prep.r0, self.vr, m_axis, b_axis, fixed_a=a)
        i = gr.best
        start = (float(gr.a[i]), float(gr.m[i]), float(gr.b[i]), float(gr.r0[i]))
        _, m, b, r0 = _refine(bx, by, start, fit_r0, self.vr, m_bounds, fixed_a=a, weights=bw)
        return b, prep.c0 * float(np.exp(m)), r0


def refit_fixed_a(
    compute: ArrayLike, values: ArrayLike, options: FitOptions, a: float
) -> tuple[float, float, float] | None:
    """Refit with A fixed (the paper's slope comparison); returns (B, C_mid, R0)."""
    return FixedARefit(compute, values, options).at(a)


def _last_cross(grid: FloatArray, d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Last sign change of each row of ``d`` over ``grid``: (compute or NaN, sign before).

    The last one is what decides the order at large compute; earlier ones sit where both
    curves are still near R0 and differ by less than the noise.
    """
    d = np.atleast_2d(d)
    # A sign change is (> 0 then < 0) or (< 0 then > 0); zeros change nothing (as the product
    # of signs): boolean arrays, a quarter of the memory traffic of float signs.
    pos, neg = d > 0, d < 0
    change = (pos[:, :-1] & neg[:, 1:]) | (neg[:, :-1] & pos[:, 1:])
    has = change.any(1)
    i = change.shape[1] - 1 - np.argmax(change[:, ::-1], 1)
    rows = np.arange(d.shape[0])
    d0, d1 = d[rows, i], d[rows, i + 1]
    lg = np.log(grid)
    t = np.clip(d0 / (d0 - d1 + 1e-300), 0.0, 1.0)  # rows without a crossing: harmless
    cross = np.exp(lg[i] + t * (lg[i + 1] - lg[i]))
    return np.where(has, cross, np.nan), np.sign(d0)


def _draws(res: FitResult) -> FloatArray:
    """The result's posterior draws, thinned to MAX_DRAWS: enough for a crossover interval
    and a winning probability, half the cost of all the stored ones."""
    d = np.array(res.draws, dtype=float).reshape(-1, 4)
    step = max(1, -(-len(d) // MAX_DRAWS))
    return d[::step]


def compare_fits(
    series: Mapping[str, tuple[ArrayLike, ArrayLike, FitResult]],
    budget: float | None = None,
    options: FitOptions | None = None,
    margin: float | None = None,
) -> dict[str, Any]:
    """Compare runs fitted with :func:`fit_curve` (JSON-able result).

    ``series`` maps a run name to ``(compute, values, fit_result)``; ``options`` are the fit
    options (used for the fixed-A refits of the decision rule; by default the defaults with
    the runs' value range).  ``margin`` (the paper's 0.02 on a [0, 1] pass rate) is in the
    runs' units: by default ``SAME_A_MARGIN`` times the width of their value range (the
    widest, should they differ).  Returns::

        {
          "budget": float | null,
          "margin": 0.02,                   # x the value range's width
          "runs": {name: {"status", "A", "A_lower_bound", "B", "C_mid", "R0",
                          "predicted_at_budget", "interval_at_budget": [lo, hi] | null}},
          "pairs": [{
             "runs": [name1, name2],
             "decision": {                      # the paper's rule (App. A.5)
                "rule": "same_asymptote" | "different_asymptote" | "undetermined",
                "delta_A": float | null,        # |A1 - A2|
                "higher_asymptote": name | null,
                "fixed_A": float | null,        # mean A used for the slope refit
                "B_at_fixed_A": {name: float} | null,
                "more_efficient": name | null,  # higher B at the fixed A
                "reason": str},
             "crossover": {                     # null when the point fits do not cross
                "compute": float,               # last crossing (decides large-compute order)
                "interval": [lo, hi] | null,    # 95% from the parameter draws
                "probability": float | null,    # share of draws crossing the same way
                "better_before": name, "better_after": name} | null,
             "winner_at_budget": {              # null without a budget
                "run": name, "probability": float | null,
                "predicted": {name: float}} | null,
          }]
        }
    """
    ranges = [(float(r.value_range[0]), float(r.value_range[1])) for _, _, r in series.values()]
    widest = max(ranges, key=value_span, default=(0.0, 1.0))
    if margin is None:
        margin = SAME_A_MARGIN * value_span(widest)
    if options is None:
        options = FitOptions(value_range=widest)
    runs: dict[str, Any] = {}
    # Each run's thinned draws and its values at the budget, once: every pair reuses them.
    draws = {n: _draws(r) for n, (_, _, r) in series.items()}
    at_budget: dict[str, tuple[float, FloatArray]] = {}
    for name, (_, _, res) in series.items():
        entry: dict[str, Any] = {
            "status": res.status, "A": res.A, "A_lower_bound": res.A_lower_bound,
            "B": res.B, "C_mid": res.C_mid, "R0": res.R0,
            "predicted_at_budget": None, "interval_at_budget": None,
        }
        if budget is not None and res.params is not None:
            a, b, cm, r0 = res.params
            point = float(curves_many([budget], np.array([a, b, cm, r0]))[0, 0])
            entry["predicted_at_budget"] = point
            d = draws[name]
            v = curves_many([budget], d)[:, 0] if len(d) else np.empty(0)
            at_budget[name] = (point, v)
            if len(d):
                lo, hi = np.quantile(v, [0.025, 0.975])
                entry["interval_at_budget"] = [float(lo), float(hi)]
        runs[name] = entry

    # Every run's curves (point fit and draws) once, on one grid wide enough for every pair:
    # with 10 runs that is 10 evaluations instead of 90.
    fits = {n: r for n, (_, _, r) in series.items()}
    grid = _cross_grid(list(fits.values()), budget)
    curves = ({n: _curves(r, draws[n], grid) for n, r in fits.items()} if grid is not None
              else {})  # fmt: skip
    refits: dict[str, FixedARefit] = {}

    def refitter(name: str) -> FixedARefit:
        if name not in refits:
            c, y, res = series[name]
            refits[name] = FixedARefit(c, y, options, near=res.params)
        return refits[name]

    pairs = []
    for n1, n2 in combinations(series, 2):
        r1, r2 = fits[n1], fits[n2]
        pairs.append({
            "runs": [n1, n2],
            "decision": _decision(n1, n2, r1, r2, refitter, margin),
            "crossover": _crossover(n1, n2, grid, curves.get(n1), curves.get(n2)),
            "winner_at_budget": None if budget is None else _winner(n1, n2, at_budget),
        })
    return {"budget": budget, "margin": margin, "runs": runs, "pairs": pairs}


def _decision(n1: str, n2: str, r1: FitResult, r2: FitResult,
              refitter: Callable[[str], FixedARefit], margin: float) -> dict[str, Any]:
    out: dict[str, Any] = {"rule": "undetermined", "delta_A": None, "higher_asymptote": None,
                           "fixed_A": None, "B_at_fixed_A": None, "more_efficient": None,
                           "reason": ""}
    if r1.A is None or r2.A is None:
        missing = [_unidentified(n, r) for n, r in ((n1, r1), (n2, r2)) if r.A is None]
        out["reason"] = f"A not identified for {', '.join(missing)}"
        return out
    delta = abs(r1.A - r2.A)
    out["delta_A"] = delta
    if delta > margin:
        out["rule"] = "different_asymptote"
        out["higher_asymptote"] = n1 if r1.A > r2.A else n2
        out["reason"] = f"|dA| = {delta:.3f} > {margin}: the higher asymptote wins"
        return out
    a_fix = (r1.A + r2.A) / 2.0
    f1 = refitter(n1).at(a_fix)
    f2 = refitter(n2).at(a_fix)
    out.update(rule="same_asymptote", fixed_A=a_fix)
    if f1 is None or f2 is None:
        out["reason"] = "fixed-A refit failed"
        return out
    out["B_at_fixed_A"] = {n1: f1[0], n2: f2[0]}
    out["more_efficient"] = n1 if f1[0] >= f2[0] else n2
    out["reason"] = (f"|dA| = {delta:.3f} <= {margin}: same asymptote; refit at A = {a_fix:.3f}, "
                     "the higher B is more efficient")
    return out


def _unidentified(name: str, res: FitResult) -> str:
    """A run without A, and why when it broke: the bound on its new ceiling is what the
    comparison can still say about it."""
    brk = res.break_ or {}
    ceiling = brk.get("ceiling_upper")
    if brk.get("regime") == "fitted" or ceiling is None:
        return name
    return f"{name} (it broke; its ceiling is now at most {float(ceiling):.3f})"


def _cross_grid(fits: list[FitResult], budget: float | None) -> FloatArray | None:
    """From the first fitted compute of any run (below it nothing was fitted) to far past the
    budget and every run's data."""
    los = [r.fit_range[0] for r in fits if r.fit_range and r.params is not None]
    his = [r.fit_range[1] for r in fits if r.fit_range and r.params is not None] + [budget or 0.0]
    if not los:
        return None
    return np.geomspace(min(los), max(his) * 100.0, N_CROSS_GRID)


def _curves(res: FitResult, d: FloatArray, grid: FloatArray
            ) -> tuple[FloatArray, FloatArray] | None:
    """(point curve, curves of the draws ``d``) of one run on the crossover grid."""
    if res.params is None:
        return None
    return (curves_many(grid, np.array([res.params]))[0],
            curves_many(grid, d) if len(d) else np.empty((0, grid.size)))


def _crossover(n1: str, n2: str, grid: FloatArray | None,
               k1: tuple[FloatArray, FloatArray] | None,
               k2: tuple[FloatArray, FloatArray] | None) -> dict[str, Any] | None:
    if grid is None or k1 is None or k2 is None:
        return None
    cross, before = _last_cross(grid, (k1[0] - k2[0])[None, :])
    if not np.isfinite(cross[0]):
        return None
    first_better = before[0] > 0
    out: dict[str, Any] = {
        "compute": float(cross[0]), "interval": None, "probability": None,
        "better_before": n1 if first_better else n2, "better_after": n2 if first_better else n1,
    }
    k = min(len(k1[1]), len(k2[1]))
    if k:
        cx, bf = _last_cross(grid, k1[1][:k] - k2[1][:k])
        same = np.isfinite(cx) & ((bf > 0) == first_better)
        out["probability"] = float(same.mean())
        if same.sum() >= 5:
            out["interval"] = [float(np.quantile(cx[same], 0.025)),
                               float(np.quantile(cx[same], 0.975))]
    return out


def _winner(n1: str, n2: str, at_budget: Mapping[str, tuple[float, FloatArray]]
            ) -> dict[str, Any] | None:
    """The better run at the budget; ``at_budget``: each fitted run's (point value, its draws'
    values) there."""
    if n1 not in at_budget or n2 not in at_budget:
        return None
    (v1, w1), (v2, w2) = at_budget[n1], at_budget[n2]
    win = n1 if v1 >= v2 else n2
    k = min(len(w1), len(w2))
    prob = None
    if k:
        first = w1[:k] > w2[:k]
        prob = float(first.mean() if win == n1 else 1.0 - first.mean())
    return {"run": win, "probability": prob, "predicted": {n1: v1, n2: v2}}
