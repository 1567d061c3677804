"""What every request and response model shares: names, ids, text checks, the error shape."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, Field

from scalewatch.server import limits
from scalewatch.server.domain import alerts as domain_alerts

# The checks live with the shapes they guard (the dashboard's writes make them too).
from scalewatch.server.domain.checks import (  # noqa: F401 - re-exported to the schemas
    PriorsChecked,
    check_free_text,
    check_group,
    check_json,
    check_tags,
    check_utf8,
    clean_text,
    utf8_problem,
)
from scalewatch.server.domain.runs import RunStatus  # noqa: F401 - re-exported to the schemas

Name = Field(min_length=1, max_length=limits.MAX_NAME_LENGTH)
AlertState = domain_alerts.AlertState

# Every id (runs, rules, alerts, tokens) is a 32-bit integer column: one range everywhere, so a
# larger id is a 422, never a database error.
ID_MAX = 2**31 - 1
Id = Annotated[int, Field(ge=1, le=ID_MAX)]
"""An id in a body or a query list."""
PathId = Annotated[int, Path(ge=1, le=ID_MAX)]
"""An id in the path (`/runs/{run_id}`, `/alerts/{alert_id}`, ...)."""


GroupName = Field(
    None,
    min_length=1,
    max_length=limits.MAX_GROUP_LENGTH,
    description="the run's group (its recipe, e.g. cispo-768): runs of one group are its seeds",
)


class ErrorOut(BaseModel):
    detail: Any
    errors: list[dict[str, str]] | None = None


def not_found(what: str) -> dict[int | str, dict[str, Any]]:
    """The documented 404 of a route whose `what` may not exist (raised as the store's
    `NotFound`, turned into a 404 by `scalewatch.server.api.errors`)."""
    return {404: {"model": ErrorOut, "description": f"Unknown {what}"}}
