"""The storage interface: what the API, refitter, alerts and dashboard may ask of the database.

Everything returns plain dicts/dataclasses, never ORM objects, so callers cannot lazily load
rows outside a transaction and the web layer stays independent of SQLAlchemy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from server.ingest import PointRow


class NotFound(LookupError):
    pass


class Conflict(ValueError):
    pass


@dataclass(frozen=True)
class RunQuery:
    project: str | None = None
    tag: str | None = None
    status: str | None = None
    limit: int = 100
    offset: int = 0


@dataclass(frozen=True)
class PointsPage:
    metric: str
    steps: list[int]
    compute: list[float]
    values: list[float]
    downsampled: bool
    total: int


@dataclass(frozen=True)
class DirtySeries:
    series_id: int
    run_id: int
    metric: str
    requested: int


class Store(Protocol):
    # runs
    def get_or_create_run(self, project: str, name: str, **fields: Any) -> tuple[dict, bool]: ...
    def list_runs(self, query: RunQuery) -> tuple[list[dict], int]: ...
    def get_run(self, run_id: int) -> dict: ...
    def update_run(self, run_id: int, changes: dict[str, Any]) -> dict: ...
    def delete_run(self, run_id: int) -> None: ...
    # points
    def ingest_points(self, run_id: int, rows: list[PointRow]) -> tuple[int, int]: ...
    def get_points(
        self,
        run_id: int,
        metric: str,
        *,
        since_step: int | None = None,
        max_points: int | None = None,
        x_range: tuple[float, float] | None = None,
    ) -> PointsPage: ...
    # tokens
    def create_token(self, name: str, scope: str) -> tuple[dict, str]: ...
    def lookup_token(self, token: str) -> dict | None: ...
    def count_tokens(self) -> int: ...
