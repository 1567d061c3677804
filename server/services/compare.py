"""Comparing runs: load each run's fit and points through the store, then `compare_fits`.

Shared by `GET /api/v1/compare` (all points) and the dashboard's Compare page (points
downsampled in the database over one shared compute range), so the verdict is computed the
same way in both places.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from server.fitting import FitResult, compare_fits, fit_curve
from server.refit import fit_options_for, public_fit
from server.store.base import PointsPage


def fresh_fit(store: Any, run_id: int, metric: str) -> dict[str, Any]:
    """Fit a run now (nothing stored): used when the refitter has not produced a fit yet."""
    context = store.fit_context(run_id)
    page = store.get_points(run_id, metric)
    result = fit_curve(np.asarray(page.compute), np.asarray(page.values), fit_options_for(context))
    return {**result.to_dict(internal=True), "metric": metric, "message": result.message}


def latest_or_fresh(store: Any, run_id: int, metric: str | None) -> dict[str, Any]:
    """The latest stored fit (with its `internal` block), else a fresh one explaining why."""
    name, stored = store.latest_fit(run_id, metric)
    if stored is None:
        # Never fitted yet (too few points, or a metric the refitter does not follow):
        # fit now so the caller learns why, e.g. "only 3 usable points (need 5)".
        stored = {**fresh_fit(store, run_id, name), "fit_id": None, "fitted_at": None}
    stored.setdefault("metric", name)
    return stored


@dataclass
class CompareInput:
    """One run of a comparison: its record, unique label, stored fit and points."""

    run: dict[str, Any]
    label: str
    fit: dict[str, Any]
    points: PointsPage


def load_compare_inputs(
    store: Any,
    run_ids: list[int],
    metric: str | None = None,
    *,
    max_points: int | None = None,
    shared_range: bool = False,
) -> list[CompareInput]:
    """Runs, fits and points for a comparison (raises `NotFound` for an unknown run).

    With `max_points`, every series is downsampled in the database; with `shared_range` all
    series use one compute range (0 .. the largest last compute), so their buckets line up.
    """
    ids = list(dict.fromkeys(run_ids))
    infos = [store.get_run(i) for i in ids]
    names = [r["name"] for r in infos]
    x_range = None
    if shared_range:
        hi = max((r.get("last_compute") or 0.0) for r in infos) if infos else 0.0
        x_range = (0.0, float(hi)) if hi > 0 else None

    def load(info: dict[str, Any]) -> CompareInput:
        label = info["name"] if names.count(info["name"]) == 1 else f"{info['name']}#{info['id']}"
        stored = latest_or_fresh(store, info["id"], metric)
        page = store.get_points(
            info["id"], stored["metric"], max_points=max_points, x_range=x_range
        )
        return CompareInput(info, label, stored, page)

    if len(infos) <= 1:
        return [load(i) for i in infos]
    # Each series is one aggregate query that runs in the database with the GIL released:
    # a few in parallel overlap the database's work with our decoding.
    with ThreadPoolExecutor(max_workers=min(4, len(infos))) as pool:
        return list(pool.map(load, infos))


def compare_inputs(inputs: list[CompareInput], budget: float | None = None) -> dict[str, Any]:
    """`compare_fits` over loaded inputs (the paper's verdict, crossovers, winner at budget)."""
    series = {
        i.label: (
            np.asarray(i.points.compute, dtype=float),
            np.asarray(i.points.values, dtype=float),
            FitResult.from_dict(i.fit),
        )
        for i in inputs
    }
    return compare_fits(series, budget=budget)


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
            "fit": public_fit(i.fit),
        }
        for i in inputs
    ]
    return {
        "metric": metric,
        "budget": budget,
        "runs": runs,
        "comparison": compare_inputs(inputs, budget),
    }
