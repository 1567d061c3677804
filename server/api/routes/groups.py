"""Groups (recipes): the groups of a project, a group's pooled fit and its fit history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from scalewatch.server import limits
from scalewatch.server.api.deps import AUTH_RESPONSES, PROJECTS, READ, StoreDep
from scalewatch.server.api.schemas import (
    GroupFitHistory,
    GroupFitOut,
    GroupList,
    GroupPage,
    not_found,
)
from scalewatch.server.services.groups import (
    group_metric,
    latest_group_or_pending,
    public_group_fit,
)

router = APIRouter(prefix="/api/v1/groups", tags=["groups"], responses=AUTH_RESPONSES,
                   dependencies=[PROJECTS, READ])
GROUP_404 = not_found("project or group")
ProjectQ = Annotated[str, Query(min_length=1, max_length=limits.MAX_NAME_LENGTH)]
GroupQ = Annotated[str, Query(min_length=1, max_length=limits.MAX_GROUP_LENGTH)]
MetricQ = Annotated[
    str | None,
    Query(min_length=1, max_length=limits.MAX_METRIC_NAME_LENGTH,
          description="default: the members' common fit metric"),
]


@router.get("", response_model=GroupList, responses=not_found("project"))
def list_groups(project: ProjectQ, store: StoreDep) -> GroupPage:
    """The project's groups: name, member count and ids, the latest group fit summary."""
    return GroupPage(groups=store.list_groups(project))


@router.get("/fit", response_model=GroupFitOut, response_model_exclude_unset=True,
            responses=GROUP_404)
def group_fit(
    project: ProjectQ, group: GroupQ, store: StoreDep, metric: MetricQ = None
) -> dict[str, Any]:
    """The latest pooled fit of a group: the recipe's A, band and forecast (the result object),
    each member's own fit (`members`) and the spread of A across seeds (`seed_spread`).

    Never fits inside the request, like a run's fit: `pending` while a fit is queued; a fit
    older than a member's newest points is returned and refitted."""
    return public_group_fit(latest_group_or_pending(store, project, group, metric), project)


@router.get("/fits", response_model=GroupFitHistory, responses=GROUP_404)
def group_fit_history(
    project: ProjectQ,
    group: GroupQ,
    store: StoreDep,
    metric: MetricQ = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> dict[str, Any]:
    """Every stored fit of the group, oldest first: how the recipe's A moved."""
    name = group_metric(group, store.group_members(project, group), metric)
    fits = store.group_fit_history(project, group, name, limit)
    return {"project": project, "group": group, "metric": name, "fits": fits}
