"""``scalewatch follow wandb PATH`` and ``scalewatch import wandb PATH``: W&B runs, from the
transaction logs the ``wandb`` package writes next to the trainer (``wandb/run-*/run-*.wandb``,
``wandb/offline-run-*/...`` in offline mode), with no change to the trainer and no W&B server.

PATH is a ``.wandb`` file, one run directory, or a directory of them (``./wandb``, or the
directory that holds ``wandb/``). Each W&B run becomes a scalewatch run named after it: project
and name from the run's own record (``--project`` / ``--name`` override them; with ``--name``
every W&B run under PATH feeds that one run), its config, and every scalar it logged at its
``_step``, with its ``_timestamp`` as the wall-clock time (``--compute gpu-hours:N``). Its W&B
group becomes the scalewatch group with ``--group-from-wandb``. W&B runs of the same project and
name (a resumed run writes a new directory with the same id) feed one scalewatch run, in order.

Following, the files are read as they grow (a record still being written waits for the next
pass), run directories that appear are picked up, and a run whose log has its exit record is
marked finished (``failed`` for a non-zero exit code) once its points are acknowledged. The
offset of the last whole record read from each file is saved next to the run's spool
(``wandb_follow.json``) only once the points before it are in the spool: a restarted follower
resumes there, and since the server upserts on (run, metric, step) nothing is counted twice.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_client.importers import _group
from trainer_client.preflight import check_server
from trainer_client.records import Compute, log_record
from trainer_client.run import DEFAULT_URL, Run, init, registration_body
from trainer_client.spool import Spool, _atomic_write
from trainer_client.wandb_log import READ_BUDGET, RunInfo, WandbLogError, events

logger = logging.getLogger("scalewatch.follow")

STATE_FILE = "wandb_follow.json"  # in the scalewatch run's spool directory
HEAD_EVENTS = 64  # records read for a run's identity: its run record comes second
IDLE_SECONDS = 600.0  # a followed run with no news for this long is closed (reopened on news)
FLUSH_TIMEOUT = 30.0  # a pass waits this long for its points to be in the spool
_STARTED = re.compile(r"\d{8}_\d{6}")  # run-20261203_073402-<id>, offline-run-...


def run_files(root: Path) -> list[Path]:
    """The ``.wandb`` files under ``root`` (itself, a run directory, ``wandb/``, or the
    directory holding ``wandb/``), oldest run first (W&B names run directories by start
    time). Media under ``files/`` is not walked."""
    if root.is_file():
        return [root.resolve()]
    # Resolved: wandb/latest-run is a symlink to the newest run directory.
    found = {p.resolve() for pattern in ("*.wandb", "*/*.wandb", "wandb/*/*.wandb")
             for p in root.glob(pattern)}

    def started(p: Path) -> str:
        m = _STARTED.search(p.parent.name)
        return m.group(0) if m else ""

    return sorted(found, key=lambda p: (started(p), str(p)))


def is_wandb_source(path: str) -> bool:
    """True when ``path`` holds W&B transaction logs (``import wandb`` reads them here; CSV and
    Parquet exports go to :mod:`trainer_client.importers`)."""
    p = Path(path)
    return p.suffix == ".wandb" if p.is_file() else p.is_dir() and bool(run_files(p))


def read_head(path: Path) -> tuple[RunInfo | None, bool]:
    """The run's identity and its config before the first logged step (config updates come
    right after ``wandb.init``), and whether that first step is there yet."""
    evs, _ = events(path, 0)
    info: RunInfo | None = None
    for e in evs[:HEAD_EVENTS]:
        if e.kind == "run" and e.run is not None and info is None:
            info = e.run
        elif e.kind == "config" and info is not None and e.config is not None:
            info.config.update(e.config)
            for k in e.removed or []:
                info.config.pop(k, None)
        elif e.kind in ("history", "exit"):
            return info, True
    return info, False


class RunRefused(Exception):
    """The server refuses a run for good (401, 403, 404, 422), or cannot be reached by
    ``import``: the command ends at once with this message (exit 2)."""


class WandbRun:
    """One scalewatch run and the ``.wandb`` files that feed it.

    Its state (each file's offset and exit code, the compute's running state) is read from the
    spool directory before any run is started, so runs with nothing new -- the finished runs
    of an old ``wandb/`` directory -- cost no client threads and no request. A run is started
    when its files grow and closed again after ``IDLE_SECONDS`` without news (a crashed
    trainer writes no exit record)."""

    def __init__(self, project: str, name: str, args: argparse.Namespace, final: bool) -> None:
        self.project, self.name, self.args, self.final = project, name, args, final
        self.files: list[Path] = []
        self.info: RunInfo | None = None
        self.run: Run | None = None
        self.state_path = Spool(args.home, project, name).dir / STATE_FILE
        self.state = self._load()
        self.compute = Compute(args.compute, **self.state.get("compute", {}))
        self.values = 0
        # The last pass stopped at its read budget (more is waiting), or its points were not
        # in the spool in time: poll again.
        self.more = False
        self.ending: str | None = None  # finished/failed, once the points are acknowledged
        self.finished = False
        self.left = 0  # points not acknowledged when it finished
        self.last_news = time.monotonic()

    def _load(self) -> dict[str, Any]:
        try:
            saved = json.loads(self.state_path.read_text("utf-8"))
        except (OSError, ValueError):
            return {"files": {}}
        if not isinstance(saved, dict) or not isinstance(saved.get("files"), dict):
            return {"files": {}}
        if not isinstance(saved.get("compute"), dict):
            saved.pop("compute", None)
        return saved

    def add(self, path: Path, info: RunInfo) -> None:
        self.files.append(path)
        if self.info is None:
            self.info = info
        self.finished = False  # a finished run resumed: a new directory with more steps

    def _news(self) -> bool:
        files = self.state["files"]
        for path in self.files:
            st = files.get(str(path), {})
            if st.get("exit") is not None:
                continue
            with contextlib.suppress(OSError):
                if path.stat().st_size > int(st.get("offset", 0)):
                    return True
        return False

    def _exit_not_marked(self) -> str | None:
        """The status to set when the last file's exit record was read but the run not marked
        finished (the follower stopped before the server had every point)."""
        last = str(self.files[-1])
        code = self.state["files"].get(last, {}).get("exit")
        if code is None or self.state.get("ended") == last:
            return None
        return "finished" if code == 0 else "failed"

    def _start(self) -> Run:
        info = self.info or RunInfo()
        args = self.args
        group = args.group or (_group(info.group) if args.group_from_wandb else None)
        config = {"source": f"wandb:{self.files[0]}", "wandb_run_id": info.run_id,
                  **info.config}
        # Asked once before anything is spooled, as the other followers do (preflight.py): a
        # refused token ends the command instead of filling a spool the server never takes.
        url = (args.url or os.environ.get("SCALEWATCH_URL") or DEFAULT_URL).rstrip("/")
        token = args.token if args.token is not None else os.environ.get("SCALEWATCH_TOKEN")
        body = registration_body(self.project, self.name, compute_unit=self.compute.unit,
                                 fit_metric=args.fit_metric, config=config, group=group)
        answer = check_server(url, token or None, body)
        if answer.refused:
            raise RunRefused(answer.refused)
        if answer.unreachable:
            if self.final:
                raise RunRefused(f"{answer.unreachable}; nothing was imported")
            logger.warning("scalewatch follow: %s; following anyway: points are spooled and "
                           "sent once it answers", answer.unreachable)
        run = init(self.project, self.name, url=args.url, token=args.token, home=args.home,
                   compute_unit=self.compute.unit, fit_metric=args.fit_metric, config=config,
                   group=group)
        self.state_path = run.spool.dir / STATE_FILE  # the same, unless home was unwritable
        logger.info("scalewatch follow: W&B run %s (%s) -> %s/%s", info.run_id or "?",
                    self.files[0].parent, self.project, self.name)
        return run

    def _save(self, files: dict[str, Any], ended: str | None = None) -> None:
        self.state = {"files": files, "compute": self.compute.state(),
                      "ended": ended or self.state.get("ended")}
        try:
            _atomic_write(self.state_path, json.dumps(self.state).encode(), fsync=False)
        except OSError as exc:
            logger.warning("scalewatch follow: cannot save the W&B follow state: %s", exc)

    def poll(self) -> int:
        """Log what the files hold past the saved offsets (up to a read budget per file);
        returns the values logged."""
        if self.finished:
            return 0
        if self.run is None:
            self.ending = self.ending or self._exit_not_marked()
            if not self._news() and self.ending is None:
                return 0
            self.run = self._start()
        run = self.run
        files = {k: dict(v) for k, v in self.state["files"].items()}
        n, self.more = 0, False
        for path in self.files:
            st = files.setdefault(str(path), {"offset": 0, "exit": None})
            if st.get("exit") is not None:
                continue
            before = int(st.get("offset", 0))
            try:
                evs, st["offset"] = events(path, before, self.final)
            except OSError as exc:  # the directory was removed: nothing more will come
                logger.warning("scalewatch follow: cannot read %s: %s", path, exc)
                continue
            self.more = self.more or st["offset"] - before >= READ_BUDGET
            for e in evs:
                if e.kind == "history" and e.metrics and e.step is not None:
                    compute = self.compute.of(e.step, e.metrics, e.time)
                    n += log_record(run, e.step, e.metrics, compute)
                elif e.kind == "exit":
                    st["exit"] = e.exit_code
        # In memory the offsets move past these records now, spooled in time or not: their
        # points are queued and the compute's running state (sum:NAME) already counts them,
        # so reading them again after a slow spool write would add them to the sum twice.
        self.state["files"] = files
        self.values += n
        now = time.monotonic()
        if n:
            self.last_news = now
        if not run.flush(timeout=FLUSH_TIMEOUT):  # saved only once the points are spooled
            self.more = True  # not spooled yet: `import` polls again before it ends the run
            return n
        self._save(files)
        last = files.get(str(self.files[-1]), {}).get("exit")
        if last is not None and not self.more:
            self.ending = "finished" if last == 0 else "failed"
        # Finish once the server has every point (finish() then returns at once: no wait on
        # a server that is down); close an idle run, to reopen it when its files grow.
        if self.ending and (self.final or run.spool.pending_points() == 0):
            self._finish(self.ending)
        elif not self.final and now - self.last_news > IDLE_SECONDS:
            self.stop()
        return n

    def _finish(self, status: str) -> None:
        assert self.run is not None
        left = self.left = self.run.finish(timeout=300 if self.final else 60, status=status)
        self.run, self.finished, self.ending = None, True, None
        if not left:  # the status is set: a restart need not set it again
            self._save(self.state["files"], ended=str(self.files[-1]))
        if left:
            logger.warning("scalewatch follow: %s/%s ended but %d points are not acknowledged "
                           "yet; they stay spooled (`scalewatch sync` sends them)",
                           self.project, self.name, left)
        else:
            logger.info("scalewatch follow: %s/%s %s (its W&B log has the exit record)",
                        self.project, self.name, status)

    def stop(self, timeout: float = 30.0) -> int:
        """Stop following; the run's status stays as the trainer left it."""
        if self.run is None:
            return 0
        left = self.run.finish(timeout=timeout, status="")
        self.run = None
        return left


class WandbFollower:
    """Every W&B run under a path; :meth:`poll_once` is one pass."""

    def __init__(self, root: str | Path, args: argparse.Namespace, final: bool = False) -> None:
        self.root = Path(root).resolve()
        self.args, self.final = args, final
        self.runs: dict[tuple[str, str], WandbRun] = {}
        self.known: set[Path] = set()

    def _discover(self) -> None:
        for path in run_files(self.root):
            if path in self.known:
                continue
            try:
                info, started = read_head(path)
            except WandbLogError as exc:  # not a W&B log (or a newer format): say it once
                if self.final:
                    raise
                logger.warning("scalewatch follow: skipping %s", exc)
                self.known.add(path)
                continue
            except OSError as exc:  # removed between the listing and the read
                if self.final:
                    raise
                logger.debug("scalewatch follow: cannot read %s yet: %s", path, exc)
                continue
            if info is None or not (started or self.final):
                continue  # too new: its run record or first step is not written yet
            self.known.add(path)
            key = (self.args.project or info.project or "wandb",
                   self.args.name or info.name or info.run_id or path.stem)
            if key not in self.runs:
                self.runs[key] = WandbRun(*key, self.args, self.final)
            self.runs[key].add(path, info)

    def poll_once(self) -> int:
        self._discover()
        return sum(r.poll() for r in self.runs.values())

    def stop(self) -> int:
        return sum(r.stop() for r in self.runs.values())


def follow_wandb_main(args: argparse.Namespace, stop_wait: Callable[[float], bool]) -> int:
    """``scalewatch follow wandb PATH``: until ``stop_wait(poll_interval)`` says stop."""
    Compute(args.compute)  # validated before anything starts
    follower = WandbFollower(args.path, args)
    if not Path(args.path).exists():
        logger.info("scalewatch follow: waiting for %s to appear", args.path)
    logger.info("scalewatch follow: W&B runs under %s", follower.root)
    while True:
        try:
            follower.poll_once()
        except RunRefused as exc:
            print(f"scalewatch follow: {exc}", file=sys.stderr)
            follower.stop()
            return 2
        except Exception as exc:  # noqa: BLE001 - a bad file or a full disk must not stop it
            logger.error("scalewatch follow: poll failed (%s: %s); trying again",
                         type(exc).__name__, exc)
            logger.debug("scalewatch follow: poll failed", exc_info=True)
        if stop_wait(args.poll_interval):
            break
    with contextlib.suppress(Exception):
        follower.poll_once()
    left = follower.stop()
    logger.info("scalewatch follow: stopped (%d points not acknowledged yet)", left)
    return 0 if left == 0 else 1


def import_wandb_main(args: argparse.Namespace) -> int:
    """``scalewatch import wandb PATH``: every W&B run under PATH, once."""
    try:
        Compute(args.compute)
        follower = WandbFollower(args.path, args, final=True)
        follower._discover()
    except (OSError, WandbLogError, ValueError) as exc:
        print(f"scalewatch import: {exc}", file=sys.stderr)
        return 2
    if not follower.runs:
        print(f"scalewatch import: no W&B run with a run record under {args.path}",
              file=sys.stderr)
        return 2
    left = 0
    for r in follower.runs.values():
        try:
            while r.poll() or r.more:  # a long log is read a budget at a time
                pass
        except RunRefused as exc:
            print(f"scalewatch import: {exc}", file=sys.stderr)
            return 2
        left += r.left
        if not r.finished:  # no exit record: a run still going, or killed
            left += r.stop(timeout=300)
            print(f"scalewatch import: {r.project}/{r.name}: its W&B log has no exit record "
                  "(still running, or killed); left unfinished", file=sys.stderr)
        if not args.no_progress:
            print(f"scalewatch import: {r.project}/{r.name}: {r.values} values", file=sys.stderr)
    if left:
        print(f"scalewatch import: {left} points not acknowledged yet; they stay spooled "
              "(`scalewatch sync` sends them)", file=sys.stderr)
    return 0 if left == 0 else 1
