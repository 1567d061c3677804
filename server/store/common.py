"""Helpers shared by the SqlStore mixins."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy.orm import Session


def iso(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    if dt.tzinfo is None:  # SQLite hands back naive datetimes; everything is stored in UTC
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.isoformat()


def dialect_insert(session: Session):  # noqa: ANN201 - returns a dialect-specific insert()
    """`insert` with ON CONFLICT support for the session's database."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:  # pragma: no cover - only SQLite and PostgreSQL are supported
        raise RuntimeError(f"unsupported database {name}")
    return insert


SUMMARY_KEYS = (
    "status",
    "A",
    "B",
    "C_mid",
    "R0",
    "ci",
    "A_lower_bound",
    "n_points",
    "target_compute",
    "predicted_at_target",
    "predicted_interval",
    "metric",
    "fitted_at",
    "message",
)


def fit_summary(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The compact fit view carried by run lists (full result comes from /fit)."""
    if not result:
        return None
    return {k: result.get(k) for k in SUMMARY_KEYS}
