"""Projects: read one, set its defaults (fit metric, noise prior, B prior)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from scalewatch.server import limits
from scalewatch.server.api.deps import (
    AUTH_RESPONSES,
    PROJECTS,
    READ,
    WRITE,
    StoreDep,
    wake_refitter,
)
from scalewatch.server.api.schemas import ProjectOut, ProjectPatch, not_found
from scalewatch.server.domain.runs import Project
from scalewatch.server.services import projects
from scalewatch.server.store.base import NotFound

router = APIRouter(
    prefix="/api/v1/projects", tags=["projects"], responses=AUTH_RESPONSES,
    dependencies=[PROJECTS],
)
ProjectName = Annotated[str, Path(min_length=1, max_length=limits.MAX_NAME_LENGTH)]
# `:path`: a project name may hold "/" (MLflow experiments such as "/Shared/math-rl"), and the
# server decodes %2F before routing, so a plain `{project}` never matched such a name.
ONE = "/{project:path}"


@router.get(ONE, response_model=ProjectOut, dependencies=[READ],
            responses=not_found("project"))
def get_project(project: ProjectName, store: StoreDep) -> Project:
    """A project and its default fit metric."""
    found = store.get_project(name=project)
    if found is None:
        raise NotFound(f"project {project!r} not found")
    return found


@router.patch(ONE, response_model=ProjectOut, dependencies=[WRITE])
def patch_project(
    project: ProjectName, body: ProjectPatch, store: StoreDep, request: Request
) -> Project:
    """Set (null: clear) the project's defaults, creating the project when missing: its fit
    metric, its noise prior and its B prior (`"project"`: learned from its finished runs). A
    run's own setting (PATCH /runs/{id}) still wins; the others are refitted. Keys left out
    stay."""
    found = projects.update_project(store, project, body)
    if body.model_fields_set:  # the runs it refits start now, not at the next poll
        wake_refitter(request)
    return found
