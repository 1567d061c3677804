"""The shape of a stored fit: what the store hands back for a fit row and the API returns.

Defined here, not in `scalewatch.server.fitting`, because it is a storage and wire format: the
fitting engine produces a `FitResult`; `scalewatch.server.services.fits` turns it into a
`FitRecord` (the one place that does), the store keeps it as JSON, and the API and dashboard
read it back. Plain typed dicts (not dataclasses) so a record goes to JSON and back without
conversion.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from scalewatch.server.store.common import iso

# "pending": no fit stored yet and one is queued (see
# `scalewatch.server.services.fits.latest_or_pending`); the other three are
# `scalewatch.server.fitting.result.STATUSES`.
FitStatus = Literal["ok", "unidentified", "insufficient_data", "pending"]

Interval = list[float | None]


# "break" is a Python keyword, so that one key is declared with the functional syntax: a
# lasting fall below the curve the run was on, or None (README "A fit result").
_BreakKey = TypedDict("_BreakKey", {"break": dict[str, Any] | None}, total=False)


class PublicFit(_BreakKey, total=False):
    """The fit result object of the REST API (README "A fit result")."""

    status: str  # a FitStatus
    A: float | None
    B: float | None
    C_mid: float | None
    R0: float | None
    r0_source: str
    ci: dict[str, Interval | None] | None
    A_lower_bound: float | None
    n_points: int
    fit_range: Interval | None
    target_compute: float | None
    predicted_at_target: float | None
    predicted_interval: Interval | None
    rmse: float | None
    method: str
    # The prior used beyond the defaults, or None: {"rho": {"mean", "sd"}} and, when learned
    # from the project's finished runs, "source": "project" and "finished_runs".
    prior: dict[str, Any] | None
    # Why A is withheld (reason codes and sentences, the compute that would identify it), or
    # None when A is claimed (README "A fit result"; ``fitting/withheld.py``).
    withheld: dict[str, Any] | None
    message: str  # why the status is what it is, in words
    metric: str
    fit_id: int | None  # None: not stored (pending, or a metric without points)
    fitted_at: str | None  # ISO time the fit was stored
    fit_seconds: float
    # Fitted after the fact on the points up to its compute, because they arrived at once
    # (an import, a spool synced late): ``server/refit/backfill.py``.  Absent on live fits.
    backfilled: bool


class FitRecord(PublicFit, total=False):
    """A stored fit: the public object plus the engine's `internal` block (noise model,
    parameter draws) that lets `FitResult.from_dict` redraw bands and warm-start the next fit."""

    internal: dict[str, Any]


class FitHistoryEntry(_BreakKey, TypedDict):
    """One row of `GET /runs/{id}/fits`: how A moved as compute grew."""

    id: int
    created_at: str | None
    status: str
    n_points: int
    max_compute: float | None
    A: float | None
    A_ci: list[float | None] | None
    has_intervals: bool
    A_lower_bound: float | None
    B: float | None
    C_mid: float | None
    predicted_at_target: float | None
    backfilled: bool
    withheld: dict[str, Any] | None


# What a history row keeps of a fit's break: where it started, how far the run fell and the
# most its new ceiling can be -- the A that a broken fit withholds, so the A history does not
# fall silent exactly when the ceiling drops.
BREAK_HISTORY_KEYS = ("compute", "step", "drop", "ceiling_upper", "regime")


def history_entry(row: Any) -> FitHistoryEntry:
    """A history row from a stored fit row (run fit or group fit: the same columns)."""
    res = row.result or {}
    brk = res.get("break")
    return {
        "id": row.id,
        "created_at": iso(row.created_at),
        "status": row.status,
        "n_points": row.n_points,
        "max_compute": row.max_compute,
        "A": row.A,
        "A_ci": [row.A_lo, row.A_hi] if row.A_lo is not None else None,
        "has_intervals": row.has_intervals,
        "A_lower_bound": res.get("A_lower_bound"),
        "B": res.get("B"),
        "C_mid": res.get("C_mid"),
        "predicted_at_target": res.get("predicted_at_target"),
        "backfilled": bool(res.get("backfilled")),
        "withheld": res.get("withheld"),
        "break": {k: brk.get(k) for k in BREAK_HISTORY_KEYS} if brk else None,
    }


# The compact view carried by run lists (`run["fit"]`); the full record comes from /fit.
SUMMARY_KEYS = (
    "status",
    "A",
    "B",
    "C_mid",
    "R0",
    "ci",
    "A_lower_bound",
    "n_points",
    "target_compute",
    "predicted_at_target",
    "predicted_interval",
    "metric",
    "fitted_at",
    "message",
    "break",
    "prior",
    "withheld",
)


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
