"""TensorBoard event files: a whole log directory at once (``import``) and a tail (``follow``).

Both need TensorBoard's own reader, the ``tensorboard`` extra (``pip install
'scalewatch[tensorboard]'``; no TensorFlow).  ``import`` uses ``EventAccumulator`` with nothing
sampled away.  ``follow`` must not re-read a growing event file on every pass (a long run's
files reach hundreds of MB), so it keeps one ``EventFileLoader`` per event file: it holds the
file's read offset and resumes a half-written record on the next pass; every event file is
read (a trainer's restart adds one; two writers may share a directory).  Across the
follower's own restarts the number of events read from each file is saved with the spool, so
nothing is sent twice and nothing is skipped.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainer_client.limits import MAX_METRIC_NAME_LENGTH, MAX_STEP
from trainer_client.records import Follower
from trainer_client.run import Run
from trainer_client.validation import metric_name_problem

EVENT_GLOB = "events.out.tfevents.*"
logger = logging.getLogger("scalewatch.follow")


def _require() -> Any:
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError as exc:
        raise SystemExit(
            "scalewatch: reading TensorBoard files needs the tensorboard extra:\n"
            "    pip install 'scalewatch[tensorboard]'"
        ) from exc
    return event_accumulator


def _run_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return [root]
    return sorted({p.parent for p in root.rglob(EVENT_GLOB)})


def _prefix(root: Path, d: Path) -> str:
    """Tags of a run directory below the root are named after it (``<subdir>/<tag>``)."""
    return "" if d == root or not root.is_dir() else f"{d.relative_to(root).as_posix()}/"


def tensorboard_records(path: str | os.PathLike[str], with_time: bool = False) -> Iterator[Any]:
    """Every scalar of a TensorBoard log directory (or event file), step by step: (step,
    metrics), or (step, metrics, wall time) with `with_time`."""
    ea = _require()
    by_step: dict[int, dict[str, float]] = {}
    times: dict[int, float] = {}
    root = Path(path)
    for d in _run_dirs(root):
        # size_guidance 0 = keep every scalar (the default samples down to 10,000 per tag).
        acc = ea.EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        prefix = _prefix(root, d)
        for tag in acc.Tags().get("scalars", []):
            name = prefix + tag
            if len(name) > MAX_METRIC_NAME_LENGTH:
                continue
            for ev in acc.Scalars(tag):
                if math.isfinite(ev.value) and 0 <= ev.step <= MAX_STEP:
                    by_step.setdefault(int(ev.step), {})[name] = float(ev.value)
                    times[int(ev.step)] = max(ev.wall_time, times.get(int(ev.step), 0.0))
    for step in sorted(by_step):
        yield (step, by_step[step], times[step]) if with_time else (step, by_step[step])


def _scalar(value: Any) -> float | None:
    """A summary value's scalar: tensorboardX / PyTorch write ``simple_value``, TF2's
    ``tf.summary.scalar`` a one-element tensor under the scalars plugin."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and value.metadata.plugin_data.plugin_name == "scalars":
        from tensorboard.util import tensor_util

        arr = tensor_util.make_ndarray(value.tensor)
        return float(arr.reshape(-1)[0]) if arr.size == 1 else None
    return None


class TensorBoardTail:
    """The scalars written to a log directory since the last :meth:`poll`.

    Every event file is tailed by a loader of its own, which holds its read offset and resumes
    a half-written record. (TensorBoard's ``DirectoryWatcher`` reads only the newest file of a
    directory: a second writer there, an eval writer beside the train one, stopped every read
    of the first.) Where it is in each file is saved as the number of events read from it, so
    a restarted follower skips exactly those and sends the rest, in file order: a trainer
    resumed from a checkpoint that logs steps again in a new file overwrites them with its
    values (newest wins, as the line followers and ``import`` have it)."""

    def __init__(self, path: str | os.PathLike[str], last: dict[str, int] | None = None,
                 events: dict[str, int] | None = None) -> None:
        _require()
        # TensorBoard's loader logs "No path found after <file>" (INFO) on every pass with
        # nothing new: a follower's log says what changes, not that nothing did.
        logging.getLogger("tensorboard").setLevel(logging.WARNING)
        self.root = Path(path)
        # A state saved before the event counts were kept: steps up to the last one sent per
        # tag are skipped on the first pass (what the tail did then).
        self.legacy: dict[str, int] = dict(last or {}) if events is None else {}
        self.events: dict[str, int] = dict(events or {})  # file -> events read from it
        self._loaders: dict[Path, Any] = {}  # file -> its loader
        self._skip: dict[Path, int] = {}  # file -> events already read before this process

    def _files(self, d: Path) -> list[Path]:
        """The event files of run directory ``d`` (``d`` itself when it is one), by name: by
        the time they were created, which TensorBoard puts in the name."""
        if not d.is_dir():
            return [d]
        from tensorboard.backend.event_processing import io_wrapper

        try:
            names = sorted(os.listdir(d))
        except OSError:
            return []
        return [d / n for n in names if io_wrapper.IsSummaryEventsFile(str(d / n))]

    def _key(self, f: Path) -> str:
        return f.relative_to(self.root).as_posix() if f != self.root else f.name

    def _load(self, f: Path) -> Iterator[Any]:
        """The new events of event file ``f``; a file that went away is dropped."""
        from tensorboard.backend.event_processing import event_file_loader

        key = self._key(f)
        if f not in self._loaders:
            if self._loaders or f.parent != self.root:
                logger.info("scalewatch follow: reading TensorBoard event file %s", f)
            self._loaders[f] = event_file_loader.EventFileLoader(str(f))
            self._skip[f] = self.events.get(key, 0)
        try:
            for event in self._loaders[f].Load():
                self.events[key] = self.events.get(key, 0) + 1
                if self._skip[f] > 0:  # read before this process started
                    self._skip[f] -= 1
                    continue
                yield event
        except Exception as exc:  # noqa: BLE001 - TensorBoard raises its own error types
            logger.warning("scalewatch follow: cannot read %s (%s); it is read again from its "
                           "start if it comes back", f, getattr(exc, "message", None) or exc)
            self._loaders.pop(f, None)
            self.events.pop(key, None)

    def poll(self) -> list[tuple[int, dict[str, float], float]]:
        """New (step, metrics, wall time) rows, by step; a run directory or event file that
        appeared since the last pass is read from its start."""
        by_step: dict[int, dict[str, float]] = {}
        times: dict[int, float] = {}
        if not self.root.exists():
            return []
        for d in _run_dirs(self.root):
            prefix = _prefix(self.root, d)
            for f in self._files(d):
                for event in self._load(f):
                    if not event.HasField("summary"):
                        continue
                    step = int(event.step)
                    if not 0 <= step <= MAX_STEP:
                        continue
                    for value in event.summary.value:
                        name = prefix + value.tag
                        v = _scalar(value)
                        if (v is None or not math.isfinite(v) or metric_name_problem(name)
                                or step <= self.legacy.get(name, -1)):
                            continue
                        by_step.setdefault(step, {})[name] = v  # a later file's value wins
                        times[step] = max(float(event.wall_time), times.get(step, 0.0))
        self.legacy = {}
        return [(s, by_step[s], times[s]) for s in sorted(by_step)]


class TensorBoardFollower(Follower):
    """Tails a TensorBoard log directory into a run; :meth:`poll_once` is one pass. Its saved
    state is the number of events read from each event file."""

    STATE_KEY = "events"
    KEY_REQUIRED = False  # a state saved before the event counts has "last" instead

    def __init__(self, path: str | os.PathLike[str], run: Run, compute: str = "step") -> None:
        super().__init__(path, run, compute)
        self.tail = TensorBoardTail(self.path, self.saved.get("last"), self.saved.get("events"))

    def _tail_state(self) -> Any:
        return self.tail.events

    def _records(self) -> Iterator[tuple[int, dict[str, float], float | None]]:
        yield from self.tail.poll()
