"""Comparing groups (recipes), alone or beside runs: each group enters the comparison as its
pooled fit (a `FitResult` like a run's) with its members' points together, so `compare_fits`
gives the paper's verdict, crossover and winner between recipes exactly as between runs.

Kept apart from `compare.py` (which `groups.py` builds on) so neither imports the other.
"""

from __future__ import annotations

from scalewatch.server.domain.runs import GroupMember
from scalewatch.server.services.compare import (
    CompareInput,
    Fitted,
    FittedAs,
    common_metric,
    load_compare_inputs,
)
from scalewatch.server.services.groups import group_metric, latest_group_or_pending
from scalewatch.server.store.base import PointsPage, Store


def _group_points(store: Store, members: list[GroupMember], metric: str) -> PointsPage:
    """Every member's points of `metric`, in compute order (the pooled fit's data)."""
    rows: list[tuple[float, float, int]] = []
    for m in members:
        page = store.get_points(m.id, metric)
        rows += zip(page.compute, page.values, page.steps, strict=True)
    rows.sort()
    return PointsPage(metric, [r[2] for r in rows], [r[0] for r in rows], [r[1] for r in rows],
                      False, len(rows))


def load_inputs(
    store: Store,
    run_ids: list[int],
    project: str | None,
    groups: list[str],
    metric: str | None = None,
) -> list[CompareInput]:
    """Runs and groups of one comparison, on one metric (given, else the common fit metric of
    every run and group: `MixedMetrics` names each otherwise); `NotFound` for an unknown run,
    project or group."""
    groups = list(dict.fromkeys(groups))
    members = {g: store.group_members(str(project), g) for g in groups}
    if metric is None and groups:
        infos: list[Fitted] = [FittedAs(f"group {g}", group_metric(g, members[g], None))
                               for g in groups]
        infos += [FittedAs(r.name, r.fit_metric)
                  for r in (store.get_run(i) for i in dict.fromkeys(run_ids))]
        metric = common_metric(infos, None)
    inputs = load_compare_inputs(store, run_ids, metric) if run_ids else []
    labels = {i.label for i in inputs}
    for g in groups:
        stored = latest_group_or_pending(store, str(project), g, metric)
        label = g if g not in labels else f"group {g}"
        info = {"id": None, "name": g, "project": project, "group": g}
        inputs.append(CompareInput(info, label, stored,
                                   _group_points(store, members[g], stored["metric"])))
    return inputs
