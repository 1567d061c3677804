"""`scalewatch follow` and `scalewatch import`: runs that log to files reach scalewatch with no
change to the trainer's code.

Formats (one entry each in :mod:`trainer_client.formats`, which both commands dispatch on and
take their FORMAT choices from):

* ``verl`` -- verl's ``file`` logger: ``{"step": N, "data": {name: value, ...}}``;
* ``prime-rl`` -- prime-rl's ``metrics.jsonl``: ``{"step": N, name: value, ...}``;
* ``jsonl`` -- any JSON lines with a step key (``--step-key``, default ``step``); nested
  objects are flattened with ``/``;
* ``tensorboard`` -- event files, read with TensorBoard's own reader (the ``tensorboard``
  extra: ``pip install 'scalewatch[tensorboard]'``), nothing sampled away; followed
  incrementally (:mod:`trainer_client.tensorboard`);
* ``pipelinerl`` (follow) -- the PipelineRL sidecar, under this name too;
* ``wandb`` -- the transaction logs W&B writes next to the trainer (``wandb/run-*/*.wandb``),
  project and name from the W&B run (:mod:`trainer_client.wandb_follow`).

Everything is sent through :mod:`trainer_client` (write-ahead journal, spool, retries), so a
server outage loses nothing. A follower saves its file offsets next to the run's spool once the
points are spooled: restarted, it resumes where it stopped. A file rotated (renamed, or copied
and truncated) or rewritten is read from its start, once the lines added to it since the last
pass are read from the rotated file next to it (``train.jsonl.1``; ``lines.LineTail``); points
are upserted on (run, metric, step), so a re-read never duplicates. A bad line is skipped with
a warning naming FILE:LINE and the lines after it are sent (:mod:`trainer_client.lines`).

Both commands first register the run with the server (:mod:`trainer_client.preflight`): a
refusal that asking again will not change (401, 403, 404, 422) ends them at once with the
reason (exit 2). A server that cannot be reached ends ``import`` at once too (nothing was sent;
run it again), while ``follow`` goes on and sends once the server answers. A follower logs when
it waits for its file, when the server is reachable again and when it stops; it leaves the
run's status alone unless the source says the run ended or ``--finish-on-exit`` is given.

Compute (``--compute``): ``step`` (the default; unit "steps"), ``metric:NAME`` (a cumulative
metric, e.g. TRL ``num_tokens``, prime-rl ``progress/total_tokens``), ``sum:NAME`` (the
running sum of a per-step metric, e.g. verl ``perf/total_num_tokens``) or ``gpu-hours:N``
(wall-clock hours since the first step x N GPUs: the step's own timestamp when the source has
one -- MLflow, W&B, TensorBoard, a ``_timestamp``/``timestamp`` field -- else, when following,
the time the line was read).

``import`` also reads ``mlflow`` (a tracking URI, ``--run`` and ``--experiment``) and ``wandb``
(a CSV export, history Parquet files or ``ENTITY/PROJECT/RUN_ID``): :mod:`trainer_client.importers`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainer_client.formats import FORMATS, FollowFormat, Record, Source, follow_formats
from trainer_client.formats import import_formats as _import_formats
from trainer_client.lines import BadLine, LineFollower, parse_line
from trainer_client.preflight import check_server
from trainer_client.records import STATE_FILE, TIME_KEYS, BadLines, Compute, Follower, log_record
from trainer_client.run import DEFAULT_URL, Run, init, registration_body
from trainer_client.spool import Spool

__all__ = ["FORMATS", "FollowFormat", "LineFollower", "parse_line", "BadLine",
           "follow_main", "import_main"]

logger = logging.getLogger("scalewatch.follow")

IMPORT_TIMEOUT = 120.0  # default seconds `import` waits for the server to acknowledge
STOP_TIMEOUT = 10.0  # seconds a stopping follower waits for the server (the rest stays spooled)


def import_records(run: Run, records: Iterable[Record], compute: Compute,
                   progress: bool = True, total: int | None = None,
                   bad: BadLines | None = None) -> int:
    """Log every record -- (step, metrics) or (step, metrics, wall-clock time) -- with a
    progress line on stderr; returns the number of values. A record ``log()`` refuses is
    counted in ``bad`` and skipped."""
    n = 0
    bad = bad if bad is not None else BadLines()
    for i, rec in enumerate(records, 1):
        step, metrics = rec[0], rec[1]
        t = rec[2] if len(rec) > 2 else None
        try:
            n += log_record(run, step, metrics, compute.of(step, metrics, t))
        except (ValueError, TypeError) as exc:
            bad.skip(f"step {step}", str(exc))
        if progress and (i % 1000 == 0 or i == total):
            done = f"{i}/{total}" if total else str(i)
            print(f"\rscalewatch import: {done} steps, {n} values", end="", file=sys.stderr)
    if progress:
        print(f"\rscalewatch import: {n} values queued", file=sys.stderr)
    return n


def _body(args: argparse.Namespace, source: str, compute: Compute,
          fit_metric: str | None = None, config: dict[str, Any] | None = None,
          group: str | None = None) -> dict[str, Any]:
    return registration_body(
        args.project, args.name, compute_unit=compute.unit,
        fit_metric=args.fit_metric or fit_metric,
        config={"source": f"{args.format}:{source}", **(config or {})},
        group=args.group or group,
    )


def _init(args: argparse.Namespace, body: dict[str, Any]) -> Run:
    return init(
        body["project"], body["name"], url=args.url, token=args.token, home=args.home,
        compute_unit=body.get("compute_unit"), fit_metric=body.get("fit_metric"),
        config=body.get("config"), group=body.get("group"),
    )


def _url(args: argparse.Namespace) -> str:
    return (args.url or os.environ.get("SCALEWATCH_URL") or DEFAULT_URL).rstrip("/")


def _token(args: argparse.Namespace) -> str | None:
    return args.token if args.token is not None else os.environ.get("SCALEWATCH_TOKEN") or None


def _fail(command: str, message: str) -> int:
    """A message a person reads (no traceback), exit 2."""
    print(f"scalewatch {command}: {message}", file=sys.stderr)
    return 2


def _common_arguments(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    """FORMAT's choices and help are the registry's (`trainer_client.formats`)."""
    p.add_argument("format", choices=formats, metavar="FORMAT", help=" | ".join(formats))
    p.add_argument("path", metavar="PATH", help="file or directory")
    p.add_argument("--project", help="project (required, except for wandb: the W&B run's)")
    p.add_argument("--name", help="run name (required, except for wandb: the W&B run's)")
    p.add_argument("--url", default=None, help="server URL (default $SCALEWATCH_URL)")
    p.add_argument("--token", default=None, help="API token (default $SCALEWATCH_TOKEN)")
    p.add_argument("--home", default=None, help="spool root (default $SCALEWATCH_HOME)")
    p.add_argument("--step-key", default="step", help="jsonl: the key holding the step")
    p.add_argument("--compute", default="step",
                   help="step (default, unit steps), metric:NAME (cumulative), sum:NAME or "
                        "gpu-hours:N (wall-clock hours x N GPUs)")
    p.add_argument("--fit-metric", default=None,
                   help="metric to fit (default: recognised from the framework's names)")
    p.add_argument("--group", default=None,
                   help="the recipe this run is a seed of (its group; MLflow imports default "
                        "to the run's scalewatch.group tag)")
    p.add_argument("--group-from-wandb", action="store_true",
                   help="wandb: the W&B run's group becomes its group")


def add_follow_arguments(p: argparse.ArgumentParser) -> None:
    _common_arguments(p, follow_formats())
    p.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls")
    p.add_argument("--gpus", type=int, default=None, help="pipelinerl: GPU count")
    p.add_argument("--finish-on-exit", action="store_true",
                   help="mark the run finished when the follower stops (SIGTERM/Ctrl-C); "
                        "else its status is left to the source")


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    _common_arguments(p, _import_formats())
    p.add_argument("--no-progress", action="store_true", help="no progress line")
    p.add_argument("--run", default=None, help="mlflow: the run id, or its name")
    p.add_argument("--experiment", default=None, help="mlflow: the experiment of --run")
    p.add_argument("--timeout", type=float, default=IMPORT_TIMEOUT,
                   help="seconds to wait for the server to acknowledge every point "
                        f"(default {IMPORT_TIMEOUT:g}); the rest stays spooled for "
                        "`scalewatch sync`")


def _stop_event() -> threading.Event:
    stop = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stop.set()

    with contextlib.suppress(ValueError):  # not in the main thread
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    return stop


def _wait_for_source(fmt: FollowFormat, args: argparse.Namespace, stop: threading.Event
                     ) -> Path | None:
    """The path to follow, once it is there (None if stopped first)."""
    path = Path(args.path)
    source = fmt.locate(path, args)
    if source is None:
        logger.info("scalewatch follow: %s is not there yet; waiting for it (checked every "
                    "%g s)", path, args.poll_interval)
        while source is None:
            if stop.wait(args.poll_interval):
                return None
            source = fmt.locate(path, args)
        logger.info("scalewatch follow: %s is there", source)
    return source


def _resumed_source(args: argparse.Namespace, source: Path) -> Path:
    """In a directory (verl's <root>/<project>/<experiment>.jsonl), the file this run followed
    before, when it is still there, rather than the newest: a restart that took a newer file
    (another experiment) left the rest of the old one unread and wrote the new one's steps
    over the run's."""
    path = Path(args.path)
    if not path.is_dir():
        return source
    try:
        state = Spool(args.home, args.project, args.name).dir / STATE_FILE
        saved = json.loads(state.read_text("utf-8")).get("path")
    except (OSError, ValueError, AttributeError):
        return source
    if not isinstance(saved, str):
        return source
    was = Path(saved)
    if was == source.resolve() or not was.is_file() or path.resolve() not in was.parents:
        return source
    logger.warning("scalewatch follow: resuming %s, the file run %s/%s was following, not the "
                   "newer %s (follow that one under another --name)", was, args.project,
                   args.name, source)
    return was


def _named(args: argparse.Namespace) -> bool:
    if args.project and args.name:
        return True
    print(f"scalewatch: {args.format} needs --project and --name", file=sys.stderr)
    return False


def follow_main(args: argparse.Namespace) -> int:
    """``scalewatch follow FORMAT PATH``: until SIGTERM/Ctrl-C or the source's end; exit 0
    when everything read was acknowledged by the server (else it stays spooled for the next
    start or ``sync``), 2 when the server refuses the run."""
    # Every message names its source ("scalewatch follow: ...", "scalewatch: ...").
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    entry = FORMATS[args.format]
    stop = _stop_event()
    if entry.follow_command is not None:  # W&B's directory of runs, the PipelineRL sidecar
        return entry.follow_command(args, stop.wait)
    if not _named(args):
        return 2
    fmt = entry.follower
    if fmt is None:  # pragma: no cover - argparse offers only formats that follow
        return _fail("follow", f"{args.format} cannot be followed")
    try:
        compute = Compute(args.compute)  # checked before anything starts
        body = _body(args, str(Path(args.path).resolve()), compute)
    except (ValueError, TypeError) as exc:
        return _fail("follow", str(exc))
    url = _url(args)
    answer = check_server(url, _token(args), body)
    if answer.refused:
        return _fail("follow", answer.refused)
    if answer.unreachable:
        logger.warning("scalewatch follow: %s; following anyway: points are spooled and sent "
                       "once it answers", answer.unreachable)
    source = _wait_for_source(fmt, args, stop)
    if source is None:
        logger.info("scalewatch follow: stopped before %s appeared; nothing sent", args.path)
        return 0
    source = _resumed_source(args, source)
    body["config"]["source"] = f"{args.format}:{source.resolve()}"
    run = _init(args, body)
    follower = fmt.make(source, run, args)
    logger.info("scalewatch follow: following %s as %s/%s on %s", follower.path, args.project,
                args.name, url)
    while not stop.is_set() and not follower.source_finished:
        _poll(follower)
        stop.wait(args.poll_interval)
    _poll(follower)
    ended = follower.source_finished
    if ended:
        logger.info("scalewatch follow: %s says the run ended", follower.path)
    finish = ended or args.finish_on_exit
    if run.flush(timeout=5) and run.spool.pending_points():
        logger.info("scalewatch follow: stopping; sending what is left (up to %g s)",
                    STOP_TIMEOUT)
    left = _finish(run, STOP_TIMEOUT, "finished" if finish else "")
    status = ("marked finished" if finish and not left else
              "status left as it was (--finish-on-exit marks it finished)" if not finish
              else "not marked finished while points are unsent")
    logger.info("scalewatch follow: stopped; %d values read from %s, %d bad lines skipped; "
                "run %s/%s: %s", follower.posted, follower.path, follower.bad.count,
                args.project, args.name, status)
    if left:
        logger.warning("scalewatch follow: %d points not acknowledged by %s yet stay spooled at "
                       "%s; the next start or `scalewatch sync` sends them", left, url,
                       run.spool_dir)
    return 0 if left == 0 else 1


def _finish(run: Run, timeout: float, status: str) -> int:
    """``run.finish``, its RuntimeWarning about unsent points left out: the command says it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return run.finish(timeout=timeout, status=status)


def _poll(follower: Follower) -> None:
    try:
        follower.poll_once()
    except Exception as exc:  # noqa: BLE001 - a full disk or an odd file must not stop following
        logger.error("scalewatch follow: reading %s failed (%s); trying again", follower.where,
                     exc)
        logger.debug("scalewatch follow: poll failed", exc_info=True)


def _read_source(args: argparse.Namespace, bad: BadLines) -> Source:
    """Every record of the source; raises ImportSourceError / OSError / ValueError."""
    read = FORMATS[args.format].read
    if read is None:  # pragma: no cover - argparse offers only formats that import
        raise ValueError(f"{args.format} cannot be imported")
    return read(args, bad)


def import_main(args: argparse.Namespace) -> int:
    """``scalewatch import FORMAT SOURCE``: load a finished run once and mark it finished.
    Exit 0 when every point read was acknowledged, 1 when some stay spooled (server slow or
    gone meanwhile), 2 when nothing could be read or the server refuses or cannot be reached."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    entry = FORMATS[args.format]
    if entry.import_command is not None:  # e.g. W&B transaction logs, not an export
        code = entry.import_command(args)
        if code is not None:
            return code
    if not _named(args):
        return 2
    bad = BadLines()
    problem = entry.check(args) if entry.check is not None else None
    if problem:
        return _fail("import", problem)
    try:
        compute = Compute(args.compute)
        src = _read_source(args, bad)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        return _fail("import", str(exc))
    except Exception as exc:  # noqa: BLE001 - ImportSourceError, OSError, a reader's own errors
        return _fail("import", f"cannot read {args.path}: {exc}")
    if not src.records:
        skipped = f" ({bad.count} bad lines skipped)" if bad.count else ""
        return _fail("import", f"nothing could be read from {args.path}{skipped}")
    if compute.kind == "gpu-hours" and not all(
            (len(r) > 2 and r[2] is not None) or any(k in r[1] for k in TIME_KEYS)
            for r in src.records):
        return _fail("import", "--compute gpu-hours:N needs each step's wall-clock time, "
                               "which this source does not have")
    try:
        # A URL (an MLflow server) as given: Path() would fold its "//" into "/".
        where = args.path if "://" in args.path else str(Path(args.path))
        body = _body(args, where, compute, src.fit_metric, src.config,
                     src.group)
    except (ValueError, TypeError) as exc:
        return _fail("import", str(exc))
    url = _url(args)
    answer = check_server(url, _token(args), body)
    if answer.refused or answer.unreachable:
        return _fail("import", f"{answer.refused or answer.unreachable}; nothing was imported")
    run = _init(args, body)
    import_records(run, src.records, compute, progress=not args.no_progress,
                   total=len(src.records), bad=bad)
    left = _finish(run, max(0.0, args.timeout), "finished")
    if bad.count:
        print(f"scalewatch import: {bad.count} bad lines skipped (see the warnings above)",
              file=sys.stderr)
    if left:
        print(f"scalewatch import: {left} points not acknowledged by {url} within "
              f"{args.timeout:g} s; they stay spooled at {run.spool_dir} (`scalewatch sync` "
              "sends them)", file=sys.stderr)
    return 0 if left == 0 else 1
