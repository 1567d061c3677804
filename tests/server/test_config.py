"""Settings: every SCALEWATCH_* variable, its default, and load_settings(**overrides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalewatch.server.config import Settings, environment_variables, load_settings

SERVER_VARIABLES = {
    # variable: (field, value set, expected)
    "SCALEWATCH_DATABASE_URL": ("database_url", "postgresql+psycopg://u@h/db", None),
    "SCALEWATCH_HOST": ("host", "0.0.0.0", None),
    "SCALEWATCH_PORT": ("port", "9001", 9001),
    "SCALEWATCH_AUTH": ("auth", "0", False),
    "SCALEWATCH_POOL_SIZE": ("pool_size", "3", 3),
    "SCALEWATCH_MAX_OVERFLOW": ("max_overflow", "4", 4),
    "SCALEWATCH_PUBLIC_URL": ("public_url", "https://sw.example", None),
    "SCALEWATCH_WORKERS": ("workers_enabled", "off", False),
    "SCALEWATCH_DASHBOARD": ("dashboard_enabled", "no", False),
    "SCALEWATCH_REFIT_INTERVAL": ("refit_interval", "0.25", 0.25),
    "SCALEWATCH_REFIT_PROCESS": ("refit_process", "1", True),
    "SCALEWATCH_REFIT_NICE": ("refit_nice", "5", 5),
    "SCALEWATCH_ALERT_INTERVAL": ("alert_interval", "5", 5.0),
    "SCALEWATCH_WEBHOOK_BACKOFF": ("webhook_backoff", "1.5", 1.5),
    "SCALEWATCH_WEBHOOK_MAX_ATTEMPTS": ("webhook_max_attempts", "7", 7),
    "SCALEWATCH_WEBHOOK_TIMEOUT": ("webhook_timeout", "2", 2.0),
    "SCALEWATCH_DEMO": ("demo", "yes", True),
    "SCALEWATCH_DEMO_SPEED": ("demo_speed", "9", 9.0),
    "SCALEWATCH_DEMO_BURST": ("demo_burst", "0.1", 0.1),
    "SCALEWATCH_FIT_PROCESSES": ("fit_processes", "3", 3),
    "SCALEWATCH_FIT_TIMEOUT": ("fit_timeout", "4.5", 4.5),
    "SCALEWATCH_FIT_QUEUE": ("fit_queue", "0", 0),
    "SCALEWATCH_EXPENSIVE_READS_PER_TOKEN": ("expensive_reads_per_token", "5", 5),
    "SCALEWATCH_WEBHOOK_ALLOW_PRIVATE": ("webhook_allow_private", "1", True),
    "SCALEWATCH_TOKEN_CACHE_TTL": ("token_cache_ttl", "0", 0.0),
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in SERVER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SCALEWATCH_HOME", str(tmp_path))
    return monkeypatch


def test_defaults(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    s = load_settings()
    assert s.home == tmp_path
    assert s.database_url == f"sqlite:///{tmp_path / 'scalewatch.db'}" and s.is_sqlite
    assert (s.host, s.port, s.auth, s.public_url) == ("127.0.0.1", 8765, True, None)
    assert (s.pool_size, s.max_overflow, s.workers_enabled, s.dashboard_enabled) == (
        20,
        0,
        True,
        True,
    )
    assert (s.refit_interval, s.alert_interval) == (0.5, 15.0)
    assert (s.webhook_backoff, s.webhook_max_attempts, s.webhook_timeout) == (30.0, 20, 10.0)
    assert (s.demo, s.demo_speed, s.demo_burst) == (False, 0.04, 0.4)
    assert s.base_url == "http://127.0.0.1:8765"


def test_every_variable_is_read(env: pytest.MonkeyPatch) -> None:
    for name, (_, value, _) in SERVER_VARIABLES.items():
        env.setenv(name, value)
    s = load_settings()
    for _name, (field, value, expected) in SERVER_VARIABLES.items():
        assert getattr(s, field) == (value if expected is None else expected), field
    assert s.base_url == "https://sw.example"


def test_flags_and_empty_values(env: pytest.MonkeyPatch) -> None:
    env.setenv("SCALEWATCH_AUTH", "ON")
    env.setenv("SCALEWATCH_WORKERS", "whatever")  # any word but 1/true/yes/on is off
    env.setenv("SCALEWATCH_PORT", "")  # empty counts as unset
    env.setenv("SCALEWATCH_PUBLIC_URL", "")
    s = load_settings()
    assert s.auth is True and s.workers_enabled is False
    assert s.port == 8765 and s.public_url is None


def test_overrides_win_and_none_means_not_given(env: pytest.MonkeyPatch) -> None:
    env.setenv("SCALEWATCH_PORT", "9001")
    env.setenv("SCALEWATCH_AUTH", "1")
    s = load_settings(port=None, auth=False, workers_enabled=False, refit_interval=0.1)
    assert (s.port, s.auth, s.workers_enabled, s.refit_interval) == (9001, False, False, 0.1)
    t = s.with_overrides(host="h", port=None)
    assert (t.host, t.port, t.auth) == ("h", 9001, False)
    with pytest.raises(ValueError):
        load_settings(no_such_setting=1)
    assert isinstance(s, Settings)


def test_variable_names() -> None:
    names = set(SERVER_VARIABLES) | {"SCALEWATCH_HOME", "SCALEWATCH_POOL_TIMEOUT"}
    assert set(environment_variables()) == names


def test_every_variable_is_in_the_readme_configuration_table() -> None:
    """The README's table is where operators look: a new setting must be listed there, written
    out or as `…_REST` in a row whose first variable starts with the same family
    (`SCALEWATCH_WEBHOOK_BACKOFF`, `…_MAX_ATTEMPTS` is SCALEWATCH_WEBHOOK_MAX_ATTEMPTS)."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("### Configuration", 1)[1].split("\n\n", 2)[1]
    listed: set[str] = set()
    for row in table.splitlines():
        cell = row.split("|")[1] if row.startswith("|") else ""
        full = re.findall(r"`(SCALEWATCH_[A-Z_]+)`", cell)
        listed.update(full)
        parts = full[0].split("_") if full else []
        families = {"_".join(parts[:i]) for i in range(1, len(parts))}
        listed.update(f + "_" + rest for rest in re.findall(r"`…_([A-Z_]+)`", cell)
                      for f in families)
    missing = set(environment_variables()) - listed
    assert not missing, f"missing from the README's configuration table: {sorted(missing)}"
    assert "--webhook-allow-private`" in table  # the serve flag, in the flag column
