"""The registry of log formats ``scalewatch follow`` and ``scalewatch import`` read.

One entry (`LogFormat`) per format: its name and one-line description (the commands' FORMAT
choices and help), and what it can do: be followed by one `Follower` fed by the follow command's
loop (``follower``), be followed by a command of its own (``follow_command``: W&B's directory of
runs, the PipelineRL sidecar), be read once for ``import`` (``read``), or be imported by a
command of its own (``import_command``). ``trainer_client.follow`` dispatches on this table
alone; a format is added by one `register` call here, which refuses a name given twice or an
entry that can do nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer_client.lines import LineFollower, file_records, line_file
from trainer_client.records import BadLines, Follower
from trainer_client.run import Run
from trainer_client.tensorboard import TensorBoardFollower, tensorboard_records

# (step, metrics) or (step, metrics, wall-clock time)
Record = tuple[int, dict[str, float]] | tuple[int, dict[str, float], float | None]
StopWait = Callable[[float], bool]  # waits up to N seconds; True once asked to stop


@dataclass(frozen=True)
class FollowFormat:
    """How ``scalewatch follow FORMAT PATH`` follows one format with one `Follower`.

    ``locate(path, args)``: the file or directory to follow, or None while it is not there
    yet (the command waits, saying so). ``make(source, run, args)``: the :class:`Follower`.
    Waiting, the poll loop, signals and the messages are the command's."""

    locate: Callable[[Path, argparse.Namespace], Path | None]
    make: Callable[[Path, Run, argparse.Namespace], Follower]


@dataclass
class Source:
    """What ``import`` read: every record, and what the source says of the run."""

    records: Sequence[Record]
    fit_metric: str | None = None
    group: str | None = None
    config: dict[str, Any] | None = None


@dataclass(frozen=True)
class LogFormat:
    name: str
    help: str
    follower: FollowFormat | None = None
    # follow by a command of its own: (args, wait for stop) -> exit code
    follow_command: Callable[[argparse.Namespace, StopWait], int] | None = None
    # import: every record (raises FileNotFoundError / ValueError / the reader's errors)
    read: Callable[[argparse.Namespace, BadLines], Source] | None = None
    # import by a command of its own: an exit code, or None to `read` the source instead
    import_command: Callable[[argparse.Namespace], int | None] | None = None
    # why the arguments cannot work for this format (checked before anything is read)
    check: Callable[[argparse.Namespace], str | None] | None = None

    @property
    def follows(self) -> bool:
        return self.follower is not None or self.follow_command is not None

    @property
    def imports(self) -> bool:
        return self.read is not None or self.import_command is not None


FORMATS: dict[str, LogFormat] = {}


def register(fmt: LogFormat) -> LogFormat:
    if fmt.name in FORMATS:
        raise ValueError(f"log format {fmt.name} is registered twice")
    if not (fmt.follows or fmt.imports):
        raise ValueError(f"log format {fmt.name} can be neither followed nor imported")
    FORMATS[fmt.name] = fmt
    return fmt


def follow_formats() -> tuple[str, ...]:
    return tuple(name for name, fmt in FORMATS.items() if fmt.follows)


def import_formats() -> tuple[str, ...]:
    return tuple(name for name, fmt in FORMATS.items() if fmt.imports)


# ---- line formats: JSON lines, one record a line ----------------------------------------------


def _line_source(path: Path, args: argparse.Namespace) -> Path | None:
    return line_file(args.format, path)


def _line_follower(source: Path, run: Run, args: argparse.Namespace) -> Follower:
    return LineFollower(args.format, source, run, args.step_key, args.compute)


def _read_lines(args: argparse.Namespace, bad: BadLines) -> Source:
    path = Path(args.path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    file = line_file(args.format, path)
    if file is None:
        raise FileNotFoundError(f"no {'metrics.jsonl' if args.format == 'prime-rl' else '.jsonl'}"
                                f" file under {path}")
    return Source(list(file_records(args.format, file, args.step_key, bad)))


_LINES = FollowFormat(_line_source, _line_follower)
for _name, _help in (
    ("verl", "verl's file logger: {\"step\": N, \"data\": {name: value}}"),
    ("prime-rl", "prime-rl's metrics.jsonl: {\"step\": N, name: value}"),
    ("jsonl", "any JSON lines with a step key (--step-key); nested objects flattened with /"),
):
    register(LogFormat(_name, _help, follower=_LINES, read=_read_lines))


# ---- TensorBoard event files ------------------------------------------------------------------


def _existing(path: Path, args: argparse.Namespace) -> Path | None:
    return path if path.exists() else None


def _tensorboard_follower(source: Path, run: Run, args: argparse.Namespace) -> Follower:
    return TensorBoardFollower(source, run, args.compute)


def _read_tensorboard(args: argparse.Namespace, bad: BadLines) -> Source:
    path = Path(args.path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    return Source(list(tensorboard_records(path, with_time=True)))


register(LogFormat("tensorboard", "TensorBoard event files (the tensorboard extra)",
                   follower=FollowFormat(_existing, _tensorboard_follower),
                   read=_read_tensorboard))


# ---- trackers and sidecars: their own readers, imported when used -----------------------------


def _read_mlflow(args: argparse.Namespace, bad: BadLines) -> Source:
    from trainer_client.importers import read_mlflow

    got = read_mlflow(args.path, args.run, args.experiment, bad)
    return Source(got.records, got.fit_metric, got.group, got.config)


def _mlflow_needs_run(args: argparse.Namespace) -> str | None:
    return None if args.run else "mlflow needs --run RUN_ID_OR_NAME"


register(LogFormat("mlflow", "an MLflow run (a tracking URI, --run and --experiment)",
                   read=_read_mlflow, check=_mlflow_needs_run))


def _follow_pipelinerl(args: argparse.Namespace, wait: StopWait) -> int:
    from trainer_client.pipelinerl import sidecar_main

    args.exp_dir = args.path
    return sidecar_main(args)  # stops on SIGINT/SIGTERM itself


register(LogFormat("pipelinerl", "a PipelineRL experiment directory (the sidecar)",
                   follow_command=_follow_pipelinerl))


def _read_wandb(args: argparse.Namespace, bad: BadLines) -> Source:
    from trainer_client.importers import read_wandb

    got = read_wandb(args.path, None if args.step_key == "step" else args.step_key, bad)
    return Source(got.records, got.fit_metric, got.group, got.config)


def _follow_wandb(args: argparse.Namespace, wait: StopWait) -> int:
    from trainer_client.wandb_follow import follow_wandb_main

    return follow_wandb_main(args, wait)


def _import_wandb_logs(args: argparse.Namespace) -> int | None:
    from trainer_client.wandb_follow import import_wandb_main, is_wandb_source

    # run-*.wandb transaction logs have a command of their own; an export is read as records
    return import_wandb_main(args) if is_wandb_source(args.path) else None


register(LogFormat("wandb", "W&B: the run-*.wandb transaction logs next to the trainer (each "
                   "its own run), a CSV export, history Parquet files or ENTITY/PROJECT/RUN_ID",
                   follow_command=_follow_wandb, read=_read_wandb,
                   import_command=_import_wandb_logs))
