"""``fit_group``: one recipe fitted on its seeds (the runs of a group) jointly.

The group's result is an ordinary :class:`FitResult` (``pooled``) whose A, intervals and
forecast describe the *recipe*: its mean ceiling, the shared efficiency (B, C_mid) and the
mean curve of its seeds, from the random-effect posterior of ``pooled.py``.  Beside it: each
seed's own fit, the seed spread of A (its posterior and the plain sd of the seeds' own A) and,
per seed, where it sits against the recipe (``offset`` of its ceiling, ``off_curve`` when a
seed broke or its ceiling is clearly off the recipe's).

Which seeds are pooled: those whose own fit has a curve (status ``ok`` or ``unidentified``)
and no break.  A seed that broke is reported (``off_curve``) but left out: its points since
the break follow no sigmoid, and the recipe's curve is what the healthy seeds share.

The prediction interval at the target is for one seed's evaluation there: the recipe's curve
band widened by evaluation noise, the seed spread and the misspecification allowance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .fit import (
    a_lower_bound,
    claim_with_drift,
    fit_curve,
    prepare,
    too_early,
    too_few_to_weigh,
    withheld_because,
)
from .intervals import M_CLIP, a_interval, at_target, drift_rate_at, q95, thin_draws
from .model import value_span
from .pooled import Seed, sample_pooled
from .posterior import posterior_axes
from .result import FitOptions, FitResult

# A seed is off the recipe's curve when its ceiling's 95% interval around the recipe's
# excludes zero and the offset is at least the paper's "same ceiling" margin.
OFF_MARGIN = 0.02

__all__ = ["GroupFitResult", "GroupMember", "fit_group"]


@dataclass(frozen=True)
class GroupMember:
    """One seed: its points and its own fit settings."""

    compute: ArrayLike
    values: ArrayLike
    steps: ArrayLike | None = None
    r0: float | None = None  # this run's given R0 (run settings), else the group's options
    target_compute: float | None = None
    # The member's own fit when the caller already has it (the refitter's stored run fit,
    # made with the same options); fitted here otherwise.  Only its noise model, status and
    # break are used, so a fit made for another target serves as well.
    fit: FitResult | None = None


@dataclass(frozen=True)
class GroupFitResult:
    pooled: FitResult
    members: tuple[FitResult, ...]
    # {"n": seeds pooled, "sd": posterior median of the seed spread of A, "ci": its 95%
    #  interval, "members_A_sd": sd of the seeds' own A (those with status ok)}
    seed_spread: dict[str, Any]
    # per member: {"included", "offset", "offset_ci", "off_curve", "reason"}
    member_info: tuple[dict[str, Any], ...]

    def to_dict(self, internal: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {**self.pooled.to_dict(internal)}
        out["members"] = [{**m.to_dict(internal), **info}
                          for m, info in zip(self.members, self.member_info, strict=True)]
        out["seed_spread"] = dict(self.seed_spread)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupFitResult:
        members = list(d.get("members") or [])
        keys = ("included", "offset", "offset_ci", "off_curve", "reason")
        return cls(
            pooled=FitResult.from_dict({k: v for k, v in d.items()
                                        if k not in ("members", "seed_spread")}),
            members=tuple(FitResult.from_dict(m) for m in members),
            seed_spread=dict(d.get("seed_spread") or {}),
            member_info=tuple({k: m.get(k) for k in keys} for m in members),
        )


def fit_group(
    members: Sequence[GroupMember],
    options: FitOptions = FitOptions(),
    previous: GroupFitResult | None = None,
) -> GroupFitResult:
    """Fit a recipe on its seeds; never raises on bad data (see each result's status)."""
    lo, hi = (float(v) for v in options.value_range)
    target = options.target_compute
    if target is None:
        targets = [float(m.target_compute) for m in members if m.target_compute is not None]
        ends = [float(np.nanmax(np.asarray(m.compute, dtype=float)))
                for m in members if np.size(m.compute)]
        target = max(targets) if targets else (max(ends) if ends else None)
    prev = (previous.members if previous is not None
            and len(previous.members) == len(members) else (None,) * len(members))
    fits, preps, opts = [], [], []
    for mem, pv in zip(members, prev, strict=True):
        o = replace(options, r0=mem.r0 if mem.r0 is not None else options.r0,
                    target_compute=target)
        fits.append(mem.fit if mem.fit is not None else
                    fit_curve(mem.compute, mem.values, o, previous=pv, steps=mem.steps))
        preps.append(prepare(mem.compute, mem.values, o))
        opts.append(o)
    info: list[dict[str, Any]] = []
    pooled_idx: list[int] = []
    for i, f in enumerate(fits):
        reason = ""
        if f.break_ is not None:
            where = (f"step {f.break_['step']}" if f.break_.get("step") is not None
                     else f"compute {float(f.break_['compute']):.4g}")
            reason = f"broke at {where} ({-float(f.break_['drop']):+.3f}); left out of the pool"
        elif f.status == "insufficient_data" or f.sigma is None or f.tau is None or f.q is None:
            reason = f"no curve of its own yet ({f.message or f.status}); left out of the pool"
        else:
            pooled_idx.append(i)
        info.append({"included": not reason, "offset": None, "offset_ci": None,
                     "off_curve": f.break_ is not None, "reason": reason})
    if not pooled_idx:
        pooled = FitResult(status="insufficient_data", target_compute=target,
                           value_range=(lo, hi), n_points=sum(p.y.size for p in preps),
                           message="no seed of this group has a curve to pool yet")
        return GroupFitResult(pooled, tuple(fits), {"n": 0, "sd": None, "ci": None,
                                                    "members_A_sd": _members_sd(fits)},
                              tuple(info))
    pooled, spread = _pooled(fits, preps, pooled_idx, info, options, target)
    spread["members_A_sd"] = _members_sd(fits)
    return GroupFitResult(pooled, tuple(fits), spread, tuple(info))


def _members_sd(fits: Sequence[FitResult]) -> float | None:
    a = [f.A for f in fits if f.status == "ok" and f.A is not None]
    return float(np.std(a, ddof=1)) if len(a) >= 2 else None


def _pooled(
    fits: list[FitResult], preps: list[Any], idx: list[int], info: list[dict[str, Any]],
    options: FitOptions, target: float | None,
) -> tuple[FitResult, dict[str, Any]]:
    lo, hi = (float(v) for v in options.value_range)
    c0 = max(preps[i].c0 for i in idx)
    seeds, xs, eval_var = [], [], []
    for i in idx:
        f, p = fits[i], preps[i]
        x = p.x + np.log(p.c0 / c0)
        xs.append(x)
        s2 = float(f.sigma) ** 2  # type: ignore[arg-type]
        seeds.append(Seed(x, p.y, p.r0, s2))
        eval_var.append(float(f.eval_sd or f.sigma) ** 2)  # type: ignore[arg-type]
    m_axis, b_axis = posterior_axes(min(float(x[0]) for x in xs))
    d = sample_pooled(seeds, (lo, hi), m_axis, b_axis)
    cm = c0 * np.exp(np.clip(d.m, -M_CLIP, M_CLIP))
    r0_mean = d.r0_seeds.mean(axis=1)
    raw = np.column_stack([d.a, d.b, cm, r0_mean])
    stored = thin_draws(raw)
    for j, i in enumerate(idx):
        off = d.a_seeds[:, j] - d.a
        o_lo, o_hi = q95(off)
        med = float(np.median(off))
        clear = (o_lo > 0 or o_hi < 0) and abs(med) >= OFF_MARGIN * value_span((lo, hi))
        info[i].update(offset=med, offset_ci=[o_lo, o_hi], off_curve=bool(clear),
                       reason=(f"its ceiling is {med:+.3f} off the recipe's" if clear else ""))
    fit_range = (min(p.fit_range[0] for p in (preps[i] for i in idx)),
                 max(p.fit_range[1] for p in (preps[i] for i in idx)))
    ci = {"A": a_interval(d.a, (lo, hi)), "B": q95(d.b), "C_mid": q95(cm)}
    drift = drift_rate_at(options.drift_rate, options.drift_allowance, target, fit_range[1],
                          value_span((lo, hi)))
    # One seed's evaluation at the target: evaluation noise plus the seed spread of A.
    spread_var = float(np.mean(d.spread**2))
    eval_sd = float(np.sqrt(np.mean(eval_var) + spread_var))
    q = max(float(fits[i].q) for i in idx)  # type: ignore[arg-type]
    forecast = curve_iv = pred_iv = None
    if target is not None:
        forecast, curve_iv, pred_iv = at_target(target, stored, q, eval_sd, drift,
                                                float(np.log(target / fit_range[1])), (lo, hi))
    draws = tuple(tuple(map(float, r)) for r in stored)
    sources = {preps[i].r0_source for i in idx}
    n_points = int(sum(preps[i].y.size for i in idx))
    rmse = float(np.sqrt(np.mean([float(fits[i].rmse or 0.0) ** 2 for i in idx])))
    a_med = float(np.median(d.a))
    # Seeds evaluated at the same computes share one curve: pooling them quiets the noise but
    # samples the shape no more densely than the longest seed's window does.
    why = (withheld_because(ci["A"], ci["C_mid"], fit_range[1], (lo, hi))
           or too_early(float(np.median(cm)), fit_range[1])
           or too_few_to_weigh(max(preps[i].y.size for i in idx)))
    if why is None:  # as a run's claim: with the drift the project's finished runs showed
        wide, why = claim_with_drift(ci["A"], a_med, options.drift_allowance, target,
                                     fit_range[1], (lo, hi))
        if why is None:
            ci["A"] = wide
    common: dict[str, Any] = dict(
        B=float(np.median(d.b)), C_mid=float(np.median(cm)), R0=float(np.median(r0_mean)),
        r0_source=sources.pop() if len(sources) == 1 else "fitted", ci=ci,
        n_points=n_points, fit_range=fit_range, target_compute=target,
        predicted_at_target=forecast, predicted_interval=pred_iv, rmse=rmse,
        method="default", a_fit=a_med, sigma=float(np.sqrt(np.mean(
            [float(fits[i].sigma) ** 2 for i in idx]))),  # type: ignore[arg-type]
        tau=float(np.mean([float(fits[i].tau) for i in idx])),  # type: ignore[arg-type]
        eval_sd=eval_sd, drift_sd=drift, q=q, curve_interval=curve_iv, value_range=(lo, hi),
        draws=draws,
    )
    k = len(idx)
    spread = {"n": k, "sd": float(np.median(d.spread)) if k >= 2 else None,
              "ci": list(q95(d.spread)) if k >= 2 else None}
    if why is not None:
        a_lo, a_hi = ci["A"]
        result = FitResult(
            status="unidentified", A=None,
            A_lower_bound=a_lower_bound(ci["A"], stored, fit_range[1]),
            message=f"the recipe's A is not pinned down yet by {k} seed(s) (its 95% interval "
                    f"[{a_lo:.3f}, {a_hi:.3f}] {why})", **common)
    else:
        result = FitResult(status="ok", A=a_med, A_lower_bound=ci["A"][0],
                           message=f"pooled over {k} seed(s)", **common)
    return result, spread
