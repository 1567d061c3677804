"""Runs: create-or-resume, list, read, patch, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from scalewatch.server import limits
from scalewatch.server.api.deps import ADMIN, AUTH_RESPONSES, PROJECTS, READ, WRITE, StoreDep
from scalewatch.server.api.schemas import (
    PathId,
    RunCreate,
    RunList,
    RunOut,
    RunPage,
    RunPatch,
    RunStatus,
    not_found,
)
from scalewatch.server.domain.runs import Run
from scalewatch.server.services import runs as run_changes
from scalewatch.server.store.base import RunQuery, UnitConflict
from scalewatch.server.store.run_names import InvalidName, NameTaken

router = APIRouter(
    prefix="/api/v1/runs", tags=["runs"], responses=AUTH_RESPONSES, dependencies=[PROJECTS]
)
NOT_FOUND = not_found("run")


@router.post(
    "",
    response_model=RunOut,
    status_code=201,
    dependencies=[WRITE],
    responses={200: {"model": RunOut, "description": "The run already existed: resumed"}},
)
def create_run(body: RunCreate, store: StoreDep, response: Response) -> Run:
    """Create a run, or resume it: the same project + name returns the existing run (200);
    409 when the resume names another compute unit than the run has points in."""
    fields = body.model_dump(exclude={"project", "name"})
    if body.fit_settings is not None:
        fields["fit_settings"] = body.fit_settings.model_dump(exclude_none=True)
    if "compute_unit" not in body.model_fields_set:
        fields.pop("compute_unit")  # a new run gets the default; a resumed one keeps its own
    try:
        run, created = store.get_or_create_run(body.project, body.name, **fields)
    except UnitConflict as exc:
        raise HTTPException(409, str(exc)) from None
    if not created:
        response.status_code = 200
    return run


@router.get("", response_model=RunList, dependencies=[READ])
def list_runs(
    store: StoreDep,
    project: Annotated[str | None, Query(max_length=limits.MAX_NAME_LENGTH)] = None,
    tag: Annotated[str | None, Query(max_length=limits.MAX_TAG_LENGTH)] = None,
    status: RunStatus | None = None,
    group: Annotated[
        str | None, Query(min_length=1, max_length=limits.MAX_GROUP_LENGTH,
                          description="only the runs of this group")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=limits.MAX_PAGE_SIZE)] = limits.DEFAULT_PAGE_SIZE,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> RunPage:
    """Runs, newest first, each with its latest metric values and latest fit summary."""
    runs, total = store.list_runs(
        RunQuery(project=project, tag=tag, status=status, group=group, limit=limit,
                 offset=offset)
    )
    return RunPage(runs=runs, total=total)


@router.get("/{run_id}", response_model=RunOut, dependencies=[READ], responses=NOT_FOUND)
def get_run(run_id: PathId, store: StoreDep) -> Run:
    return store.get_run(run_id)


@router.patch("/{run_id}", response_model=RunOut, dependencies=[WRITE], responses=NOT_FOUND)
def patch_run(run_id: PathId, body: RunPatch, store: StoreDep) -> Run:
    """Rename (409 when the project has a run of that name); change status, tags, notes,
    target compute, fit metric, fit settings (these refit) or group (null: out of its group;
    the groups it left and joined are refitted)."""
    try:
        return run_changes.patch_run(store, run_id, body)
    except NameTaken as exc:
        raise HTTPException(409, str(exc)) from None
    except InvalidName as exc:  # the schema checks first; this is the store's own check
        raise HTTPException(422, str(exc)) from None


@router.delete("/{run_id}", status_code=204, dependencies=[ADMIN], responses=NOT_FOUND)
def delete_run(run_id: PathId, store: StoreDep) -> Response:
    """Delete a run with all its points, fits and alerts (admin scope)."""
    store.delete_run(run_id)
    return Response(status_code=204)
