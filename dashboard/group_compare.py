"""The Compare page with groups (recipes) beside runs: the verdict from the same service as
`GET /api/v1/compare?project=&group=` (`server/services/compare_groups.py`), the chart's points
downsampled in the database per run and per seed, and the ceiling chart's recipe rows.

Without groups the Compare page keeps `data.compare_detail` (runs only, as before)."""

from __future__ import annotations

from typing import Any, cast

from scalewatch.dashboard import data
from scalewatch.dashboard.data import (
    MAX_SCREEN_POINTS,
    MAX_TABLE_RUNS,
    group_href,
    md_text,
    unit_fields,
)
from scalewatch.dashboard.figures import group_color, run_color, unit_label
from scalewatch.dashboard.group_data import MIN_SEED_POINTS, detail_token
from scalewatch.server import limits
from scalewatch.server.domain.runs import Run
from scalewatch.server.services.compare import MixedMetrics, compare_inputs
from scalewatch.server.services.compare_groups import load_inputs
from scalewatch.server.services.groups import group_metric
from scalewatch.server.store.base import NotFound, RunQuery, Store


def parse_groups(raw: Any) -> list[str]:
    """`group=` query values (one string, or a list when repeated), non-empty, de-duplicated."""
    values = raw if isinstance(raw, list) else [raw]
    return list(dict.fromkeys(str(v) for v in values if v not in (None, "")))


def resolve_project(store: Store, project: str | None, run_ids: list[int]) -> str | None:
    """The project groups are named in: the link's, else the first compared run's."""
    if project:
        return project
    for i in run_ids:
        try:
            return store.get_run(i).project
        except NotFound:
            continue
    return None


def _members(store: Store, project: str, group: str) -> list[Run]:
    runs, _ = store.list_runs(RunQuery(project=project, group=group, limit=MAX_TABLE_RUNS))
    return sorted(runs, key=lambda r: r.id)


def compare_detail(
    store: Store,
    run_ids: list[int],
    project: str | None,
    groups: list[str],
    metric: str | None,
    budget: float | None,
) -> dict[str, Any]:
    """`data.compare_detail`'s shape, with groups as items of kind "group" carrying their seeds'
    points (`seeds`) and their pooled fit as `fit`."""
    if not groups:
        return data.compare_detail(store, run_ids, metric, budget)
    if len(run_ids) + len(groups) > limits.MAX_COMPARE_RUNS:
        return {"error": f"compare at most {limits.MAX_COMPARE_RUNS} runs and groups at once",
                "items": []}  # fmt: skip
    if not project:
        return {"error": "groups need their project (project= in the link)", "items": []}
    try:
        inputs = load_inputs(store, run_ids, project, groups, metric or None)
        members = {g: _members(store, project, g) for g in groups}
    except (NotFound, MixedMetrics) as exc:
        return {"error": str(exc), "items": []}
    runs = [i.run for i in inputs if i.run.get("id") is not None]
    seeds_all = [m for ms in members.values() for m in ms]
    lasts = ([float(r.get("last_compute") or 0) for r in runs]
             + [float(m.last_compute or 0) for m in seeds_all] + [0.0])
    if budget is None:
        targets = [float(t) for t in [r.get("target_compute") for r in runs]
                   + [m.target_compute for m in seeds_all] if t]
        budget = max(targets) if targets else (max(lasts) * 4 or None)
    comparison = compare_inputs(inputs, budget)
    hi = max(lasts)
    x_range = (0.0, hi) if hi > 0 else None  # one range: every series' buckets line up
    name = str(inputs[0].fit["metric"]) if inputs else (metric or "")
    items = []
    for i in inputs:
        if i.run.get("id") is not None:
            page = store.get_points(i.run["id"], name, max_points=MAX_SCREEN_POINTS,
                                    x_range=x_range, rollup=True)  # fmt: skip
            items.append({
                "kind": "run", "id": i.run["id"], "label": i.label, "name": i.run["name"],
                "project": i.run["project"], "color": run_color(i.run["id"]),
                "href": f"/dashboard/run/{i.run['id']}", "fit": i.fit,
                "compute": list(page.compute), "values": list(page.values),
                "steps": list(page.steps), "sampled": page.downsampled, "total": page.total,
            })  # fmt: skip
            continue
        g = str(i.run["group"])
        ms = members[g]
        per_seed = max(MIN_SEED_POINTS, MAX_SCREEN_POINTS // max(len(ms), 1))
        seeds: list[dict[str, Any]] = []
        for m in ms:
            page = store.get_points(m.id, name, max_points=per_seed, x_range=x_range,
                                    rollup=True)
            seeds.append({"id": m.id, "name": m.name, "compute": list(page.compute),
                          "values": list(page.values), "steps": list(page.steps),
                          "sampled": page.downsampled, "total": page.total})  # fmt: skip
        items.append({
            "kind": "group", "id": f"group:{g}", "label": i.label, "name": g,
            "project": project, "color": group_color(g), "href": group_href(project, g),
            "fit": i.fit, "seeds": seeds,
            "compute": [c for s in seeds for c in s["compute"]],
            "values": [v for s in seeds for v in s["values"]],
            "steps": [v for s in seeds for v in s["steps"]],
            "sampled": any(s["sampled"] for s in seeds),
            "total": sum(s["total"] for s in seeds),
        })  # fmt: skip
    units = ({unit_label(r.get("compute_unit")) for r in runs}
             | {unit_label(m.compute_unit) for m in seeds_all})
    return {
        "items": items,
        "comparison": comparison,
        "budget": budget,
        "metric": name,
        **unit_fields(units),
        "sampled": any(it["sampled"] for it in items),
    }


def change_tokens(
    store: Store, run_ids: list[int], project: str | None, groups: list[str], metric: str | None
) -> list[Any]:
    """What the live Compare page compares each tick: each run's newest step and fit time, and
    each group's fit id and members' (reads only, no points)."""
    out: list[Any] = [data.change_token(r) for r in store.get_runs(run_ids)]
    for g in groups:
        ms = _members(store, str(project), g)
        if not ms:
            raise NotFound(f"project {project!r} has no group {g!r}")
        stored = store.latest_group_fit(str(project), g, group_metric(g, ms, metric or None))
        out.append(detail_token(cast(dict[str, Any], stored or {}), ms))
    return out


def group_param_rows(detail: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`data.params_rows` with each group's row linking to its page and counting its seeds."""
    by_id = {it["id"]: it for it in detail["items"]}
    for row in rows:
        it = by_id.get(row["id"])
        if not it or it.get("kind") != "group":
            continue
        row["run"] = f"[{md_text(it['label'])}]({it['href']}) (recipe)"
        n = len(it["seeds"])
        row["points"] = f"{n} seed{'s' if n != 1 else ''}, {it['total']:,} points"
    return rows


def ceiling_rows(
    store: Store,
    run_rows: list[dict[str, Any]],
    project: str | None,
    groups: list[str],
    metric: str | None,
) -> list[dict[str, Any]]:
    """The ceiling chart's rows with the compared recipes: each group's pooled A (with its
    interval) and B, and its seeds' own A and B (`seeds`, from the stored group fit: no points
    are read); the seeds leave the grey "other runs" (they are drawn as the recipe's)."""
    rows = list(run_rows)
    for g in groups:
        try:
            ms = _members(store, str(project), g)
            name = group_metric(g, ms, metric or None)
            fit = cast(dict[str, Any], store.latest_group_fit(str(project), g, name) or {})
        except (NotFound, MixedMetrics):
            continue  # the Compare page's verdict says why
        seed_ids = {m.id for m in ms}
        rows = [r for r in rows if r["id"] not in seed_ids]
        ci = (fit.get("ci") or {}).get("A")
        seeds = [
            {"name": m.get("name"), "A": m.get("A"), "B": m["B"],
             "A_lower_bound": m.get("A_lower_bound")}
            for m in fit.get("members") or []
            if m.get("B") is not None  # a seed with no curve of its own has no place here
        ]  # fmt: skip
        rows.append({
            "id": f"group:{g}", "label": g, "kind": "group", "highlight": True,
            "A": fit.get("A"), "A_ci": ci if ci and None not in ci else None,
            "A_lower_bound": fit.get("A_lower_bound"), "B": fit.get("B"),
            "color": group_color(g), "seeds": seeds,
        })  # fmt: skip
    return rows
