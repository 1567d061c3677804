"""From a run's stored settings to the fitting engine's options, and back to the API's view."""

from __future__ import annotations

from typing import Any

from server.fitting import FitOptions


def fit_options_for(context: dict[str, Any], intervals: bool = True) -> FitOptions:
    """FitOptions from a run's fit settings (r0, warmup, fit_until, value_range) and target."""
    fs = context.get("fit_settings") or {}
    value_range = fs.get("value_range") or (0.0, 1.0)
    return FitOptions(
        r0=fs.get("r0"),
        warmup=float(fs.get("warmup") or 0.0),
        fit_until=fs.get("fit_until"),
        target_compute=context.get("target_compute"),
        value_range=(float(value_range[0]), float(value_range[1])),
        intervals=intervals,
    )


def public_fit(stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """The result object the API returns: the engine's public keys plus where it came from."""
    if stored is None:
        return None
    out = {k: v for k, v in stored.items() if k != "internal"}
    internal = stored.get("internal") or {}
    if "message" not in out:
        out["message"] = internal.get("message", "")
    return out
