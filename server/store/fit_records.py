"""The shape of a stored fit: what the store hands back for a fit row and the API returns.

The fit itself is declared once, by ``FitResult``'s fields (``server/fitting/result.py``): its
public JSON object (``FitJSON``), which keys run lists and fit histories carry. What is declared
here is what a stored fit adds (where it came from, the engine's ``internal`` block) and the
row columns a history entry adds. `scalewatch.server.services.fits` turns a `FitResult` into a
`FitRecord` (the one place that does), the store keeps it as JSON, and the API and dashboard read
it back. Plain typed dicts (not dataclasses) so a record goes to JSON and back without
conversion.
"""

from __future__ import annotations

from typing import Any, TypedDict

from scalewatch.server.fitting.result import (
    BREAK_HISTORY_KEYS,
    HISTORY_FIT_KEYS,
    SUMMARY_FIT_KEYS,
    FitJSON,
    FitStatus,
)
from scalewatch.server.store.common import iso

__all__ = ["BREAK_HISTORY_KEYS", "FitHistoryEntry", "FitRecord", "FitStatus", "PublicFit",
           "SUMMARY_KEYS", "fit_columns", "fit_summary", "history_entry"]


class PublicFit(FitJSON, total=False):
    """The fit result object of the REST API (README "A fit result"): the engine's public
    object plus where a stored fit came from."""

    message: str  # why the status is what it is, in words
    metric: str
    fit_id: int | None  # None: not stored (pending, or a metric without points)
    fitted_at: str | None  # ISO time the fit was stored
    fit_seconds: float
    # Fitted after the fact on the points up to its compute, because they arrived at once
    # (an import, a spool synced late): ``server/refit/backfill.py``.  Absent on live fits.
    backfilled: bool
    # Set on a run's default fit when it is a training reward although the run logs a
    # validation-looking metric (``services.fits.with_metric_warning``).
    fit_metric_warning: str


class FitRecord(PublicFit, total=False):
    """A stored fit: the public object plus the engine's `internal` block (noise model,
    parameter draws) that lets `FitResult.from_dict` redraw bands and warm-start the next fit."""

    internal: dict[str, Any]


class HistoryRow(TypedDict):
    """What a history entry takes from the fit row's own columns rather than its result."""

    id: int
    created_at: str | None
    max_compute: float | None
    A_ci: list[float | None] | None
    has_intervals: bool
    backfilled: bool


class FitHistoryEntry(HistoryRow, total=False):
    """One row of `GET /runs/{id}/fits`: how A moved as compute grew. The row's columns plus
    the fit keys `FitResult` marks for histories (``HISTORY_FIT_KEYS``); typed for the ones
    code reads."""

    status: FitStatus
    n_points: int
    A: float | None
    A_lower_bound: float | None
    B: float | None
    C_mid: float | None
    predicted_at_target: float | None
    withheld: dict[str, Any] | None


def history_entry(row: Any) -> FitHistoryEntry:
    """A history row from a stored fit row (run fit or group fit: the same columns)."""
    res = row.result or {}
    entry: dict[str, Any] = {}
    for key, kept in HISTORY_FIT_KEYS.items():
        value = res.get(key)
        if isinstance(kept, tuple):  # an object of which the history keeps some keys
            value = {k: value.get(k) for k in kept} if value else None
        entry[key] = value
    # The row's own columns: the same values as the result's (``fit_columns``), kept
    # where lists and alerts filter on them without loading results.
    entry.update(status=row.status, n_points=row.n_points, A=row.A)
    row_columns: HistoryRow = {
        "id": row.id,
        "created_at": iso(row.created_at),
        "max_compute": row.max_compute,
        "A_ci": [row.A_lo, row.A_hi] if row.A_lo is not None else None,
        "has_intervals": row.has_intervals,
        "backfilled": bool(res.get("backfilled")),
    }
    return {**row_columns, **entry}  # type: ignore[typeddict-item]  # HISTORY_FIT_KEYS


# The compact view carried by run lists (`run["fit"]`); the full record comes from /fit:
# the fit keys `FitResult` marks for it, and where the fit came from.
SUMMARY_KEYS = (*SUMMARY_FIT_KEYS, "metric", "fitted_at", "message")


def fit_summary(result: FitRecord | dict[str, Any] | None) -> dict[str, Any] | None:
    """The compact fit view carried by run lists (full result comes from /fit)."""
    if not result:
        return None
    # noise_rho: the posterior (mean, sd) of the noise's AR(1) coefficient, what a project's
    # noise prior is learned from (``fitting/noise_prior.py``) without parsing full results.
    internal = result.get("internal") or {}
    summary = {**{k: result.get(k) for k in SUMMARY_KEYS}, "noise_rho": internal.get("rho")}
    # hindcast: on a finished run's fit only (null: it has too few points for one), what a
    # project's drift allowance is learned from (``fitting/hindcast.py``): one [miss, sd,
    # beyond] per horizon (or null), or a single one in fits stored before the horizons.
    if "hindcast" in internal:
        summary["hindcast"] = internal["hindcast"]
    return summary


def fit_columns(result: FitRecord | dict[str, Any], has_intervals: bool) -> dict[str, Any]:
    """The columns every stored fit row has, run fit and group fit alike: the result and the
    summary the lists and alert reads filter on without loading it."""
    a_ci = (result.get("ci") or {}).get("A") or [None, None]
    return {
        "status": result.get("status", "?"),
        "n_points": int(result.get("n_points") or 0),
        "max_compute": (result.get("fit_range") or [None, None])[1],
        "A": result.get("A"),
        "A_lo": a_ci[0],
        "A_hi": a_ci[1],
        "has_intervals": has_intervals,
        "result": result,
    }
