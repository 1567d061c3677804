"""Comparing runs: load each run's fit and points through the store, then `compare_fits`.

Shared by `GET /api/v1/compare` (all points) and the dashboard's Compare page (points
downsampled in the database over one shared compute range), so the verdict is computed the
same way in both places.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from scalewatch.server.domain.runs import Run
from scalewatch.server.fitting import FitResult, compare_fits
from scalewatch.server.fitting.compare import SAME_A_MARGIN
from scalewatch.server.services.fits import latest_or_pending_many, public_fit
from scalewatch.server.store.base import PointsPage, Store
from scalewatch.server.store.fit_records import FitRecord

log = logging.getLogger("scalewatch.compare")


class MixedMetrics(ValueError):
    """Runs fitted on different metrics, and no `metric` given: comparing them would mix
    curves of different quantities under one title (a 422 naming each run's metric)."""


class Fitted(Protocol):
    """Something with a name fitted on a metric: a run, a group's member, a group."""

    @property
    def name(self) -> str: ...
    @property
    def fit_metric(self) -> str: ...


@dataclass(frozen=True)
class FittedAs:
    name: str
    fit_metric: str


def common_metric(infos: Sequence[Fitted], metric: str | None) -> str | None:
    """The one metric a comparison uses: `metric` when given, else the runs' common fit metric;
    raises `MixedMetrics` naming the metrics when the runs' fit metrics differ."""
    if metric:
        return metric
    by_metric: dict[str, list[str]] = {}
    for info in infos:
        by_metric.setdefault(info.fit_metric, []).append(info.name)
    if len(by_metric) <= 1:
        return next(iter(by_metric), None)
    listing = "; ".join(f"{m}: {', '.join(names)}" for m, names in sorted(by_metric.items()))
    raise MixedMetrics(
        f"these runs are fitted on different metrics ({listing}); choose one with metric="
    )


@dataclass
class CompareInput:
    """One run of a comparison: its record, unique label, stored fit and points. `run` is the
    run's record as JSON (`Run.model_dump()`: the comparison's cache key and response read it),
    or a group's id (None), name, project and group."""

    run: dict[str, Any]
    label: str
    fit: FitRecord
    points: PointsPage


def load_compare_inputs(
    store: Store,
    run_ids: list[int],
    metric: str | None = None,
    *,
    max_points: int | None = None,
    shared_range: bool = False,
) -> list[CompareInput]:
    """Runs, fits and points for a comparison, all of one metric (`common_metric`); raises
    `NotFound` for an unknown run and `MixedMetrics` for runs fitted on different metrics.

    With `max_points`, every series is downsampled in the database; with `shared_range` all
    series use one compute range (0 .. the largest last compute), so their buckets line up.
    """
    ids = list(dict.fromkeys(run_ids))
    infos = store.get_runs(ids)  # one read for every run
    metric = common_metric(infos, metric)  # one metric for every run, or MixedMetrics
    names = [r.name for r in infos]
    x_range = None
    if shared_range:
        hi = max((r.last_compute or 0.0) for r in infos) if infos else 0.0
        x_range = (0.0, float(hi)) if hi > 0 else None

    def label(info: Run) -> str:
        return info.name if names.count(info.name) == 1 else f"{info.name}#{info.id}"

    if metric is None:  # no runs
        return []
    fits = latest_or_pending_many(store, ids, metric)  # every run's fit in one read
    if max_points is not None:
        # Downsampled: every run's points in a few queries (the Compare page).
        pages = store.get_points_many(ids, metric, max_points=max_points, x_range=x_range)
        return [CompareInput(i.model_dump(), label(i), fits[i.id], pages[i.id]) for i in infos]

    def load(info: Run) -> CompareInput:
        page = store.get_points(info.id, metric, x_range=x_range)
        return CompareInput(info.model_dump(), label(info), fits[info.id], page)

    if len(infos) <= 1 or store.dialect != "postgresql":
        # SQLite runs in this process: threads only contend for the GIL (4 threads made ten
        # series 4x slower than one after the other).
        return [load(i) for i in infos]
    # Every point of each run (`GET /compare`): one query a series, running in the database
    # with the GIL released, so a few in parallel overlap its work with our decoding.
    with ThreadPoolExecutor(max_workers=min(4, len(infos))) as pool:
        return list(pool.map(load, infos))


class _ComparisonCache:
    """Comparisons already computed, by everything they depend on (`_key`): a live Compare page
    re-renders every few seconds and on each budget change, and the engine's fixed-A refits,
    crossovers and winning probabilities cost ~100 ms for ten runs. A key names immutable
    inputs (a stored fit's id and time, a digest of the points), so an entry is never stale:
    new points or a new fit make a new key."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
        return copy.deepcopy(hit) if hit is not None else None  # callers may change theirs

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = copy.deepcopy(value)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


COMPARISONS = _ComparisonCache()


def _key(inputs: list[CompareInput], budget: float | None) -> tuple[Any, ...] | None:
    """What a comparison depends on: each input's label, run (None for a group), stored fit
    (id and time: a stored fit never changes) and points (a digest of them: the fixed-A
    refits read them). None when a fit with parameters has no id (not a stored fit)."""
    parts: list[tuple[Any, ...]] = []
    for i in inputs:
        fit = i.fit
        ident: tuple[Any, ...] = (fit.get("fit_id"), fit.get("fitted_at"))
        if None in ident:
            if fit.get("B") is not None:
                return None
            ident = (fit.get("status"), fit.get("message"))  # no curve: nothing else is read
        h = hashlib.blake2b(digest_size=16)
        h.update(np.asarray(i.points.compute, dtype=float).tobytes())
        h.update(np.asarray(i.points.values, dtype=float).tobytes())
        parts.append((i.label, i.run.get("id"), fit.get("metric"), *ident, h.digest()))
    return (budget, tuple(parts))


def compare_inputs(inputs: list[CompareInput], budget: float | None = None) -> dict[str, Any]:
    """`compare_fits` over loaded inputs, runs or groups (as their pooled fits): the paper's
    verdict, crossovers, winner at budget; answered from `COMPARISONS` when nothing it depends
    on changed.

    When the engine raises (the same-asymptote rule refits every stored point at a fixed A,
    including points the run's warmup / fit_until kept out of its own fit, e.g. compute of
    1e-300), the answer is the runs without a verdict and a `message` saying why: the caller
    still shows each run's fit, and nothing answers a 500.
    """
    key = _key(inputs, budget)
    if key is not None and (hit := COMPARISONS.get(key)) is not None:
        return hit
    try:
        series = {
            i.label: (
                np.asarray(i.points.compute, dtype=float),
                np.asarray(i.points.values, dtype=float),
                FitResult.from_dict(i.fit),
            )
            for i in inputs
        }
        result = compare_fits(series, budget=budget)
    except Exception as exc:  # noqa: BLE001 - any engine failure becomes a message
        log.exception("comparing %s failed", [i.run["id"] for i in inputs])
        return {
            "budget": budget,
            "margin": SAME_A_MARGIN,
            "runs": {
                i.label: {k: i.fit.get(k) for k in ("status", "A", "A_lower_bound", "B", "C_mid",
                                                   "R0")}
                for i in inputs
            },
            "pairs": [],
            "message": f"comparison failed: {type(exc).__name__}: {exc}"[:500],
        }  # not cached: the next render tries again
    if key is not None:
        COMPARISONS.put(key, result)
    return result


def api_response(
    inputs: list[CompareInput], metric: str | None, budget: float | None
) -> dict[str, Any]:
    """The body of `GET /api/v1/compare`."""
    runs = [
        {
            "id": i.run["id"],
            "name": i.run["name"],
            "project": i.run["project"],
            "label": i.label,
            "metric": i.fit["metric"],
            "compute_unit": i.run.get("compute_unit"),
            "fit": public_fit(i.fit),
            **({"group": i.run["group"]} if i.run.get("id") is None else {}),
        }
        for i in inputs
    ]
    return {
        "metric": inputs[0].fit["metric"] if inputs else metric,  # the one metric compared
        "budget": budget,
        "runs": runs,
        "comparison": compare_inputs(inputs, budget),
    }
