"""Data shaping for the dashboard: store in, plain dicts out (no Dash, no plotly).

Every read goes through the Store, the same one the REST API uses.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from scalewatch.dashboard.checks import MAX_SAFE_INT
from scalewatch.dashboard.figures import a_text, fmt, forecast_text, run_color, unit_label
from scalewatch.server import limits
from scalewatch.server.domain.alerts import Alert
from scalewatch.server.domain.checks import parse_id
from scalewatch.server.domain.runs import Run
from scalewatch.server.scopes import redact_delivery
from scalewatch.server.services.compare import MixedMetrics, compare_inputs, load_compare_inputs
from scalewatch.server.services.fits import latest_or_pending
from scalewatch.server.store.base import NotFound, PointsPage, RunQuery, Store

MAX_SCREEN_POINTS = 2000  # per series on screen; longer series are downsampled in the database
MAX_TABLE_RUNS = 5000


def _round(v: float | None, digits: int = 4) -> float | None:
    if v is None:
        return None
    return float(f"{v:.{digits}g}")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!<>|~])")


def utc_text(value: str | None) -> str:
    """A stored ISO time as the tables show it: "2026-12-02 07:25:11" (UTC, to the second)."""
    return (value or "")[:19].replace("T", " ")


def md_text(value: Any) -> str:
    """User text (a run name) placed inside table markdown: every markdown character escaped,
    so a name cannot become an image, a link or markup."""
    return _MD_SPECIAL.sub(r"\\\1", str(value))


def group_href(project: str, group: str) -> str:
    """The Group page of (project, group); both are user text, so both are URL-encoded."""
    return "/dashboard/group?" + urlencode({"project": project, "group": group})


def group_link(project: str, group: str | None) -> str:
    """Markdown for a table cell: the group's name (escaped) linking to its page."""
    if not group:
        return ""
    return f"[{md_text(group)}]({group_href(project, group)})"


def projects(store: Store) -> list[str]:
    return store.list_projects()


def open_alert_counts(store: Store, run_ids: list[int]) -> dict[int, int]:
    if not run_ids:
        return {}
    return store.open_alert_counts(run_ids)


def _config_value(v: Any) -> Any:
    # An integer beyond 2^53 as its text: a browser cannot read it exactly, the page's rows
    # sent back would fail the callback guard, and beyond 64 bits Dash cannot even send it.
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_SAFE_INT:
        return str(v)
    if isinstance(v, (int, float, str)) or v is None:
        return v
    return str(v)


def _no_fit(fit: dict[str, Any]) -> str:
    """Why a run has no curve: the fit's own message when it has one (a collapse, a run a
    sigmoid does not describe), else "no fit yet" with the number of points."""
    msg = fit.get("message")
    if msg and fit.get("status") == "insufficient_data":
        return f"no fit yet: {msg}"  # the same words as the Run page's caption
    if msg and fit.get("status") not in (None, "pending"):
        return str(msg)
    n = fit.get("n_points")
    return f"no fit yet ({n} points)" if n is not None else "no fit yet"


def run_row(run: Run, alerts: int | None) -> dict[str, Any]:
    """One row of the Runs table."""
    fit = run.fit or {}
    metric = run.fit_metric
    row = {
        "id": run.id,
        "run": f"[{md_text(run.name)}](/dashboard/run/{run.id})",
        "name": run.name,
        "status": run.status,
        "group": group_link(run.project, run.group),
        "group_name": run.group or "",
        "tags": ", ".join(run.tags),
        "metric": metric,
        "last_compute": _round(run.last_compute),
        "current": _round(run.latest.get(metric)),
        "A": a_text(fit) if fit.get("B") is not None else _no_fit(fit),
        "B": _round(fit.get("B"), 3),
        "C_mid": _round(fit.get("C_mid"), 4),
        "predicted": forecast_text(fit),
        "target": _round(run.target_compute),
        "alerts": alerts,
        "unit": unit_label(run.compute_unit),
    }
    for k, v in run.config.items():
        row[f"config.{k}"] = _config_value(v)
    return row


def runs_table(store: Store, project: str | None) -> dict[str, Any]:
    """Rows of the Runs page for one project (or all), plus the config keys seen."""
    runs, total = store.list_runs(RunQuery(project=project or None, limit=MAX_TABLE_RUNS))
    counts = open_alert_counts(store, [r.id for r in runs])
    rows = [run_row(r, counts.get(r.id, 0)) for r in runs]
    keys = sorted({k for r in rows for k in r if k.startswith("config.")})
    return {"rows": rows, "config_keys": keys, "total": total, "shown": len(rows)}


def points_dict(page: PointsPage) -> dict[str, Any]:
    return {
        "steps": list(page.steps),
        "compute": list(page.compute),
        "values": list(page.values),
        "downsampled": bool(page.downsampled),
        "total": int(page.total),
    }


def change_token(run: Run) -> list[Any]:
    """A cheap "has anything changed" key: newest step and fit time of the run."""
    fit = run.fit or {}
    step: Any = run.last_step
    if step is not None and abs(step) > MAX_SAFE_INT:
        # As text past 2^53: the page sends the token back, and the callback guard (like a
        # browser) cannot take such an integer, so the page stopped updating (a 400 a tick).
        step = str(step)
    return [step, fit.get("fitted_at"), run.status]


def run_detail(store: Store, run_id: int, metric: str | None = None) -> dict[str, Any]:
    """Everything the Run page shows (raises NotFound)."""
    run = store.get_run(run_id)
    fit = latest_or_pending(store, run_id, metric or None)
    name = fit["metric"]
    page = store.get_points(run_id, name, max_points=MAX_SCREEN_POINTS)
    _, history = store.fit_history(run_id, name, 500)
    fs = run.fit_settings
    alerts, _ = store.list_alerts(run_id=run_id, limit=50)
    return {
        "run": run.model_dump(),  # the page keeps it in the browser, as JSON
        "metric": name,
        "metrics": sorted(run.latest) or [name],
        "points": points_dict(page),
        "fit": fit,
        "history": history,
        "alerts": alerts,
        "warmup": fs.get("warmup"),
        "fit_until": fs.get("fit_until"),
        # The run's own target only: without one a fit predicts at the last compute, which
        # the page must not present as a target.
        "target": run.target_compute,
        "unit": unit_label(run.compute_unit),
        "color": run_color(run_id),
        "token": change_token(run),
        "refit_wait": store.refit_wait(run_id, name),
    }


def new_points(store: Store, run_id: int, metric: str, after_step: int) -> dict[str, Any]:
    """Points of a run newer than `after_step` (live updates fetch only these)."""
    return points_dict(store.get_points(run_id, metric, since_step=after_step + 1))


def parse_ids(raw: str | None) -> list[int]:
    """The run ids of a link's `runs=1,2,3`: ASCII digits within the 32-bit id range (what
    is not an id is left out; "²".isdigit() is true, so isdigit alone is not enough)."""
    ids = (parse_id(part) for part in (raw or "").replace(" ", "").split(","))
    return list(dict.fromkeys(i for i in ids if i))


def compare_detail(
    store: Store, run_ids: list[int], metric: str | None, budget: float | None
) -> dict[str, Any]:
    """Runs overlaid (downsampled over one shared compute range) and their comparison."""
    if len(run_ids) > limits.MAX_COMPARE_RUNS:  # the API's cap: each run costs queries
        return {"error": f"compare at most {limits.MAX_COMPARE_RUNS} runs at once", "items": []}
    try:
        inputs = load_compare_inputs(
            store, run_ids, metric or None, max_points=MAX_SCREEN_POINTS, shared_range=True
        )
    except MixedMetrics as exc:  # the page offers the metrics to choose from
        return {"error": str(exc), "items": [], **metric_choices(store, run_ids)}
    except NotFound as exc:
        return {"error": str(exc), "items": []}
    if budget is None:
        targets = [float(t) for i in inputs if (t := i.run.get("target_compute"))]
        last = max([float(i.run.get("last_compute") or 0) for i in inputs] + [0.0])
        budget = max(targets) if targets else (last * 4 or None)
    comparison = compare_inputs(inputs, budget) if len(inputs) >= 1 else None
    units = {unit_label(i.run.get("compute_unit")) for i in inputs}
    items = [
        {
            "id": i.run["id"],
            "label": i.label,
            "name": i.run["name"],
            "project": i.run["project"],
            "color": run_color(i.run["id"]),
            "compute": list(i.points.compute),
            "values": list(i.points.values),
            "steps": list(i.points.steps),
            "sampled": i.points.downsampled,
            "total": i.points.total,
            "fit": i.fit,
        }
        for i in inputs
    ]
    return {
        "items": items,
        "comparison": comparison,
        "budget": budget,
        "metric": inputs[0].fit["metric"] if inputs else (metric or ""),
        **unit_fields(units),
        "sampled": any(i["sampled"] for i in items),
    }


def metric_choices(store: Store, run_ids: list[int]) -> dict[str, Any]:
    """For runs fitted on different metrics: the metrics every one of them logs (the Compare
    page's picker; each run's fit metric first) and the runs themselves (its pills)."""
    runs = store.get_runs(run_ids)
    logged = [set(r.latest) for r in runs]
    common = set.intersection(*logged) if logged else set()
    fitted = [r.fit_metric for r in runs if r.fit_metric in common]
    choices = list(dict.fromkeys(fitted)) + sorted(common - set(fitted))
    pills = [{"id": r.id, "label": r.name, "color": run_color(r.id)} for r in runs]
    return {"metric_choices": choices, "runs": pills}


def unit_fields(units: set[str]) -> dict[str, Any]:
    """A comparison's compute unit: its runs' one unit (else "compute"), and every unit they
    count compute in. Runs in different units share A and B (a ceiling and an exponent do not
    depend on the unit) but not C_mid, crossovers or a budget (`verdict_lines`)."""
    ordered = sorted(units)
    return {"unit": ordered[0] if len(ordered) == 1 else "compute", "units": ordered}


def mixed_units_note(units: list[str]) -> str:
    """What the Compare page says when its runs count compute in different units."""
    if len(units) < 2:
        return ""
    return (f"These runs count compute in different units ({', '.join(units)}): their "
            "ceilings (A) and efficiency (B) compare, but not where they sit on the compute "
            "axis, so no crossover or winner at a budget is given.")


def params_rows(detail: dict[str, Any]) -> list[dict[str, Any]]:
    """The parameter table of the Compare page."""
    runs = (detail.get("comparison") or {}).get("runs") or {}
    out = []
    for it in detail["items"]:
        fit = it["fit"] or {}
        ci = fit.get("ci") or {}
        at = runs.get(it["label"], {})
        iv = at.get("interval_at_budget")

        def ci_text(key: str, fit: dict[str, Any] = fit, ci: dict[str, Any] = ci) -> str:
            v, pair = fit.get(key), ci.get(key)
            if v is None:
                return "–"
            if pair and pair[0] is not None and pair[1] is not None:
                return f"{fmt(v)} [{fmt(pair[0])}, {fmt(pair[1])}]"
            return fmt(v)

        out.append(
            {
                "id": it["id"],
                "run": f"[{md_text(it['label'])}](/dashboard/run/{it['id']})",
                "status": fit.get("status", "–"),
                "A": a_text(fit),
                "B": ci_text("B"),
                "C_mid": ci_text("C_mid"),
                "at_budget": "–"
                if at.get("predicted_at_budget") is None
                else (
                    f"{at['predicted_at_budget']:.3f}"
                    + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")
                ),
                "points": f"{len(it['compute']):,} of {it['total']:,}"
                if it["sampled"]
                else f"{it['total']:,}",
            }
        )
    return out


def _interval_text(name: str, iv: list[float]) -> str:
    return f"{name} A [{iv[0]:.3f}, {iv[1]:.3f}]"


def indistinct(
    a: str, b: str, pooled: dict[str, list[float]], margin: float
) -> str | None:
    """The verdict for a pair with a recipe in it when their A intervals overlap by more than
    the paper's margin: the point estimates may differ, but no winner can be called yet.
    ``pooled`` maps a recipe's (or run's) name to its 95% interval of A; None when the pair is
    distinguishable or has no recipe in it."""
    ia, ib = pooled.get(a), pooled.get(b)
    if not ia or not ib:
        return None
    overlap = min(ia[1], ib[1]) - max(ia[0], ib[0])
    if overlap <= margin:
        return None
    return (f"not distinguishable yet: {_interval_text(a, ia)} and {_interval_text(b, ib)} "
            f"overlap by {overlap:.3f} (more than the paper's {margin} margin)")


def verdict_lines(
    comparison: dict[str, Any] | None, unit: str, units: list[str] | None = None,
    intervals: dict[str, list[float]] | None = None, recipes: set[str] | None = None,
) -> list[dict[str, str]]:
    """Plain-language verdict per pair: the paper's rule, crossover, winner at the budget.

    ``units``: every unit the runs count compute in; with more than one, a crossover or a
    budget would mix incomparable numbers, and the lines say so instead of giving them.
    ``intervals`` (name -> 95% interval of A) and ``recipes`` (the names that are groups): a
    pair with a recipe whose intervals overlap by more than the margin names no winner."""
    if not comparison:
        return []
    mixed = ", ".join(units) if units and len(units) > 1 else ""
    margin = float(comparison.get("margin", 0.02))
    out = []
    if comparison.get("message"):  # the engine could not compare these runs: say why
        out.append({"pair": "these runs", "rule": str(comparison["message"]),
                    "crossover": "", "winner": ""})
    for pair in comparison.get("pairs") or []:
        a, b = pair["runs"]
        d = pair["decision"]
        held = indistinct(a, b, intervals or {}, margin) if {a, b} & (recipes or set()) \
            else None
        if held:
            out.append({"pair": f"{a} vs {b}", "rule": held, "crossover": "",
                        "winner": "no winner yet: more compute or more seeds will tell"})
            continue
        if d["rule"] == "different_asymptote":
            rule = f"{d['higher_asymptote']} has the higher ceiling ({d['reason']})"
        elif d["rule"] == "same_asymptote":
            who = d.get("more_efficient")
            rule = (
                f"same asymptote within {comparison.get('margin', 0.02)}: "
                + (f"{who} is more efficient (higher B at A = {d['fixed_A']:.3f})" if who else "")
                + ("" if who else d["reason"])
            )
        else:
            rule = f"undetermined: {d['reason']}"
        cross = pair.get("crossover")
        if mixed:
            cross_text = f"no crossover: compute is counted in different units ({mixed})"
        elif cross:
            iv = cross.get("interval")
            cross_text = (
                f"{cross['better_before']} leads until ≈ {fmt(cross['compute'])} {unit}"
                + (f" (95%: {fmt(iv[0])}–{fmt(iv[1])})" if iv else "")
                + f", then {cross['better_after']} leads"
            )
        else:
            cross_text = "the fitted curves do not cross"
        win = pair.get("winner_at_budget")
        if mixed:
            win_text = "no winner at a budget: compute is counted in different units"
        elif win:
            prob = win.get("probability")
            win_text = f"winner at {fmt(comparison.get('budget'))} {unit}: {win['run']}" + (
                f" (probability {prob:.0%})" if prob is not None else ""
            )
        else:
            win_text = "no winner at the budget (a run has no fit)"
        out.append(
            {"pair": f"{a} vs {b}", "rule": rule, "crossover": cross_text, "winner": win_text}
        )
    return out


def ceiling_rows(
    store: Store, projects_: list[str], highlight: dict[int, str]
) -> list[dict[str, Any]]:
    """A and B of every fitted run in the given projects (for the ceiling-vs-efficiency plot)."""
    rows = []
    for project in projects_:
        runs, _ = store.list_runs(RunQuery(project=project, limit=MAX_TABLE_RUNS))
        for r in runs:
            fit = r.fit or {}
            ci = (fit.get("ci") or {}).get("A")
            rows.append(
                {
                    "id": r.id,
                    "label": highlight.get(r.id, r.name),
                    "A": fit.get("A"),
                    "A_ci": ci if ci and None not in ci else None,
                    "A_lower_bound": fit.get("A_lower_bound"),
                    "B": fit.get("B"),
                    "color": run_color(r.id),
                    "highlight": r.id in highlight,
                }
            )
    return rows


def _alert_subject(alert: Alert) -> str:
    """What an alert is about, as a table cell: its run (a seed of a group says which), or the
    group itself for an alert on a recipe's pooled fit (which has no run)."""
    group = alert.group
    if alert.run_id is None:
        return f"group {group_link(alert.project, group)}" if group else ""
    run = f"[{md_text(alert.run_name or alert.run_id)}](/dashboard/run/{alert.run_id})"
    return f"{run} (seed of {group_link(alert.project, group)})" if group else run


def alerts_table(
    store: Store, project: str | None = None, state: str | None = None
) -> dict[str, Any]:
    alerts, total = store.list_alerts(project=project or None, state=state or None, limit=500)
    rows = [
        {
            "id": a.id,
            "run": _alert_subject(a),
            "project": a.project,
            "kind": a.kind.value,
            "state": a.state,
            "message": a.message,
            "created_at": utc_text(a.created_at),
            "acknowledged_at": utc_text(a.acknowledged_at),
        }
        for a in alerts
    ]
    return {"rows": rows, "total": total}


def deliveries(store: Store, alert_id: int, scope: str) -> list[dict[str, Any]]:
    """One row per webhook attempt (a delivery not yet attempted shows as one row), as a
    token of `scope` may see them (`redact_delivery`, like the API: below admin the URL's host
    only, read scope a generic error). `scope` has no default so no caller forgets it."""
    try:
        found = store.alert_deliveries(alert_id)
    except NotFound:
        return []
    rows: list[dict[str, Any]] = []
    for d in (redact_delivery(x, scope) for x in found):
        base = {"event": d.event, "url": d.url, "state": d.state}
        if not d.attempt_log:  # not yet attempted
            rows.append({**base, "attempt": None, "at": utc_text(d.created_at),
                         "status_code": None, "ok": "", "error": d.last_error or "",
                         "duration_ms": None})
        for a in d.attempt_log:
            rows.append(
                {
                    **base,
                    "attempt": a.attempt,
                    "at": utc_text(a.at or d.created_at),
                    "status_code": a.status_code,
                    "ok": "yes" if a.ok else "no",
                    "error": a.error or "",
                    "duration_ms": a.duration_ms,
                }
            )
    return rows
