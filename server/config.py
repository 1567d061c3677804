"""Every server setting in one place.

Settings come from (in order of precedence) explicit CLI flags, `SCALEWATCH_*` environment
variables, then defaults. The embedded default is SQLite under `$SCALEWATCH_HOME`
(`~/.scalewatch`), so `scalewatch serve` works on a laptop with nothing else installed.

Each field `x` is read from `SCALEWATCH_X` (pydantic-settings); the two whose variable name
differs from the field say so with an alias. An empty variable counts as unset.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from scalewatch.server import limits

ENV_PREFIX = "SCALEWATCH_"
_TRUE = {"1", "true", "yes", "on"}


def scalewatch_home() -> Path:
    return Path(os.environ.get("SCALEWATCH_HOME") or Path.home() / ".scalewatch")


def default_sqlite_url(home: Path) -> str:
    return f"sqlite:///{home / 'scalewatch.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,
        frozen=True,
        extra="forbid",
        validate_by_name=True,
    )

    # Default: SQLite under `home` (filled in by `_default_database`).
    database_url: str = ""
    home: Path = Field(default_factory=lambda: Path.home() / ".scalewatch")
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)  # above it the socket layer wrapped it round
    auth: bool = True
    # Pool sized explicitly: one connection per concurrently served request thread plus the
    # refitter and alert workers. No overflow: an overflow connection is closed as soon as it is
    # returned to a full pool, so a busy server opened and closed a PostgreSQL connection for
    # nearly every request (bench/load.py --scaling 1 --saturate: 20 + 0 instead of 10 + 10,
    # the same 20 at most, gave +20% requests/s and -40% PostgreSQL CPU a request).
    pool_size: int = 20
    max_overflow: int = 0
    pool_timeout: float = 30.0
    # Base URL used in links sent out of the process (webhooks). Defaults to host:port.
    public_url: str | None = None
    # Background workers (refitter, alert timers, webhook outbox). Disabled in a few tests.
    workers_enabled: bool = Field(True, validation_alias=ENV_PREFIX + "WORKERS")
    # API-only deployments can leave the Dash app out.
    dashboard_enabled: bool = Field(True, validation_alias=ENV_PREFIX + "DASHBOARD")
    refit_interval: float = 0.5  # how often the refitter polls for dirty (run, metric) pairs
    # The refitter and alert workers in a child process at this much lower OS priority, so fits
    # never take the event loop's or ingest's CPU (server/refit_process.py). `scalewatch serve`
    # turns it on (`--refit-in-process` keeps the thread); in-process apps (tests) keep the thread.
    refit_process: bool = False
    refit_nice: int = Field(10, ge=0, le=19)
    # Alerts: how often `stalled` rules are checked; webhook retry base delay (doubles per
    # attempt, jittered, capped at an hour), attempts before giving up, per-request timeout.
    alert_interval: float = 15.0
    webhook_backoff: float = 30.0
    webhook_max_attempts: int = 20
    webhook_timeout: float = 10.0
    # Stateless fits (`POST /api/v1/fit`) run in this many child processes per server process,
    # each killed when it runs longer than `fit_timeout` seconds.
    fit_processes: int = Field(2, ge=1)
    fit_timeout: float = Field(30.0, gt=0)
    # Stateless fits that may wait for a busy fit process; more are a 503 with Retry-After.
    fit_queue: int = Field(8, ge=0)
    # Fits and comparisons one token (one client address with auth off) may run at once.
    expensive_reads_per_token: int = Field(limits.MAX_EXPENSIVE_READS_PER_TOKEN, ge=1)
    # Webhook targets on loopback, private, link-local (cloud metadata) or otherwise
    # non-public addresses are refused unless this is on (self-hosted relays).
    webhook_allow_private: bool = False
    # Seconds a verified token (or dashboard session) is trusted without a database lookup;
    # revocation in another process takes effect within this time (0: look up every request).
    token_cache_ttl: float = Field(1.0, ge=0)
    # `serve --demo`: simulated trainers inside the server process (server/demo/). Speed in
    # evaluations per second per run; burst: fraction of each run's budget logged at start.
    demo: bool = False
    # evaluations/s per demo run: one every 25 s keeps the demo live for 15+ minutes
    demo_speed: float = 0.04
    demo_burst: float = 0.4

    @field_validator(
        "auth",
        "workers_enabled",
        "dashboard_enabled",
        "demo",
        "webhook_allow_private",
        mode="before",
    )
    @classmethod
    def _flag(cls, v: Any) -> Any:
        # As always: 1/true/yes/on switch a flag on, any other word switches it off.
        return v.strip().lower() in _TRUE if isinstance(v, str) else v

    @model_validator(mode="before")
    @classmethod
    def _default_database(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("database_url"):
            home = data.get("home") or scalewatch_home()
            data = {**data, "database_url": default_sqlite_url(Path(home))}
        return data

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def with_overrides(self, **kwargs: object) -> Settings:
        """A copy with the given fields changed (None: keep), validated."""
        clean = {k: v for k, v in kwargs.items() if v is not None}
        return self.model_validate({**self.model_dump(), **clean})


def environment_variables() -> dict[str, str]:
    """{SCALEWATCH_* variable: the setting it sets}, e.g. SCALEWATCH_WORKERS: workers_enabled."""
    out: dict[str, str] = {}
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        out[alias if isinstance(alias, str) else ENV_PREFIX + name.upper()] = name
    return out


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment; keyword overrides win (None means "not given")."""
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**given)
