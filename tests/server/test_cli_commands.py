"""The `scalewatch` command line: every command in --help, token commands that say where they
wrote and never create an empty database by accident, tokens from a running server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from scalewatch.server.cli import register
from tests.server.test_schema_and_cli import run_cli
from tests.support.live_server import LiveServer


def _registered_commands() -> set[str]:
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register(sub)
    return set(sub.choices) | {"sync", "pipelinerl-sidecar"}


def test_help_lists_every_command() -> None:
    out = run_cli("--help")
    assert out.returncode == 0, out.stderr
    listed = set(re.findall(r"^ {4}(\S+)", out.stdout, flags=re.M))
    commands = _registered_commands()
    assert {"serve", "simulate", "db", "token", "fit", "sync", "pipelinerl-sidecar"} <= commands
    assert commands <= listed, out.stdout


def test_help_without_the_server_extra_still_lists_every_command() -> None:
    code = (
        "import sys; sys.modules['fastapi'] = None;"
        "from trainer_client.cli import main; sys.exit(main(['--help']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for cmd in _registered_commands():
        assert re.search(rf"^ {{4}}{re.escape(cmd)}\b", out.stdout, flags=re.M), (cmd, out.stdout)
    assert "needs the server extra" in out.stdout


def test_token_create_refuses_a_missing_database(tmp_path: Path) -> None:
    home = tmp_path / "wrong-home"
    env = {"SCALEWATCH_HOME": str(home), "SCALEWATCH_DATABASE_URL": ""}
    out = run_cli("token", "create", "--name", "x", env=env)
    assert out.returncode == 2
    assert out.stdout == ""  # no token printed
    assert str(home / "scalewatch.db") in out.stderr and "--create" in out.stderr
    assert "--url" in out.stderr
    assert not (home / "scalewatch.db").exists()
    out = run_cli("token", "list", env=env)
    assert out.returncode == 2 and not (home / "scalewatch.db").exists()


def test_token_create_with_create_makes_the_database_and_says_where(tmp_path: Path) -> None:
    home = tmp_path / "new-home"
    env = {"SCALEWATCH_HOME": str(home), "SCALEWATCH_DATABASE_URL": ""}
    out = run_cli("token", "create", "--name", "x", "--create", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("sw_")
    assert f"database sqlite:///{home / 'scalewatch.db'} (created)" in out.stderr
    # The next call finds it and says which one it used.
    out = run_cli("token", "list", env=env)
    assert out.returncode == 0, out.stderr
    assert f"database sqlite:///{home / 'scalewatch.db'}" in out.stderr
    assert "(created)" not in out.stderr and " x" in out.stdout


def test_token_command_refuses_a_database_without_schema(empty_database_url: str) -> None:
    out = run_cli("token", "create", "--name", "x", "--database-url", empty_database_url)
    assert out.returncode == 2 and "no scalewatch database" in out.stderr
    assert out.stdout == ""


def test_token_messages_never_show_a_password() -> None:
    out = run_cli(
        "token", "list", "--database-url",
        "postgresql+psycopg://u:hunter2@127.0.0.1:1/nope",  # unreachable: fails, but says where
    )
    assert "hunter2" not in out.stdout + out.stderr


@pytest.mark.slow
def test_token_commands_against_a_running_server(sqlite_url: str, tmp_path: Path) -> None:
    server = LiveServer(sqlite_url, auth=True, home=tmp_path / "home")
    server.start()
    try:
        # A home with no database at all: --url never opens one.
        env = {"SCALEWATCH_HOME": str(tmp_path / "elsewhere"), "SCALEWATCH_DATABASE_URL": ""}
        url_args = ("--url", server.url, "--token", str(server.admin_token))
        out = run_cli("token", "create", "--name", "trainer-9", "--scope", "write", *url_args,
                      env=env)
        assert out.returncode == 0, out.stderr
        token = out.stdout.strip()
        assert token.startswith("sw_") and f"server {server.url}" in out.stderr
        ok = httpx.get(f"{server.url}/api/v1/runs", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        listed = run_cli("token", "list", *url_args, env=env)
        assert listed.returncode == 0 and "trainer-9" in listed.stdout
        tid = next(
            line.split()[0] for line in listed.stdout.splitlines() if "trainer-9" in line
        )
        out = run_cli("token", "revoke", tid, *url_args, env=env)
        assert out.returncode == 0, out.stderr
        bad = run_cli("token", "list", "--url", server.url, "--token", "sw_wrong", env=env)
        assert bad.returncode == 2 and "401" in bad.stderr
        assert not (tmp_path / "elsewhere").exists()
    finally:
        server.stop()


def _token_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`scalewatch token ...` in this process: (exit code, stdout, stderr)."""
    from trainer_client.cli import main

    try:
        code = main(["token", *args])
    except SystemExit as exc:  # argparse refusals
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("create", "--name", ""), "name"),  # the API's 422s, which the CLI did not apply
        (("create", "--name", "a\x00b"), "NUL"),
        (("create", "--name", "   "), "blank"),
        (("create", "--name", "n" * 201), "name"),
        (("revoke", "99999999999999999999"), "id"),  # an OverflowError traceback (SQLite)
        (("revoke", "0"), "id"),
        (("create", "--name", "x", "--url", "not-a-url", "--token", "t"), "--url"),  # ValueError
        (("list", "--url", "ftp://host", "--token", "t"), "--url"),
    ],
)
def test_token_commands_refuse_what_the_api_refuses_in_one_line(
    database_url: str, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str
) -> None:
    """The local token commands wrote names the API refuses (empty, NUL, blank, 5,000
    characters), a revoke of an id past 64 bits was a traceback, and an --url that is not an
    http(s) URL a ValueError traceback. Now: exit 2, one line naming what, no token made."""
    code, out, err = _token_cli(capsys, *args, "--database-url", database_url)
    assert code == 2, (out, err)
    assert out == "" and needle in err and "Traceback" not in err, err
    listed = _token_cli(capsys, "list", "--database-url", database_url)
    assert listed[0] == 0 and listed[1] == "", listed  # no token was created


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (("--port", "99999"), {}, "port"),  # it served on 34463 while saying 99999
        (("--port", "-1"), {}, "port"),
        ((), {"SCALEWATCH_PORT": "99999"}, "port"),
        ((), {"SCALEWATCH_PORT": "eighty"}, "port"),  # a pydantic traceback
        (("--workers", "0"), {}, "workers"),
        (("--log-level", "bogus"), {}, "log-level"),  # a KeyError traceback from uvicorn
        (("--database-url", "nonsense://x"), {}, "nonsense://x"),  # NoSuchModuleError
        (("--database-url", "postgresql+psycopg://u:secret@127.0.0.1:1/x"), {},
         "cannot reach"),  # an OperationalError traceback
    ],
)
def test_serve_refuses_bad_settings_in_one_line(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], needle: str
) -> None:
    """`scalewatch serve` with a port out of range, no workers, an unknown log level, a
    database URL SQLAlchemy cannot use or a database it cannot reach: exit 2 and one line
    saying which, before anything listens (never a traceback, never the password)."""
    out = run_cli("serve", "--no-auth", *args,
                  env={"SCALEWATCH_HOME": str(tmp_path / "home"), **env}, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr[-1500:])
    assert "Traceback" not in out.stderr and needle in out.stderr, out.stderr[-1500:]
    assert "serving on" not in out.stdout and "secret" not in out.stderr


@pytest.mark.parametrize("command", [("db", "upgrade"), ("db", "current"), ("token", "list"),
                                     ("token", "create", "--name", "x")])
def test_database_commands_say_an_unreachable_database_in_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`db` and `token` against a database that refuses connections (or a URL SQLAlchemy
    cannot use) were OperationalError / NoSuchModuleError tracebacks: now exit 2, one line."""
    env = {"SCALEWATCH_HOME": str(tmp_path / "home")}
    for url, needle in (("postgresql+psycopg://u:secret@127.0.0.1:1/x", "cannot reach"),
                        ("nonsense://x", "cannot use database URL")):
        out = run_cli(*command, "--database-url", url, env=env, timeout=60)
        assert out.returncode == 2, (command, url, out.stderr[-1500:])
        assert "Traceback" not in out.stderr and needle in out.stderr, out.stderr[-1500:]
        assert "secret" not in out.stderr and out.stdout == ""
