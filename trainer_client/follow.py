"""`scalewatch follow` and `scalewatch import`: runs that log to files reach scalewatch with no
change to the trainer's code.

Formats (one record per line, JSON):

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
points are spooled: restarted, it resumes where it stopped; a rotated or truncated file is read
from its start (points are upserted on (run, metric, step), so a re-read never duplicates).

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
import math
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from trainer_client.limits import MAX_NAME_LENGTH, MAX_STEP
from trainer_client.pipelinerl import _Tail
from trainer_client.records import TIME_KEYS, Compute, Follower, log_record
from trainer_client.run import Run, init
from trainer_client.tensorboard import TensorBoardFollower, tensorboard_records

logger = logging.getLogger("scalewatch.follow")

LINE_FORMATS = ("verl", "prime-rl", "jsonl")
FOLLOW_FORMATS = (*LINE_FORMATS, "tensorboard", "pipelinerl", "wandb")
IMPORT_FORMATS = (*LINE_FORMATS, "tensorboard", "mlflow", "wandb")
# Where each format's trainer keeps its step (prime-rl: "step"; verl: "step" around "data").
DEFAULT_STEP_KEY = {"verl": "step", "prime-rl": "step", "jsonl": "step"}

Record = tuple[int, dict[str, float]]
# Keys a JSON line may carry its wall-clock time in (seconds since the epoch).


def _flatten(obj: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, name + "/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            v = float(value)
            if math.isfinite(v) and 0 < len(name) <= MAX_NAME_LENGTH:
                yield name, v


def parse_line(line: str, fmt: str, step_key: str = "step") -> Record | None:
    """(step, metrics) of one line, None for a line that is not a record (blank, partial,
    no step): followed files are written while we read them and may hold other lines."""
    line = line.strip()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    step = obj.get(step_key)
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
        return None
    body = obj.get("data") if fmt == "verl" else obj
    if not isinstance(body, Mapping):
        return None
    metrics = {k: v for k, v in _flatten(body) if k != step_key}
    return (step, metrics) if metrics else None


def _line_file(fmt: str, path: Path) -> Path:
    """The file to read: PATH itself, or in a directory prime-rl's metrics.jsonl / the newest
    .jsonl (verl writes <root>/<project>/<experiment>.jsonl)."""
    if not path.is_dir():
        return path
    wanted = "metrics.jsonl" if fmt == "prime-rl" else "*.jsonl"
    found = sorted(path.rglob(wanted), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no {wanted} under {path}")
    return found[-1]


class LineFollower(Follower):
    """Tails one JSON-lines file into a run; :meth:`poll_once` is one pass."""

    def __init__(self, fmt: str, path: str | os.PathLike, run: Run, step_key: str = "step",
                 compute: str = "step") -> None:
        super().__init__(path, run, compute)
        self.fmt, self.step_key = fmt, step_key
        self.tail = _Tail(self.path, self.saved.get("tail"))

    def _tail_state(self) -> Any:
        return self.tail.state()

    def _records(self) -> Iterator[tuple[int, dict[str, float], float | None]]:
        for line in self.tail.poll():
            rec = parse_line(line, self.fmt, self.step_key)
            if rec is not None:
                yield rec[0], rec[1], None


def file_records(fmt: str, path: Path, step_key: str) -> Iterator[Record]:
    if fmt == "tensorboard":
        yield from tensorboard_records(path)
        return
    with open(_line_file(fmt, path), encoding="utf-8", errors="replace") as f:
        for line in f:
            rec = parse_line(line, fmt, step_key)
            if rec is not None:
                yield rec


def import_records(run: Run, records: Iterable[Record | tuple[int, dict[str, float],
                                                                float | None]],
                   compute: Compute, progress: bool = True, total: int | None = None) -> int:
    """Log every record -- (step, metrics) or (step, metrics, wall-clock time) -- with a
    progress line on stderr; returns the number of values."""
    n = 0
    for i, rec in enumerate(records, 1):
        step, metrics = rec[0], rec[1]
        t = rec[2] if len(rec) > 2 else None
        n += log_record(run, step, metrics, compute.of(step, metrics, t))
        if progress and (i % 1000 == 0 or i == total):
            done = f"{i}/{total}" if total else str(i)
            print(f"\rscalewatch import: {done} steps, {n} values", end="", file=sys.stderr)
    if progress:
        print(f"\rscalewatch import: {n} values queued", file=sys.stderr)
    return n


def _init(args: argparse.Namespace, source: str, compute: Compute,
          fit_metric: str | None = None, config: dict[str, Any] | None = None,
          group: str | None = None) -> Run:
    return init(
        args.project, args.name, url=args.url, token=args.token, home=args.home,
        compute_unit=compute.unit, fit_metric=args.fit_metric or fit_metric,
        config={"source": f"{args.format}:{source}", **(config or {})},
        group=args.group or group,
    )


def _common_arguments(p: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
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
    _common_arguments(p, FOLLOW_FORMATS)
    p.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls")
    p.add_argument("--gpus", type=int, default=None, help="pipelinerl: GPU count")


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    _common_arguments(p, IMPORT_FORMATS)
    p.add_argument("--no-progress", action="store_true", help="no progress line")
    p.add_argument("--run", default=None, help="mlflow: the run id, or its name")
    p.add_argument("--experiment", default=None, help="mlflow: the experiment of --run")


def _stop_event() -> threading.Event:
    stop = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stop.set()

    with contextlib.suppress(ValueError):  # not in the main thread
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    return stop


def _named(args: argparse.Namespace) -> bool:
    if args.project and args.name:
        return True
    print(f"scalewatch: {args.format} needs --project and --name", file=sys.stderr)
    return False


def follow_main(args: argparse.Namespace) -> int:
    """``scalewatch follow FORMAT PATH``: until SIGTERM/Ctrl-C; exit 0 when everything read
    was acknowledged by the server (else it stays spooled for the next start or ``sync``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.format == "pipelinerl":
        from trainer_client.pipelinerl import sidecar_main

        args.exp_dir = args.path
        return sidecar_main(args)
    stop = _stop_event()
    if args.format == "wandb":  # W&B transaction logs: trainer_client/wandb_follow.py
        from trainer_client.wandb_follow import follow_wandb_main

        return follow_wandb_main(args, stop.wait)
    if not _named(args):
        return 2
    compute = Compute(args.compute)  # validated before anything starts
    follower: Follower
    if args.format == "tensorboard":
        path = Path(args.path)
        run = _init(args, str(path), compute)
        follower = TensorBoardFollower(path, run, args.compute)
    else:
        path = _line_file(args.format, Path(args.path)) if Path(args.path).exists() else Path(
            args.path)
        run = _init(args, str(path), compute)
        follower = LineFollower(args.format, path, run, args.step_key, args.compute)
    logger.info("scalewatch follow: %s as %s/%s", path, args.project, args.name)
    while not stop.is_set():
        try:
            follower.poll_once()
        except Exception:  # noqa: BLE001 - a bad line or a full disk must not stop following
            logger.exception("scalewatch follow: poll failed")
        stop.wait(args.poll_interval)
    with contextlib.suppress(Exception):
        follower.poll_once()
    # A follower stopping is not the run ending: leave the run's status to the trainer.
    return 0 if run.finish(status="") == 0 else 1


def import_main(args: argparse.Namespace) -> int:
    """``scalewatch import FORMAT SOURCE``: load a finished run once and mark it finished."""
    if args.format == "wandb":
        from trainer_client.wandb_follow import import_wandb_main, is_wandb_source

        if is_wandb_source(args.path):  # run-*.wandb transaction logs, not an export
            return import_wandb_main(args)
    if not _named(args):
        return 2
    compute = Compute(args.compute)
    path = Path(args.path)
    fit_metric: str | None = None
    group: str | None = None
    config: dict[str, Any] = {}
    records: list[Any]
    if args.format in ("mlflow", "wandb"):
        from trainer_client.importers import ImportSourceError, read_mlflow, read_wandb

        try:
            if args.format == "mlflow":
                if not args.run:
                    print("scalewatch import mlflow: --run RUN_ID_OR_NAME is required",
                          file=sys.stderr)
                    return 2
                got = read_mlflow(args.path, args.run, args.experiment)
            else:
                got = read_wandb(args.path, None if args.step_key == "step" else args.step_key)
        except ImportSourceError as exc:
            print(f"scalewatch import: {exc}", file=sys.stderr)
            return 2
        records, fit_metric, config, group = got.records, got.fit_metric, got.config, got.group
    elif not path.exists():
        print(f"scalewatch import: {path} does not exist", file=sys.stderr)
        return 2
    elif args.format == "tensorboard":
        records = list(tensorboard_records(path, with_time=True))
    else:
        records = list(file_records(args.format, path, args.step_key))
    if compute.kind == "gpu-hours" and records and not all(
            (len(r) > 2 and r[2] is not None) or any(k in r[1] for k in TIME_KEYS)
            for r in records):
        print("scalewatch import: --compute gpu-hours:N needs each step's wall-clock time, "
              "which this source does not have", file=sys.stderr)
        return 2
    run = _init(args, str(path), compute, fit_metric, config, group)
    import_records(run, records, compute, progress=not args.no_progress, total=len(records))
    left = run.finish(timeout=300)
    if left:
        print(f"scalewatch import: {left} points not acknowledged yet; they stay spooled "
              "(`scalewatch sync` sends them)", file=sys.stderr)
    return 0 if left == 0 else 1
