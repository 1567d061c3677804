"""`scalewatch fit-metric`: which metric a project's runs (or one run) fit.

    scalewatch fit-metric --project math-rl val-core/gsm8k/acc/mean@1   # the project's default
    scalewatch fit-metric --project math-rl --run grpo-7b eval_reward   # one run's own
    scalewatch fit-metric --project math-rl --run grpo-7b --clear       # back to the default
    scalewatch fit-metric --project math-rl                             # show

A run fits its own fit metric, else its project's default, else the framework's validation
metric recognised by name (else its training reward). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any
from urllib.parse import quote

from trainer_client._http import Connection, TransportError
from trainer_client.run import DEFAULT_URL


def add_fit_metric_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("metric", nargs="?", default=None, help="the metric to fit (omit to show)")
    p.add_argument("--project", required=True)
    p.add_argument("--run", default=None, help="a run's name: set that run's own fit metric")
    p.add_argument("--clear", action="store_true", help="remove the setting")
    p.add_argument("--url", default=None, help="server URL (default $SCALEWATCH_URL)")
    p.add_argument("--token", default=None, help="API token (default $SCALEWATCH_TOKEN)")


def _call(conn: Connection, method: str, path: str, body: Any = None,
          params: dict[str, Any] | None = None) -> Any:
    raw = None if body is None else json.dumps(body).encode()
    r = conn.request(method, path, body=raw, params=params,
                     headers={"Content-Type": "application/json"} if raw else None)
    if r.status >= 400:
        text = r.body[:300].decode(errors="replace")
        raise LookupError(f"{method} {path}: HTTP {r.status}: {text}")
    return r.json()


def _find_run(conn: Connection, project: str, name: str) -> dict[str, Any]:
    offset = 0
    while True:
        page = _call(conn, "GET", "/api/v1/runs",
                     params={"project": project, "limit": 500, "offset": offset})
        for run in page["runs"]:
            if run["name"] == name:
                return run
        offset += len(page["runs"])
        if not page["runs"] or offset >= page["total"]:
            raise LookupError(f"no run {name!r} in project {project!r}")


def fit_metric_main(args: argparse.Namespace) -> int:
    if args.clear and args.metric:
        print("scalewatch fit-metric: give a METRIC or --clear, not both", file=sys.stderr)
        return 2
    url = (args.url or os.environ.get("SCALEWATCH_URL") or DEFAULT_URL).rstrip("/")
    conn = Connection(url, args.token or os.environ.get("SCALEWATCH_TOKEN"))
    change = args.clear or args.metric is not None
    value = None if args.clear else args.metric
    try:
        if args.run is not None:
            run = _find_run(conn, args.project, args.run)
            if change:
                run = _call(conn, "PATCH", f"/api/v1/runs/{run['id']}", {"fit_metric": value})
            print(f"{args.project}/{args.run} fits {run['fit_metric']} "
                  f"({run.get('fit_metric_reason', '')})")
        else:
            path = f"/api/v1/projects/{quote(args.project, safe='')}"
            project = (_call(conn, "PATCH", path, {"fit_metric": value}) if change
                       else _call(conn, "GET", path))
            default = project.get("fit_metric")
            print(f"project {args.project}: default fit metric "
                  f"{default or '(none: recognised from the framework names)'}")
    except (LookupError, TransportError) as exc:
        print(f"scalewatch fit-metric: {exc}", file=sys.stderr)
        return 1
    finally:
        conn.close()
    return 0
