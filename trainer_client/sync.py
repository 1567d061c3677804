"""Explicit replay of spools: what ``scalewatch sync`` calls.

:func:`replay_spools` walks ``$SCALEWATCH_HOME/spool/*/*``, creates (or gets) each run on the
server from its ``run.json`` and sends its batch files, oldest first. It never blocks forever:
each run gives up after ``max_failures`` consecutive failed attempts (with backoff between them)
and its points stay in the spool for the next try. A spool whose lock is held by a live process
(a trainer still sending) is skipped and reported as ``busy``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any

from ._http import Connection
from .journal import recover_into
from .queries import Queries
from .run import DEFAULT_URL
from .sender import Sender, SendTarget
from .spool import Spool, _pid_alive, iter_spools

__all__ = ["replay_spools", "add_sync_arguments", "sync_main"]

logger = logging.getLogger("scalewatch")


def _target(spool: Spool, meta: dict[str, Any], url: str) -> SendTarget:
    """What a :class:`Sender` needs, from a spool's ``run.json`` (no live run exists)."""
    registration = {
        k: meta[k]
        for k in ("project", "name", "config", "tags", "compute_unit", "target_compute",
                  "fit_metric", "group")
        if meta.get(k) is not None
    }
    return SendTarget(spool=spool, meta=registration, url=url)


def replay_spools(
    url: str | None = None,
    token: str | None = None,
    home: str | os.PathLike[str] | None = None,
    max_failures: int = 5,
    timeout: float = 10.0,
    project: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Send every spooled point under ``home`` to ``url``. Returns a summary dict::

        {"ok": bool, "sent_points": n, "remaining_points": m, "rejected_batches": r,
         "runs": [{"project", "name", "run_id", "sent_points", "sent_batches",
                   "remaining_points", "rejected_batches", "status", "error", "spool"}]}

    ``status`` is ``"done"`` (spool emptied and removed), ``"partial"`` (gave up after
    ``max_failures`` consecutive failures; the rest stays), ``"busy"`` (another process holds the
    spool) or ``"invalid"`` (unreadable run.json). ``project``/``name`` restrict the replay.
    """
    url = (url or os.environ.get("SCALEWATCH_URL") or DEFAULT_URL).rstrip("/")
    token = token if token is not None else os.environ.get("SCALEWATCH_TOKEN") or None
    runs = []
    for spool in iter_spools(home):
        meta = spool.read_meta()
        entry: dict[str, Any] = {
            "project": spool.project, "name": spool.name, "run_id": None, "sent_points": 0,
            "sent_batches": 0, "rejected_batches": 0, "remaining_points": spool.pending_points(),
            "status": "done", "error": None, "spool": str(spool.dir),
        }
        if project is not None and spool.project != project:
            continue
        if name is not None and spool.name != name:
            continue
        if not meta or not meta.get("project") or not meta.get("name"):
            entry.update(status="invalid", error="missing or unreadable run.json")
            runs.append(entry)
            continue
        if not _lock_within(spool, LOCK_WAIT):
            entry.update(status="busy", error="spool is being sent by another process")
            runs.append(entry)
            continue
        conn = Connection(url, token, timeout=timeout)
        try:
            spool.cleanup_tmp()
            recover_into(spool, _pid_alive)
            target = _target(spool, meta, url)
            sender = Sender(target, conn, max_failures=max_failures)
            while True:
                files = spool.batches()
                if not files and target.run_id is not None:
                    break
                if not files:  # nothing to send: still make sure the run exists (offline runs)
                    if sender.register():
                        break
                else:
                    sender.step(files)
                if sender.failures >= max_failures:
                    entry["status"] = "partial"
                    break
            final = spool.final_status()
            if entry["status"] == "done" and final and not spool.batches():
                error = _mark(Queries(url, token, timeout), target.run_id, final)
                if error is None:
                    spool.clear_final_status()
                else:
                    entry["status"], sender.last_error = "partial", error
            entry.update(
                run_id=target.run_id, sent_points=sender.sent_points,
                sent_batches=sender.sent_batches, rejected_batches=sender.rejected_batches,
                remaining_points=spool.pending_points(), error=sender.last_error
                if entry["status"] != "done" else None,
            )
            if entry["status"] == "done":
                spool.remove_if_done()
        finally:
            conn.close()
            spool.unlock()
        runs.append(entry)
    return {
        # A batch set aside (corrupt, or refused by the server for good) was not sent either.
        "ok": all(r["status"] == "done" and not r["rejected_batches"] for r in runs),
        "url": url,
        "sent_points": sum(r["sent_points"] for r in runs),
        "remaining_points": sum(r["remaining_points"] for r in runs),
        "rejected_batches": sum(r["rejected_batches"] for r in runs),
        "runs": runs,
    }


def _mark(queries: Queries, run_id: int | None, status: str) -> str | None:
    """Set the run's status (the one its trainer's finish() could not send); why not, or
    None when it was set."""
    why = "it is not registered" if run_id is None else queries.set_status(run_id, status)
    return None if why is None else f"could not mark the run {status}: {why}"


LOCK_WAIT = 5.0  # a trainer that just finished releases its sender lock within moments


def _lock_within(spool: Any, seconds: float) -> bool:
    """Take the spool's sender lock, waiting briefly for a sender that is just stopping."""
    deadline = time.monotonic() + seconds
    while not spool.try_lock():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def add_sync_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Arguments of ``scalewatch sync`` (``--url``, ``--token``, ``--home``, ...)."""
    parser.add_argument("--url", default=None, help="server URL (default $SCALEWATCH_URL)")
    parser.add_argument("--token", default=None, help="API token (default $SCALEWATCH_TOKEN)")
    parser.add_argument("--home", default=None, help="spool root (default $SCALEWATCH_HOME)")
    parser.add_argument("--project", default=None, help="only this project")
    parser.add_argument("--name", default=None, help="only this run name")
    parser.add_argument("--max-failures", type=int, default=5,
                        help="give up on a run after this many consecutive failures")
    return parser


def sync_main(args: argparse.Namespace) -> int:
    """Run ``scalewatch sync``; prints one line per run; exit code 0 if everything was sent (1
    when points are left, or a batch was set aside as corrupt or refused)."""
    summary = replay_spools(
        url=args.url, token=args.token, home=args.home, max_failures=args.max_failures,
        project=args.project, name=args.name,
    )
    for r in summary["runs"]:
        line = (f"{r['status']:8s} {r['project']}/{r['name']}: sent {r['sent_points']} point(s)"
                f", {r['remaining_points']} left")
        if r["rejected_batches"]:
            line += (f", {r['rejected_batches']} batch(es) set aside in "
                     f"{Path(r['spool']) / 'rejected'} (see the .reason.txt beside each)")
        if r["error"]:
            line += f" ({r['error']})"
        print(line)
    if not summary["runs"]:
        print("nothing to sync")
    return 0 if summary["ok"] else 1
