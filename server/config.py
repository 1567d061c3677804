"""Every server setting in one place.

Settings come from (in order of precedence) explicit CLI flags, `SCALEWATCH_*` environment
variables, then defaults. The embedded default is SQLite under `$SCALEWATCH_HOME`
(`~/.scalewatch`), so `scalewatch serve` works on a laptop with nothing else installed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


def scalewatch_home() -> Path:
    return Path(os.environ.get("SCALEWATCH_HOME") or Path.home() / ".scalewatch")


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


@dataclass(frozen=True)
class Settings:
    database_url: str
    home: Path
    host: str = "127.0.0.1"
    port: int = 8765
    auth: bool = True
    # Pool sized explicitly: one connection per concurrently served request thread plus the
    # refitter and alert workers. Overflow absorbs bursts without unbounded growth.
    pool_size: int = 10
    max_overflow: int = 10
    pool_timeout: float = 30.0
    # Base URL used in links sent out of the process (webhooks). Defaults to host:port.
    public_url: str | None = None
    # Background workers (refitter, alert timers, webhook outbox). Disabled in a few tests.
    workers_enabled: bool = True
    dashboard_enabled: bool = True  # API-only deployments can leave the Dash app out
    refit_interval: float = 0.5  # how often the refitter polls for dirty (run, metric) pairs
    # Alerts: how often `stalled` rules are checked; webhook retry base delay (doubles per
    # attempt, jittered, capped at an hour), attempts before giving up, per-request timeout.
    alert_interval: float = 15.0
    webhook_backoff: float = 30.0
    webhook_max_attempts: int = 20
    webhook_timeout: float = 10.0
    # `serve --demo`: simulated trainers inside the server process (server/demo/). Speed in
    # evaluations per second per run; burst: fraction of each run's budget logged at start.
    demo: bool = False
    demo_speed: float = 2.0
    demo_burst: float = 0.4
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    def with_overrides(self, **kwargs: object) -> Settings:
        clean = {k: v for k, v in kwargs.items() if v is not None}
        return replace(self, **clean)  # type: ignore[arg-type]


def default_sqlite_url(home: Path) -> str:
    return f"sqlite:///{home / 'scalewatch.db'}"


def load_settings(**overrides: object) -> Settings:
    home = scalewatch_home()
    url = os.environ.get("SCALEWATCH_DATABASE_URL") or default_sqlite_url(home)
    settings = Settings(
        database_url=url,
        home=home,
        host=os.environ.get("SCALEWATCH_HOST", "127.0.0.1"),
        port=_env_int("SCALEWATCH_PORT", 8765),
        auth=_env_bool("SCALEWATCH_AUTH", True),
        pool_size=_env_int("SCALEWATCH_POOL_SIZE", 10),
        max_overflow=_env_int("SCALEWATCH_MAX_OVERFLOW", 10),
        public_url=os.environ.get("SCALEWATCH_PUBLIC_URL") or None,
        workers_enabled=_env_bool("SCALEWATCH_WORKERS", True),
        dashboard_enabled=_env_bool("SCALEWATCH_DASHBOARD", True),
        refit_interval=_env_float("SCALEWATCH_REFIT_INTERVAL", 0.5),
        alert_interval=_env_float("SCALEWATCH_ALERT_INTERVAL", 15.0),
        webhook_backoff=_env_float("SCALEWATCH_WEBHOOK_BACKOFF", 30.0),
        webhook_max_attempts=_env_int("SCALEWATCH_WEBHOOK_MAX_ATTEMPTS", 20),
        webhook_timeout=_env_float("SCALEWATCH_WEBHOOK_TIMEOUT", 10.0),
        demo=_env_bool("SCALEWATCH_DEMO", False),
        demo_speed=_env_float("SCALEWATCH_DEMO_SPEED", 2.0),
        demo_burst=_env_float("SCALEWATCH_DEMO_BURST", 0.4),
    )
    return settings.with_overrides(**overrides)
