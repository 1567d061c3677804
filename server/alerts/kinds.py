"""The registry of alert rule kinds: one entry per kind, read by everything that knows kinds.

Each entry (`KindSpec`) says what the kind watches (which of the hooks it fills: a run's fits,
a group's pooled fits, each seed of a group, a run's liveness on a timer), its verdict on each,
its parameters (defaults and bounds, checked by ``rules.normalize_params``), any further check
of them (``check``), and its description for the API docs and the dashboard's form. The rule
validation (``checks.py``), the evaluation (``service.py``), the API schema (``RuleCreate``'s
``params`` help; its enum is ``AlertKind``) and the dashboard's kind choices all read `KINDS`.

Adding a kind: a member of ``AlertKind`` (``server/domain/alerts.py``: the stored string) and a
`register` call here. Importing this module fails when the two disagree, when a kind is
registered twice, or when an entry watches nothing, so no kind can be evaluated silently as
"no verdict".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from scalewatch.server.alerts import evaluate as ev
from scalewatch.server.alerts.groups import seed_off_curve
from scalewatch.server.domain.alerts import AlertKind, WatchedRun
from scalewatch.server.store.base import NotFound, RunStore

Fit = Mapping[str, Any]


@dataclass(frozen=True)
class Param:
    """One parameter of a kind: its default (None: required), bounds and number type."""

    default: float | None
    low: float  # exclusive
    high: float  # inclusive
    type: type[int] | type[float]


class FitEvidence(Protocol):
    """What a verdict on a new fit may read: the fit, the one before it, whether an alert of
    the rule is already active (hysteresis), and the reads some kinds need, made on demand.
    A run's and a group's evidence (``service.py``) answer the same questions."""

    @property
    def fit(self) -> Fit: ...
    @property
    def previous(self) -> Fit | None: ...
    @property
    def active(self) -> bool: ...
    def best_ok_fit(self) -> Fit | None: ...
    def baseline(self, run_id: int) -> tuple[str | None, Fit | None]: ...
    def last_points(self, n: int) -> tuple[list[float], list[float]]: ...
    def last_ok_fit_before(self, compute: float) -> Fit | None: ...


Params = dict[str, Any]
FitVerdict = Callable[[Params, FitEvidence], ev.Verdict]
# (params, one member of the group fit, the pooled fit) -> the verdict on that seed
SeedVerdict = Callable[[Params, Fit, Fit], ev.Verdict]
TimerVerdict = Callable[[Params, WatchedRun, datetime], ev.Verdict]
# (the store, the params with defaults) -> why the rule cannot work, or None
ParamsCheck = Callable[[RunStore, Params], "str | None"]


@dataclass(frozen=True)
class KindSpec:
    kind: AlertKind
    help: str  # what fires it, for the API docs and the dashboard's form
    params: dict[str, Param] = field(default_factory=dict)
    on_run_fit: FitVerdict | None = None  # after each stored fit of a run's fit metric
    on_group_fit: FitVerdict | None = None  # after each pooled fit of a group
    on_group_seeds: SeedVerdict | None = None  # each seed, after each pooled fit of a group
    on_timer: TimerVerdict | None = None  # each running run, every `alert_interval`
    check: ParamsCheck | None = None

    @property
    def name(self) -> str:
        return self.kind.value

    @property
    def watches(self) -> tuple[str, ...]:
        """What the kind watches, in words (the dashboard's form and the docs)."""
        hooks = ((self.on_run_fit, "each fit of a run"),
                 (self.on_group_fit, "a group's pooled fit"),
                 (self.on_group_seeds, "each seed of a group"),
                 (self.on_timer, "a run's liveness"))
        return tuple(words for hook, words in hooks if hook is not None)

    @property
    def for_groups(self) -> bool:
        return self.on_group_fit is not None or self.on_group_seeds is not None

    @property
    def groups_only(self) -> bool:
        return self.for_groups and self.on_run_fit is None and self.on_timer is None


KINDS: dict[AlertKind, KindSpec] = {}


def register(spec: KindSpec) -> KindSpec:
    """Add a kind; refuses a name that is not an `AlertKind`, a second entry, or an entry that
    watches nothing (it would never fire)."""
    if not isinstance(spec.kind, AlertKind):
        raise TypeError(f"{spec.kind!r} is not an AlertKind: add it to server/domain/alerts.py")
    if spec.kind in KINDS:
        raise ValueError(f"alert kind {spec.name} is registered twice")
    if not spec.watches:
        raise ValueError(f"alert kind {spec.name} watches nothing: give it a verdict hook")
    KINDS[spec.kind] = spec
    return spec


def spec_of(kind: str) -> KindSpec:
    """The entry of a stored kind; KeyError names a kind with none (never silently nothing)."""
    try:
        return KINDS[AlertKind(kind)]
    except ValueError:
        raise KeyError(f"unknown alert kind {kind!r}") from None


# ---- the kinds ------------------------------------------------------------------------------


def _asymptote_drop(params: Params, e: FitEvidence) -> ev.Verdict:
    return ev.asymptote_drop(params, e.fit, e.best_ok_fit(), e.active)


def _asymptote_below(params: Params, e: FitEvidence) -> ev.Verdict:
    return ev.asymptote_below(params, e.fit, e.previous, e.active)


def _below_baseline(params: Params, e: FitEvidence) -> ev.Verdict:
    name, base = e.baseline(int(params["baseline_run_id"]))
    return ev.below_baseline(params, e.fit, base, name, e.active)


def _baseline_exists(store: RunStore, params: Params) -> str | None:
    try:
        store.get_run(params["baseline_run_id"])
    except NotFound:
        return f"baseline run {params['baseline_run_id']} does not exist"
    return None


def _off_curve(params: Params, e: FitEvidence) -> ev.Verdict:
    n = int(params["n"])
    compute, values = e.last_points(n)
    if len(compute) < n:
        return ev.NO_VERDICT
    return ev.off_curve(params, e.last_ok_fit_before(min(compute)), compute, values, e.fit)


def _stalled(params: Params, run: WatchedRun, now: datetime) -> ev.Verdict:
    return ev.stalled(params, run.status, run.last_seen_at, now)


def _seed_off_curve(_params: Params, member: Fit, pooled: Fit) -> ev.Verdict:
    return seed_off_curve(member, pooled)


register(KindSpec(
    AlertKind.asymptote_drop,
    "the fitted A fell at least `delta` below the best A of the run, beyond noise (the A "
    "intervals no longer overlap)",
    {"delta": Param(0.02, 0.0, 1e6, float)},  # the paper's margin for "different asymptote"
    on_run_fit=_asymptote_drop, on_group_fit=_asymptote_drop,
))
register(KindSpec(
    AlertKind.asymptote_below,
    "the upper end of A's 95% interval is below `threshold`",
    {"threshold": Param(None, -1e12, 1e12, float)},
    on_run_fit=_asymptote_below, on_group_fit=_asymptote_below,
))
register(KindSpec(
    AlertKind.below_baseline,
    "A's interval lies wholly below the A of `baseline_run_id`",
    {"baseline_run_id": Param(None, 0, 2**31 - 1, int)},
    on_run_fit=_below_baseline, check=_baseline_exists,
))
register(KindSpec(
    AlertKind.stalled,
    "a running run has logged no points for `minutes`",
    {"minutes": Param(None, 0.0, 60 * 24 * 365, float)},
    on_timer=_stalled,
))
register(KindSpec(
    AlertKind.off_curve,
    "the last `n` points are more than `k` residual scales off the last good fit, all on the "
    "same side (collapse, divergence)",
    {"n": Param(3, 0, 1000, int), "k": Param(4.0, 0.0, 1e6, float)},
    on_run_fit=_off_curve,
))
register(KindSpec(
    AlertKind.seed_off_curve,
    "(a group rule) one seed of the group fell off the recipe's curve: it broke, or its "
    "ceiling is clearly off the group's pooled A; one alert per seed",
    on_group_seeds=_seed_off_curve,
))

_missing = [k.value for k in AlertKind if k not in KINDS]
if _missing:  # a kind the API would accept and the evaluation would never judge
    raise RuntimeError(f"alert kinds without a registry entry: {', '.join(_missing)}")

ALERT_KINDS: tuple[str, ...] = tuple(k.value for k in KINDS)
# Kinds evaluated after every stored fit of a run.
FIT_KINDS: tuple[str, ...] = tuple(s.name for s in KINDS.values() if s.on_run_fit)
# Kinds evaluated on a timer (their rules cover running runs).
TIMER_KINDS: tuple[str, ...] = tuple(s.name for s in KINDS.values() if s.on_timer)
# Kinds a rule naming a group may have: evaluated after every stored fit of the group.
GROUP_KINDS: tuple[str, ...] = tuple(s.name for s in KINDS.values() if s.for_groups)
# Kinds that only make sense for a group.
GROUP_ONLY_KINDS: tuple[str, ...] = tuple(s.name for s in KINDS.values() if s.groups_only)
