"""SQLAlchemy 2 models: the schema every other part reads and writes through the store.

Points are keyed by (series_id, step) where a series is one metric of one run: the primary key
itself is the index behind "points of one metric of one run by step", which stays a range scan at
10^7 points. Per-series and per-run summaries (last step, last value, point count) are updated in
the ingest transaction so run lists never touch the points table.
"""

from __future__ import annotations

from datetime import datetime, timezone
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
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

RUN_STATUSES = ("running", "finished", "failed")
# Columns holding a metric name (migration 0015: MLflow's metric keys are up to 250 characters;
# limits.MAX_METRIC_NAME_LENGTH). Project, run and token names are String(200).
METRIC_NAME = 250


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON}


class Project(Base):
    __tablename__ = "projects"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # The project's default fit metric (migration 0007): runs without their own fit it.
    fit_metric: Mapped[str | None] = mapped_column(String(METRIC_NAME), nullable=True)
    # The default noise prior of its runs' fits (migration 0011): "project" or [mean, sd].
    noise_prior: Mapped[Any] = mapped_column(JSON, nullable=True)
    # The default prior on B of its runs' fits (migration 0012): "project" or [centre, scale].
    b_prior: Mapped[Any] = mapped_column(JSON, nullable=True)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_runs_project_name"),
        Index("ix_runs_project_created", "project_id", "created_at"),
        Index("ix_runs_project_group", "project_id", "group_name"),
        # A deleted run's id is never handed out again (migration 0016): a client still holding
        # it (MLFLOW_RUN_ID, a script, a follower's state) gets a 404, not someone else's run.
        # PostgreSQL's sequences never reuse; SQLite without AUTOINCREMENT reuses the highest.
        {"sqlite_autoincrement": True},
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    notes: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="running")
    compute_unit: Mapped[str] = mapped_column(String(32), default="gpu_hours")
    target_compute: Mapped[float | None] = mapped_column(Float, nullable=True)
    fit_metric: Mapped[str | None] = mapped_column(String(METRIC_NAME), nullable=True)
    # r0, warmup, fit_until, value_range: the fitting knobs a PATCH may change
    fit_settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The recipe the run is a seed of (migration 0008; `group` in the API). Named group_name
    # because GROUP is an SQL keyword every raw statement would have to quote.
    group_name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_step: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_compute: Mapped[float | None] = mapped_column(Float, nullable=True)

    project: Mapped[Project] = relationship()
    series: Mapped[list[Series]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )


class RunTag(Base):
    """One row per (run, tag): tag filters use an index instead of scanning JSON."""

    __tablename__ = "run_tags"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(100), primary_key=True)
    __table_args__ = (Index("ix_run_tags_tag", "tag", "run_id"),)


class Series(Base):
    """One metric of one run (the issue's "metrics" table) and its latest-value summary.

    `refit_requested` / `refit_done` are the refit seam: ingestion bumps the first in the same
    transaction as the points; the refitter fits every series whose counters differ.
    """

    __tablename__ = "series"
    __table_args__ = (
        UniqueConstraint("run_id", "name", name="uq_series_run_name"),
        Index("ix_series_refit", "refit_requested", "refit_done"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(METRIC_NAME))  # the metric's name
    n_points: Mapped[int] = mapped_column(BigInteger, default=0)
    last_step: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_compute: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    refit_requested: Mapped[int] = mapped_column(BigInteger, default=0)
    refit_done: Mapped[int] = mapped_column(BigInteger, default=0)
    # When the series last went from fitted to dirty (migration 0014): the arrival of the oldest
    # point no fit has seen yet, so the refit lag (arrival -> the fit that includes it) is known.
    dirty_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Denormalised pointer so run lists read one fit row per run, not the fit history.
    latest_fit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # A refit lease rather than a held row lock: ingestion keeps bumping refit_requested while
    # a worker fits, and a crashed worker's lease simply expires.
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    run: Mapped[Run] = relationship(back_populates="series")


class Point(Base):
    """One value of one series at one step.

    No foreign key to series on purpose: the per-row check cost a third of ingest time on
    PostgreSQL. Points are only ever written for a series the same transaction has just read or
    created, and deleted explicitly with their run (see `SqlStore.delete_run`).
    """

    __tablename__ = "points"
    series_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    compute: Mapped[float] = mapped_column(Float)
    value: Mapped[float] = mapped_column(Float)
    wall_time: Mapped[float | None] = mapped_column(Float, nullable=True)


class PointChunk(Base):
    """A rollup of a series' points over a step chunk (`server/store/chunks.py`): what
    downsampling reads instead of the raw points. No foreign key to series, as for points
    (migration 0010: its check cost ~1.5 ms an ingest); deleted explicitly with its run."""

    __tablename__ = "point_chunks"
    series_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    chunk: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    n: Mapped[int] = mapped_column(Integer)
    min_step: Mapped[int] = mapped_column(BigInteger)
    max_step: Mapped[int] = mapped_column(BigInteger)
    min_compute: Mapped[float] = mapped_column(Float)
    max_compute: Mapped[float] = mapped_column(Float)
    first_compute: Mapped[float] = mapped_column(Float)
    first_value: Mapped[float] = mapped_column(Float)
    last_compute: Mapped[float] = mapped_column(Float)
    last_value: Mapped[float] = mapped_column(Float)
    lo_step: Mapped[int] = mapped_column(BigInteger)
    lo_compute: Mapped[float] = mapped_column(Float)
    lo_value: Mapped[float] = mapped_column(Float)
    hi_step: Mapped[int] = mapped_column(BigInteger)
    hi_compute: Mapped[float] = mapped_column(Float)
    hi_value: Mapped[float] = mapped_column(Float)


class Fit(Base):
    """Every fit of a series: the history of how the A estimate moved as compute grew."""

    __tablename__ = "fits"
    __table_args__ = (Index("ix_fits_series_id", "series_id", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    status: Mapped[str] = mapped_column(String(32))
    n_points: Mapped[int] = mapped_column(Integer)
    max_compute: Mapped[float | None] = mapped_column(Float, nullable=True)
    A: Mapped[float | None] = mapped_column(Float, nullable=True)
    A_lo: Mapped[float | None] = mapped_column(Float, nullable=True)
    A_hi: Mapped[float | None] = mapped_column(Float, nullable=True)
    has_intervals: Mapped[bool] = mapped_column(Boolean, default=False)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The few keys a run list shows, written with the fit: lists then never parse `result`,
    # which carries parameter draws and is two orders of magnitude larger.
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class ApiToken(Base):
    """Bearer tokens, stored as SHA-256 digests: a leaked database does not leak tokens."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    scope: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    # The project names this token may touch (migration 0013); NULL: every project.
    projects: Mapped[Any] = mapped_column(JSON, nullable=True)


class DashboardSession(Base):
    """A dashboard sign-in: the browser's cookie holds a random session id whose SHA-256 is
    stored here, never the API token. Ended by logout, by expiry, and by revoking the token
    it was opened with (lookups join the token and check it)."""

    __tablename__ = "dashboard_sessions"
    __table_args__ = (
        UniqueConstraint("session_hash", name="uq_dashboard_sessions_hash"),
        Index("ix_dashboard_sessions_token", "token_id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_hash: Mapped[str] = mapped_column(String(64))
    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
