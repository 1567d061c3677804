"""The `scalewatch` command. Standard library only: server subcommands import lazily.

The client-only install (the trainer's, `trainer_client` alone) has `sync`, `follow`, `import`
and `pipelinerl-sidecar`; `serve`, `db`, `token` and `fit` need the service
(`scalewatch.server`, installed with the server extra) and say how to install it when it is
missing.
"""

from __future__ import annotations

import argparse
import sys

SERVER_COMMANDS = ("serve", "db", "token", "fit", "simulate")
INSTALL_HINT = (
    "scalewatch: the '{cmd}' command needs the server extra, which is not installed "
    "(missing module: {missing}).\n    pip install 'scalewatch[server]'"
)


SERVER_HELP = {
    "serve": "run the API and dashboard",
    "db": "database schema",
    "token": "API tokens",
    "fit": "fit the sigmoid to a CSV of compute,value",
    "simulate": "simulated ScaleRL trainers posting to a server",
}

SERVER_MODULES = ("scalewatch.server", "fastapi", "sqlalchemy", "alembic", "uvicorn", "numpy",
                  "scipy")


def _missing_server_module() -> str | None:
    from importlib.util import find_spec

    for name in SERVER_MODULES:
        try:
            found = find_spec(name) is not None
        except ModuleNotFoundError:  # `scalewatch` itself is missing (the client-only install)
            found = False
        if not found:
            return name
    return None


def _server_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> bool:
    if _missing_server_module() is not None:
        return False
    from scalewatch.server import cli as server_cli

    server_cli.register(sub)
    return True


def _client_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from trainer_client.sync import add_sync_arguments, sync_main

    p = sub.add_parser("sync", help="send spooled points that did not reach the server")
    add_sync_arguments(p)
    p.set_defaults(func=sync_main)
    from trainer_client.follow import (
        add_follow_arguments,
        add_import_arguments,
        follow_main,
        import_main,
    )
    from trainer_client.formats import follow_formats

    p = sub.add_parser("follow", help="tail a trainer's log files into a run "
                       f"({', '.join(follow_formats())})")
    add_follow_arguments(p)
    p.set_defaults(func=follow_main)
    p = sub.add_parser("import", help="load a finished run's log files once")
    add_import_arguments(p)
    p.set_defaults(func=import_main)
    from trainer_client.fit_metric_cli import add_fit_metric_arguments, fit_metric_main

    p = sub.add_parser("fit-metric", help="the metric a project's runs (or one run) fit")
    add_fit_metric_arguments(p)
    p.set_defaults(func=fit_metric_main)
    p = sub.add_parser("pipelinerl-sidecar", help="follow a PipelineRL experiment directory")
    try:
        from trainer_client.pipelinerl import add_sidecar_arguments, sidecar_main
    except ImportError:  # pragma: no cover - present in every install
        return
    add_sidecar_arguments(p)
    p.set_defaults(func=sidecar_main)


def _cmd_fit(argv: list[str]) -> int:
    from scalewatch.server.fitting.cli import main as fit_main

    return fit_main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "fit":
        # `fit` owns its whole argument list (its own --help, exit 2 on bad files).
        missing = _missing_server_module()
        if missing:
            print(INSTALL_HINT.format(cmd="fit", missing=missing), file=sys.stderr)
            return 2
        return _cmd_fit(argv[1:])
    parser = argparse.ArgumentParser(
        prog="scalewatch", description="Live ScaleRL scaling-curve fits for RL training runs."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    has_server = _server_parsers(sub)
    _client_parsers(sub)
    if not has_server and argv and argv[0] in SERVER_COMMANDS:
        print(INSTALL_HINT.format(cmd=argv[0], missing=_missing_server_module()), file=sys.stderr)
        return 2
    if not has_server:
        # Listed anyway, so `--help` shows every command and says what it needs.
        for cmd in SERVER_COMMANDS:
            sub.add_parser(cmd, help=f"{SERVER_HELP[cmd]} (needs the server extra)")
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if not argv else 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
