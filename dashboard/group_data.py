"""Data shaping for groups (recipes: the runs of a project sharing `group`): the Runs page's
"by group" rows, the Group page. Store in, plain dicts out (no Dash, no plotly), like
`dashboard/data.py`; every read goes through the Store the REST API uses."""

from __future__ import annotations

from typing import Any, cast

from scalewatch.dashboard.data import (
    MAX_SCREEN_POINTS,
    MAX_TABLE_RUNS,
    change_token,
    group_link,
    md_text,
    points_dict,
)
from scalewatch.dashboard.figures import (
    a_text,
    fmt,
    forecast_text,
    group_color,
    pooled_over,
    spread_text,
    unit_label,
)
from scalewatch.server.domain.runs import GroupSummary, Run
from scalewatch.server.services.compare import MixedMetrics
from scalewatch.server.services.groups import group_metric, latest_group_or_pending
from scalewatch.server.store.base import NotFound, RunQuery, Store

MIN_SEED_POINTS = 300  # per seed on screen, however many seeds: a seed's shape stays readable


def _ci_text(value: float | None, ci: Any, signed: bool = False) -> str:
    if value is None:
        return "–"
    f = "{:+.3f}" if signed else "{:.3f}"
    if ci and len(ci) == 2 and None not in ci:
        return f"{f.format(value)} [{f.format(ci[0])}, {f.format(ci[1])}]"
    return f.format(value)


def own_offset(own: dict[str, Any], recipe: dict[str, Any] | None) -> str:
    """A seed's own fitted A minus the recipe's pooled A, with the seed's own 95% interval
    moved by the same amount: where this seed on its own puts the ceiling.

    Not the pooled model's per-seed offset stored with the group fit: that one is shrunk
    towards the recipe by the seed spread, and whenever the spread's posterior sits at zero
    (seeds that agree, the usual case) it is exactly 0 for every seed, so the column read
    +0.000 for all of them. The stored offset still decides "off the curve"."""
    a, pooled = own.get("A"), (recipe or {}).get("A")
    if a is None or pooled is None or own.get("status") in (None, "pending"):
        return "–"
    ci = (own.get("ci") or {}).get("A")
    shifted = [c - pooled for c in ci] if ci and len(ci) == 2 and None not in ci else None
    return _ci_text(a - pooled, shifted, signed=True)


def _status(fit: dict[str, Any] | None) -> str:
    """A group fit's status as the table says it: "pending" before the first group fit."""
    return str((fit or {}).get("status") or "pending")


def group_row(project: str, g: GroupSummary) -> dict[str, Any]:
    """One row of the Runs page's "by group" view, from `Store.list_groups`."""
    fit = g.fit or {}
    identified = fit.get("B") is not None
    return {
        "id": f"{project}\x1f{g.name}",  # unique across projects; \x1f never in a name
        "project": project,
        "name": g.name,
        "group": group_link(project, g.name),
        "members": g.n_runs,
        "status": _status(g.fit),
        "metric": g.metric or "(members differ)",
        "A": a_text(fit) if identified else (fit.get("message") or "no recipe fit yet"),
        "B": _ci_text(fit.get("B"), (fit.get("ci") or {}).get("B")) if identified else "–",
        "C_mid": fmt(fit.get("C_mid")) if identified else "–",
        "predicted": forecast_text(fit) if identified else "–",
        "target": fit.get("target_compute"),
        "spread": spread_text(fit.get("seed_spread")) if identified else "–",
        "pooled": pooled_over(fit) if identified else None,
    }


def group_rows(store: Store, project: str | None) -> list[dict[str, Any]]:
    """Every group of a project (or of every project), one row each."""
    out = []
    for p in [project] if project else store.list_projects():
        try:
            groups = store.list_groups(p)
        except NotFound:  # the project was deleted between the two reads
            continue
        out += [group_row(p, g) for g in groups]
    return out


def _member_points(store: Store, run_id: int, metric: str, per_seed: int) -> dict[str, Any]:
    try:
        return points_dict(store.get_points(run_id, metric, max_points=per_seed))
    except NotFound:  # deleted since the member list was read: it just drops out
        return {"steps": [], "compute": [], "values": [], "downsampled": False, "total": 0}


def group_detail(
    store: Store, project: str, group: str, metric: str | None = None
) -> dict[str, Any]:
    """Everything the Group page shows. Raises NotFound (unknown project or group) and
    MixedMetrics (members fitted on different metrics, no metric given)."""
    fit = cast(dict[str, Any], latest_group_or_pending(store, project, group, metric or None))
    name = str(fit["metric"])
    runs, _ = store.list_runs(RunQuery(project=project, group=group, limit=MAX_TABLE_RUNS))
    runs.sort(key=lambda r: r.id)  # the fit's order (and the seeds' shades): oldest first
    per_seed = max(MIN_SEED_POINTS, MAX_SCREEN_POINTS // max(len(runs), 1))
    fitted = {m.get("run_id"): m for m in fit.get("members") or []}
    members = []
    for r in runs:
        own = fitted.get(r.id) or {}
        pts = _member_points(store, r.id, name, per_seed)
        members.append(
            {
                "id": r.id,
                "name": r.name,
                "run": r.model_dump(),  # the page keeps it in the browser, as JSON
                "fit": own,
                "compute": pts["compute"],
                "values": pts["values"],
                "steps": pts["steps"],
                "total": pts["total"],
                "sampled": pts["downsampled"],
                "included": own.get("included"),
                "off_curve": bool(own.get("off_curve")),
                "break": own.get("break"),
                "reason": own.get("reason") or "",
            }
        )
    units = {unit_label(r.compute_unit) for r in runs}
    targets = [float(t) for r in runs if (t := r.target_compute)]
    return {
        "project": project,
        "group": group,
        "metric": name,
        "fit": fit,
        "members": members,
        "history": store.group_fit_history(project, group, name, 500),
        "unit": units.pop() if len(units) == 1 else "compute",
        "target": fit.get("target_compute") or (max(targets) if targets else None),
        "color": group_color(group),
        "sampled": any(m["sampled"] for m in members),
        "token": detail_token(fit, runs),
    }


def detail_token(fit: dict[str, Any], runs: list[Run]) -> list[Any]:
    """What the live Group page compares each tick: the group fit's id and every member's
    newest step, fit time and status (a new member or one leaving changes it too)."""
    return [
        fit.get("fit_id"),
        [[r.id, *change_token(r)] for r in sorted(runs, key=lambda r: r.id)],
    ]


def current_token(store: Store, project: str, group: str, metric: str | None) -> list[Any]:
    """`detail_token` from two reads (the members' rows and the stored group fit), no points.
    Reads only: queueing a refit (a write) is left to the full render, not every tick."""
    runs, _ = store.list_runs(RunQuery(project=project, group=group, limit=MAX_TABLE_RUNS))
    if not runs:
        raise NotFound(f"project {project!r} has no group {group!r}")
    name = group_metric(group, runs, metric or None)
    stored = store.latest_group_fit(project, group, name)
    return detail_token(cast(dict[str, Any], stored or {}), runs)


def member_rows(detail: dict[str, Any]) -> list[dict[str, Any]]:
    """The Group page's members table: each seed's own fit and where it sits on the recipe."""
    out = []
    for m in detail["members"]:
        own, run = m["fit"], m["run"]
        if m["break"]:
            pool = "broke"
        elif m["off_curve"]:
            pool = "off the curve"
        elif m["included"] is True:
            pool = "pooled"
        elif m["included"] is False:
            pool = "not pooled"
        else:
            pool = "pending"
        out.append(
            {
                "id": m["id"],
                "run": f"[{md_text(m['name'])}](/dashboard/run/{m['id']})",
                "name": m["name"],
                "status": run.get("status"),
                "fit_status": own.get("status") or "pending",
                "A": a_text(own) if own.get("status") not in (None, "pending") else "–",
                "offset": own_offset(own, detail.get("fit")),
                "pool": pool,
                "reason": m["reason"],
                "last_compute": run.get("last_compute"),
                "points": m["total"],
            }
        )
    return out


def detail_or_error(store: Store, project: str, group: str, metric: str | None) -> dict[str, Any]:
    """`group_detail`, or {"error": why} for an unknown group or members on mixed metrics."""
    try:
        return group_detail(store, project, group, metric)
    except (NotFound, MixedMetrics) as exc:
        return {"error": str(exc)}
