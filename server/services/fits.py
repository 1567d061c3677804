"""Fits between the engine and the rest: options from a run's settings, the record the store
keeps and the API returns, and the read path ("latest fit, else queue one").

Shared by the refitter (which writes fits), the REST API and the dashboard (which read them),
so neither reader depends on the background worker and a fit looks the same everywhere.
"""

from __future__ import annotations

from typing import Any, cast

from scalewatch.server.domain.runs import FitInputs, Run
from scalewatch.server.fitting import FitOptions, FitResult
from scalewatch.server.fitting.b_prior import learn_b_prior, log_b_estimate
from scalewatch.server.fitting.hindcast import allowance_knots
from scalewatch.server.fitting.noise_prior import learn_rho_prior
from scalewatch.server.store.base import FitStore
from scalewatch.server.store.fit_records import FitRecord, PublicFit


def noise_prior_for(context: FitInputs) -> tuple[float, float] | None:
    """The run's opt-in noise prior: explicit ``[mean, sd]`` of rho, or ``"project"``: learned
    from the project's finished runs (``project_noise`` in the context; none yet: no prior)."""
    setting = context.fit_settings.get("noise_prior")
    if setting == "project":
        return learn_rho_prior(context.project_noise or [])
    if isinstance(setting, (list, tuple)) and len(setting) == 2:
        return float(setting[0]), float(setting[1])
    return None


def b_prior_for(context: FitInputs) -> tuple[float, float] | None:
    """The run's opt-in prior on B: explicit ``[centre, scale]`` of ln B, or ``"project"``:
    learned from the B intervals of the project's finished, identified runs (``project_b``;
    fewer than three: no prior)."""
    setting = context.fit_settings.get("b_prior")
    if setting == "project":
        return learn_b_prior(log_b_estimate(ci) for ci in context.project_b or [])
    if isinstance(setting, (list, tuple)) and len(setting) == 2:
        return float(setting[0]), float(setting[1])
    return None


def drift_allowance_for(context: FitInputs) -> tuple[tuple[float, float], ...] | None:
    """The drift allowance the project's finished runs needed beyond their own forecasts
    from 1/2, 1/3 and 1/5 of their compute (``project_hindcasts``: per run, its hindcasts in
    ``hindcast.HORIZON_FRACTIONS`` order): knots per horizon (``hindcast.allowance_knots``),
    their level the 95% conformal rank among all those hindcasts' needs and their shape
    across horizons learned from them, once enough runs vouch for it
    (``hindcast.MIN_HINDCASTS``); else None: the default allowance.
    A fit takes it at its own ln(target / window end) (``intervals.drift_rate_at``), for its
    forecast interval and for a claim of A (``intervals.a_with_drift``).

    On for every project, unlike the priors: it assumes nothing about the runs being alike
    (a split-conformal rank of their misses holds for any mix of them), and it is the only
    way a project whose runs follow the sigmoid gets forecast intervals as narrow as they
    can honestly be, and one whose runs drift gets intervals that hold."""
    return allowance_knots(context.project_hindcasts or [])


def fit_options_for(context: FitInputs, intervals: bool = True) -> FitOptions:
    """FitOptions from a run's fit settings (r0, warmup, fit_until, value_range, noise_prior,
    b_prior), its target and the drift rate its project's finished runs needed."""
    fs = context.fit_settings
    value_range = fs.get("value_range") or (0.0, 1.0)
    return FitOptions(
        r0=fs.get("r0"),
        warmup=float(fs.get("warmup") or 0.0),
        fit_until=fs.get("fit_until"),
        target_compute=context.target_compute,
        value_range=(float(value_range[0]), float(value_range[1])),
        intervals=intervals,
        noise_prior=noise_prior_for(context),
        drift_allowance=drift_allowance_for(context),
        # A finished run is fitted on its own B: it is what the project's prior is learned
        # from, and a prior that fed back into its own teachers would narrow on itself.
        b_prior=None if context.status == "finished" else b_prior_for(context),
    )


def prior_source(record: FitRecord, context: FitInputs, options: FitOptions) -> FitRecord:
    """Say in the record's ``prior`` where a learned prior came from (how many finished runs),
    and the drift rate the fit took from the project's hindcasts (``drift_allowance_for``, at
    the fit's own distance past its window) when the fit has a curve that rate widens."""
    prior = record.get("prior")
    settings = context.fit_settings
    learned_from: dict[str, Any] = dict(prior) if isinstance(prior, dict) else {}
    if settings.get("noise_prior") == "project" and "rho" in learned_from:
        learned_from.update(source="project",
                            finished_runs=len(context.project_noise or []))
    rate = (record.get("internal") or {}).get("drift_sd")
    if (options.drift_allowance is not None and rate is not None
            and record.get("status") in ("ok", "unidentified")):
        learned_from["drift_rate"] = round(float(rate), 4)
        learned_from["hindcasts"] = len(context.project_hindcasts or [])
    if settings.get("b_prior") == "project" and isinstance(learned_from.get("B"), dict):
        learned_from["B"] = {**learned_from["B"], "source": "project",
                             "finished_runs": len(context.project_b or [])}
    if learned_from:
        record["prior"] = learned_from
    return record


def fit_record(result: FitResult, *, internal: bool = True, **extra: Any) -> FitRecord:
    """The engine's result as a record, plus `extra` keys (metric, fit_seconds, ...).

    The one place `message` joins the public keys: the engine keeps it internal, but why a
    fit is `unidentified` or `insufficient_data` is what a user asks first. `internal=False`
    leaves out the draws and noise model (a stateless fit returns nothing to redraw from).
    """
    record: dict[str, Any] = {**result.to_dict(internal=internal), "message": result.message}
    record.update(extra)
    return cast(FitRecord, record)  # the engine's public keys, message, and `extra`


def public_fit(stored: FitRecord | None) -> PublicFit | None:
    """What the API returns for a stored record: everything but the `internal` blocks (a
    group fit's members carry one each)."""
    if stored is None:
        return None
    out: dict[str, Any] = {k: v for k, v in stored.items() if k != "internal"}
    if isinstance(out.get("members"), list):
        out["members"] = [{k: v for k, v in m.items() if k != "internal"}
                          for m in out["members"]]
    return cast(PublicFit, out)  # a FitRecord minus `internal`


def with_metric_warning(fit: PublicFit | dict[str, Any], run: Run) -> PublicFit:
    """A run's default fit with the run's `fit_metric_warning` (a training reward fitted while
    a validation-looking metric exists), so a client reading only the fit is told too."""
    warning = run.fit_metric_warning
    return cast(PublicFit, {**fit, "fit_metric_warning": warning} if warning else fit)


def not_fitted(metric: str, queued: bool) -> FitRecord:
    """The record answered while no fit is stored: `pending` when one is queued."""
    if queued:
        result = FitResult(status="pending", message=f"not fitted yet: a fit of {metric} is queued")
    else:
        result = FitResult(status="insufficient_data", message=f"no points of {metric} yet")
    return fit_record(result, internal=False, metric=metric, fit_id=None, fitted_at=None)


def latest_or_pending(store: FitStore, run_id: int, metric: str | None) -> FitRecord:
    """The latest stored fit of a run's metric (default: its fit metric), never fitting here.

    A metric without a stored fit answers `not_fitted`. Reading a fit also asks for one when
    the stored fit is older than the series (ingest queues only the fit metric), so any
    metric someone looks at gets fitted, by the refitter, from the points it then has.
    Raises `NotFound` for an unknown run.
    """
    name, stored = store.latest_fit(run_id, metric)
    queued = store.request_fit(run_id, name)
    if stored is None:
        return not_fitted(name, queued)
    if "metric" not in stored:
        stored["metric"] = name
    return stored


def latest_or_pending_many(
    store: FitStore, run_ids: list[int], metric: str
) -> dict[int, FitRecord]:
    """`latest_or_pending(store, run, metric)` of every run, by run id, in one store read."""
    out: dict[int, FitRecord] = {}
    for run_id, (stored, queued) in store.latest_fits(run_ids, metric).items():
        if stored is None:
            out[run_id] = not_fitted(metric, queued)
            continue
        if "metric" not in stored:
            stored["metric"] = metric
        out[run_id] = stored
    return out
