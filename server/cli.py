"""Server-side subcommands of `scalewatch`: serve, simulate, db upgrade/current, token, fit.

Imported only when one of them runs, so the trainer-only base install never needs FastAPI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from scalewatch.server.config import Settings, load_settings
from scalewatch.server.domain.tokens import Token

if TYPE_CHECKING:  # the CLI imports the database layer only for commands that use it
    from scalewatch.server.store.base import Store


def add_database_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--database-url",
        help="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db "
        "(default: $SCALEWATCH_DATABASE_URL, else SQLite under $SCALEWATCH_HOME)",
    )


def _settings(args: argparse.Namespace, **extra: object) -> Settings:
    from pydantic import ValidationError

    try:
        return load_settings(database_url=getattr(args, "database_url", None), **extra)
    except ValidationError as exc:  # a flag or SCALEWATCH_* variable out of its range
        why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"scalewatch: invalid setting: {why}", file=sys.stderr)
        raise SystemExit(2) from None


@contextlib.contextmanager
def _database_errors(url: str) -> Iterator[None]:
    """A database URL SQLAlchemy cannot use, or a database it cannot reach (refused, wrong
    password): one line naming it (password hidden) and exit 2, not a traceback."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    try:
        yield
    except (ArgumentError, NoSuchModuleError) as exc:
        print(f"scalewatch: cannot use database URL {_shown_url(url)}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except OperationalError as exc:
        first = str(exc.orig or exc).strip().splitlines()[0]
        print(f"scalewatch: cannot reach the database at {_shown_url(url)}: {first}",
              file=sys.stderr)
        raise SystemExit(2) from None


def _shown_url(url: str) -> str:
    try:
        return _display_url(url)
    except Exception:  # noqa: BLE001 - a URL that does not even parse: show its scheme only
        return url.split("://", 1)[0] + "://..."


def _store(settings: Settings, upgrade: bool) -> Store:
    from scalewatch.server.db.engine import make_engine
    from scalewatch.server.db.migrate import SchemaOutOfDate, ensure_schema
    from scalewatch.server.store import SqlStore

    with _database_errors(settings.database_url):
        engine = make_engine(settings)
        try:
            ensure_schema(engine, auto_upgrade=upgrade)
        except SchemaOutOfDate as exc:
            print(f"scalewatch: {exc}", file=sys.stderr)
            raise SystemExit(2) from exc
    return SqlStore(engine)


def _prog() -> str:
    """How this `scalewatch` was invoked (`.venv/bin/scalewatch` after scripts/run, which does
    not put it on PATH), so the commands we suggest can be pasted as they are."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) != "scalewatch":
        return "scalewatch"
    rel = os.path.relpath(argv0)
    return rel if not rel.startswith("..") and os.sep in rel else argv0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = _settings(
        args,
        host=args.host,
        port=args.port,
        auth=False if args.no_auth else None,
        public_url=args.public_url,
        webhook_allow_private=True if args.webhook_allow_private else None,
    )
    # SQLite is the embedded default and upgrades itself; a server database is upgraded
    # deliberately by an operator, so we refuse to run on an old schema.
    store = _store(settings, upgrade=settings.is_sqlite)
    if settings.auth and store.count_tokens() == 0:
        _, token = store.create_token("initial-admin", "admin")
        print("=" * 72, flush=True)
        print("No API token existed, so an admin token was created. It is shown only once:")
        print(f"\n    {token}\n")
        print("Use it as `Authorization: Bearer <token>` or SCALEWATCH_TOKEN; create more with")
        print(f"`{_prog()} token create --scope write --name trainer-1`.")
        print("=" * 72, flush=True)
    elif not settings.auth:
        print(
            "scalewatch: authentication is OFF (--no-auth); anyone who can reach "
            f"{settings.host}:{settings.port} can read and write.",
            flush=True,
        )
    store.engine.dispose()
    env = {
        "SCALEWATCH_DATABASE_URL": settings.database_url,
        "SCALEWATCH_AUTH": "1" if settings.auth else "0",
        "SCALEWATCH_HOST": settings.host,
        "SCALEWATCH_PORT": str(settings.port),
    }
    if settings.public_url:
        env["SCALEWATCH_PUBLIC_URL"] = settings.public_url
    if args.demo:
        env["SCALEWATCH_DEMO"] = "1"
    # Fits in a child process at a lower priority, unless asked otherwise (flag or environment).
    if args.refit_in_process:
        env["SCALEWATCH_REFIT_PROCESS"] = "0"
    else:
        os.environ.setdefault("SCALEWATCH_REFIT_PROCESS", "1")
    if settings.webhook_allow_private:
        env["SCALEWATCH_WEBHOOK_ALLOW_PRIVATE"] = "1"
    os.environ.update(env)
    print(
        f"scalewatch: serving on http://{settings.host}:{settings.port} "
        f"(dashboard /dashboard/, API docs /docs, database {settings.database_url.split('://')[0]})",
        flush=True,
    )
    uvicorn.run(
        "scalewatch.server.api.main:build_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=args.workers,
        log_level=args.log_level,
        proxy_headers=True,
        # Stopping never waits on a slow request for long: past this, open requests are
        # cancelled (a request fit's child process is killed with it).
        timeout_graceful_shutdown=10,
    )
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from scalewatch.server.db.engine import make_engine
    from scalewatch.server.db.migrate import current_revision, head_revision, upgrade

    settings = _settings(args)
    with _database_errors(settings.database_url):
        engine = make_engine(settings)
        if args.db_command == "upgrade":
            before = current_revision(engine)
            upgrade(engine)
            print(f"database upgraded: {before or 'empty'} -> {current_revision(engine)}")
        else:
            cur, head = current_revision(engine), head_revision(engine)
            print(f"current: {cur or 'empty'}  head: {head}  "
                  f"{'(up to date)' if cur == head else ''}")
    return 0


def _display_url(url: str) -> str:
    """The database URL without its password, for messages."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _token_store(args: argparse.Namespace) -> Store:
    """The store the token commands write to; never a silently created empty database.

    A token written to the wrong database (another $SCALEWATCH_HOME, a typo in the URL) is
    rejected by the running server with no hint why, so a database without scalewatch's
    schema is refused unless --create says a new one is meant.
    """
    from scalewatch.server.db.engine import make_engine
    from scalewatch.server.db.migrate import current_revision

    settings = _settings(args)
    url = settings.database_url
    shown = _display_url(url)
    create = bool(getattr(args, "create", False))
    if settings.is_sqlite:
        path = url.split("///", 1)[-1]
        missing = not path or path == ":memory:" or not os.path.exists(path)
    else:
        missing = False
    if not missing:
        with _database_errors(url):
            engine = make_engine(settings)
            try:
                missing = current_revision(engine) is None
            finally:
                engine.dispose()
    if missing and not create:
        print(
            f"scalewatch: no scalewatch database at {shown}.\n"
            "  Point at the server's database (--database-url, $SCALEWATCH_DATABASE_URL or the "
            "server's $SCALEWATCH_HOME),\n"
            "  ask the running server instead (--url URL --token ADMIN_TOKEN),\n"
            "  or pass --create to start a new, empty database there.",
            file=sys.stderr,
        )
        raise SystemExit(2)
    print(f"scalewatch: database {shown}{' (created)' if missing else ''}", file=sys.stderr)
    return _store(settings, upgrade=True)


def _token_http(args: argparse.Namespace) -> int:
    """The token commands against a running server's /api/v1/tokens (admin token)."""
    import json
    import urllib.error
    import urllib.request

    base = args.url.rstrip("/") + "/api/v1/tokens"
    if not args.token:
        print("scalewatch: --url needs an admin token (--token or $SCALEWATCH_TOKEN)",
              file=sys.stderr)
        return 2
    method, url, body = "GET", base, None
    if args.token_command == "create":
        fields = {"name": args.name, "scope": args.scope, "projects": args.projects}
        method, body = "POST", json.dumps(fields).encode()
    elif args.token_command == "revoke":
        method, url = "DELETE", f"{base}/{args.id}"
    req = urllib.request.Request(url, data=body, method=method, headers={
        "Authorization": f"Bearer {args.token}", "Content-Type": "application/json",
        "Accept": "application/json",
    })
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - operator's URL
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:500]
        print(f"scalewatch: {args.url} answered {exc.code}: {detail}", file=sys.stderr)
        return 2
    except (urllib.error.URLError, OSError) as exc:
        print(f"scalewatch: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    print(f"scalewatch: server {args.url}", file=sys.stderr)
    if args.token_command == "create":
        answer = json.loads(raw)
        created = Token.model_validate(answer)
        print(answer["token"])
        print(f"(token {created.id} '{created.name}', scope {created.scope}"
              f"{_limited_to(created)}: shown only once)", file=sys.stderr)
    elif args.token_command == "list":
        _print_tokens([Token.model_validate(t) for t in json.loads(raw)["tokens"]])
    else:
        print(f"token {args.id} revoked")
    return 0


def _limited_to(token: Token) -> str:
    return f", projects {', '.join(token.projects)}" if token.projects else ""


def _print_tokens(tokens: list[Token]) -> None:
    for t in tokens:
        state = "revoked" if t.revoked else "active"
        print(f"{t.id:>4}  {t.prefix}…  {t.scope:<6} {state:<8} {t.name}"
              f"{_limited_to(t)}")


def _token_name_problem(name: str) -> str | None:
    """Why POST /api/v1/tokens would refuse `name` (empty, blank, NUL, too long), in its words:
    the local commands write to the database directly, past the API's checks."""
    from pydantic import ValidationError

    from scalewatch.server.api.schemas.tokens import TokenCreate
    from scalewatch.server.domain.checks import field_errors

    try:
        TokenCreate(name=name)
    except ValidationError as exc:
        return "; ".join(f"--name: {e['msg']}" for e in field_errors(exc))
    return None


def _url_problem(url: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return None
    return f"--url must be an http:// or https:// URL, got {url!r}"


def _bounded(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [lo, hi] (a port past 65535 was wrapped round)."""

    def parse(text: str) -> int:
        if text.isascii() and text.lstrip("-").isdigit() and lo <= int(text) <= hi:
            return int(text)
        raise argparse.ArgumentTypeError(f"expected a whole number {lo} .. {hi}, not {text!r}")

    return parse


def _token_id(text: str) -> int:
    """A token id as the API takes it (a 32-bit id): past 64 bits SQLite raised OverflowError."""
    from scalewatch.server.domain.checks import parse_id

    token_id = parse_id(text)
    if token_id:
        return token_id
    raise argparse.ArgumentTypeError(f"a token id is a whole number 1 .. {2**31 - 1}, not {text!r}")


def cmd_token(args: argparse.Namespace) -> int:
    problem = _token_name_problem(args.name) if args.token_command == "create" else None
    if problem is None and getattr(args, "url", None):
        problem = _url_problem(args.url)
    if problem is not None:
        print(f"scalewatch: {problem}", file=sys.stderr)
        return 2
    if getattr(args, "url", None):
        return _token_http(args)
    store = _token_store(args)
    if args.token_command == "create":
        try:
            info, token = store.create_token(args.name, args.scope, args.projects)
        except ValueError as exc:
            print(f"scalewatch: {exc}", file=sys.stderr)
            return 2
        print(token)
        print(
            f"(token {info.id} '{info.name}', scope {info.scope}{_limited_to(info)}: "
            "shown only once)",
            file=sys.stderr,
        )
    elif args.token_command == "list":
        _print_tokens(store.list_tokens())
    elif args.token_command == "revoke":
        if not store.revoke_token(args.id):
            print(f"scalewatch: no token {args.id}", file=sys.stderr)
            return 2
        print(f"token {args.id} revoked")
    return 0


def _token_target_options(p: argparse.ArgumentParser, create: bool = False) -> None:
    add_database_option(p)
    p.add_argument("--url", help="ask this running server instead of opening a database "
                   "(needs an admin token)")
    p.add_argument("--token", default=os.environ.get("SCALEWATCH_TOKEN"),
                   help="admin token for --url (default: $SCALEWATCH_TOKEN)")
    if create:
        p.add_argument("--create", action="store_true",
                       help="create the database if it does not exist yet")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the API and dashboard")
    add_database_option(p)
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_bounded(0, 65535), default=None, help="port (default 8765)")
    p.add_argument("--workers", type=_bounded(1, 1024), default=1, help="server processes")
    p.add_argument("--refit-in-process", action="store_true",
                   help="fit in a thread of each server process instead of a child process at "
                   "a lower OS priority (SCALEWATCH_REFIT_PROCESS=0)")
    p.add_argument("--no-auth", action="store_true", help="turn authentication off (laptop)")
    p.add_argument("--public-url", help="external base URL used in alert links")
    p.add_argument("--demo", action="store_true", help="also run simulated trainers")
    p.add_argument(
        "--webhook-allow-private",
        action="store_true",
        help="allow webhook targets on loopback/private addresses (self-hosted relays)",
    )
    p.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug", "trace"))
    p.set_defaults(func=cmd_serve)

    from scalewatch.server.demo.cli import (  # no numpy at import
        add_simulate_arguments,
        cmd_simulate,
    )

    p = sub.add_parser("simulate", help="simulated ScaleRL trainers posting to a server")
    add_simulate_arguments(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("db", help="database schema")
    dbsub = p.add_subparsers(dest="db_command", required=True)
    for name, text in (("upgrade", "apply migrations"), ("current", "show the schema revision")):
        q = dbsub.add_parser(name, help=text)
        add_database_option(q)
    p.set_defaults(func=cmd_db)

    p = sub.add_parser("token", help="API tokens")
    tsub = p.add_subparsers(dest="token_command", required=True)
    q = tsub.add_parser("create", help="create a token and print it once")
    q.add_argument("--scope", choices=["read", "write", "admin"], default="write")
    q.add_argument("--name", required=True)
    q.add_argument(
        "--project", action="append", dest="projects", metavar="PROJECT", default=None,
        help="limit the token to this project (repeat for several); default: every project",
    )
    _token_target_options(q, create=True)
    q = tsub.add_parser("list", help="list tokens (never their secrets)")
    _token_target_options(q)
    q = tsub.add_parser("revoke", help="revoke a token")
    q.add_argument("id", type=_token_id)
    _token_target_options(q)
    p.set_defaults(func=cmd_token)

    # `fit` parses its own arguments (trainer_client.cli hands it the whole argument list);
    # this entry is here so that `scalewatch --help` lists it with the others.
    sub.add_parser("fit", help="fit the sigmoid to a CSV of compute,value (scalewatch fit -h)",
                   add_help=False)
