"""Group tables: the group refit queue (`group_series`) and the group fit history (`group_fits`).

A group is a recipe: the runs of one project sharing `runs.group_name` (its seeds). It has no
row of its own (it exists while it has members); what needs state is one metric of one group,
kept exactly like a run's series:

* `group_series.refit_requested` is bumped in the transaction that changes a member's points of
  the group's fit metric, the membership (a run joins, leaves or is deleted) or a member's fit
  settings; the refitter claims rows whose counters differ with a compare-and-set lease
  (`lease_owner`, `lease_until`) and sets `refit_done` to the counter its snapshot read, so
  bursts coalesce and nothing is fitted twice at once or forgotten.
* `group_fits` keeps every stored group fit (the pooled result, each member's fit and the seed
  spread, with the engine's internal block) and the few summary columns lists and alerts read.

Like `alert_models`, this module extends the shared `Base` (never imported back by
`models.py`); `migrations/env.py` and the store import it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from scalewatch.server.db.models import METRIC_NAME, Base, utcnow


class GroupSeries(Base):
    """One metric of one group: its refit counters, lease and latest fit."""

    __tablename__ = "group_series"
    __table_args__ = (
        UniqueConstraint("project_id", "group_name", "metric", name="uq_group_series"),
        Index("ix_group_series_refit", "refit_requested", "refit_done"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    group_name: Mapped[str] = mapped_column(String(100))
    metric: Mapped[str] = mapped_column(String(METRIC_NAME))
    refit_requested: Mapped[int] = mapped_column(BigInteger, default=0)
    refit_done: Mapped[int] = mapped_column(BigInteger, default=0)
    # When the group was last marked dirty (claims take the longest-waiting first).
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    latest_fit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class GroupFit(Base):
    """Every fit of a group's metric: how the recipe's pooled A moved as its seeds trained."""

    __tablename__ = "group_fits"
    __table_args__ = (Index("ix_group_fits_series", "group_series_id", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_series_id: Mapped[int] = mapped_column(
        ForeignKey("group_series.id", ondelete="CASCADE")
    )
    # Denormalised from group_series so a history row says what it is without a join.
    project_id: Mapped[int] = mapped_column(Integer)
    group_name: Mapped[str] = mapped_column(String(100))
    metric: Mapped[str] = mapped_column(String(METRIC_NAME))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The group_series.refit_requested this fit saw (its inputs' version).
    requested: Mapped[int] = mapped_column(BigInteger, default=0)
    status: Mapped[str] = mapped_column(String(32))
    n_points: Mapped[int] = mapped_column(Integer)
    n_members: Mapped[int] = mapped_column(Integer, default=0)
    max_compute: Mapped[float | None] = mapped_column(Float, nullable=True)
    A: Mapped[float | None] = mapped_column(Float, nullable=True)
    A_lo: Mapped[float | None] = mapped_column(Float, nullable=True)
    A_hi: Mapped[float | None] = mapped_column(Float, nullable=True)
    has_intervals: Mapped[bool] = mapped_column(Boolean, default=False)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
