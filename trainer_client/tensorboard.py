"""TensorBoard event files: a whole log directory at once (``import``) and a tail (``follow``).

Both need TensorBoard's own reader, the ``tensorboard`` extra (``pip install
'scalewatch[tensorboard]'``; no TensorFlow).  ``import`` uses ``EventAccumulator`` with nothing
sampled away.  ``follow`` must not re-read a growing event file on every pass (a long run's
files reach hundreds of MB), so it keeps one ``DirectoryWatcher`` per run directory: it holds
each event file's read offset, resumes a half-written record on the next pass and moves on to
a newer file when the trainer restarts.  Across the follower's own restarts the last step sent
per tag is saved with the spool, so nothing is sent twice.
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
    """The scalars written to a log directory since the last :meth:`poll`."""

    def __init__(self, path: str | os.PathLike[str], last: dict[str, int] | None = None) -> None:
        _require()
        # TensorBoard's loader logs "No path found after <file>" (INFO) on every pass with
        # nothing new: a follower's log says what changes, not that nothing did.
        logging.getLogger("tensorboard").setLevel(logging.WARNING)
        self.root = Path(path)
        self.last: dict[str, int] = dict(last or {})  # tag -> last step sent
        self._watchers: dict[Path, Any] = {}

    def _watcher(self, d: Path) -> Any:
        from tensorboard.backend.event_processing import (
            directory_watcher,
            event_file_loader,
            io_wrapper,
        )

        if d not in self._watchers:
            if self._watchers or d != self.root:
                logger.info("scalewatch follow: reading TensorBoard run directory %s", d)
            if d.is_dir():
                self._watchers[d] = directory_watcher.DirectoryWatcher(
                    str(d), event_file_loader.EventFileLoader, io_wrapper.IsSummaryEventsFile)
            else:  # a single event file
                self._watchers[d] = event_file_loader.EventFileLoader(str(d))
        return self._watchers[d]

    def _load(self, d: Path) -> Iterator[Any]:
        """The new events of run directory ``d``; a directory that went away is dropped."""
        try:
            yield from self._watcher(d).Load()
        except Exception as exc:  # noqa: BLE001 - TensorBoard raises its own error types
            logger.warning("scalewatch follow: cannot read %s (%s); it is read again from its "
                           "start if it comes back", d, getattr(exc, "message", None) or exc)
            self._watchers.pop(d, None)

    def poll(self) -> list[tuple[int, dict[str, float], float]]:
        """New (step, metrics, wall time) rows, by step; a run directory that appeared since
        the last pass is read from its start."""
        by_step: dict[int, dict[str, float]] = {}
        times: dict[int, float] = {}
        if not self.root.exists():
            return []
        for d in _run_dirs(self.root):
            prefix = _prefix(self.root, d)
            for event in self._load(d):
                if not event.HasField("summary"):
                    continue
                step = int(event.step)
                if not 0 <= step <= MAX_STEP:
                    continue
                for value in event.summary.value:
                    name = prefix + value.tag
                    v = _scalar(value)
                    if (v is None or not math.isfinite(v) or metric_name_problem(name)
                            or step <= self.last.get(name, -1)):
                        continue
                    by_step.setdefault(step, {})[name] = v
                    times[step] = max(float(event.wall_time), times.get(step, 0.0))
                    self.last[name] = step
        return [(s, by_step[s], times[s]) for s in sorted(by_step)]


class TensorBoardFollower(Follower):
    """Tails a TensorBoard log directory into a run; :meth:`poll_once` is one pass. Its saved
    state is the last step sent per tag."""

    STATE_KEY = "last"
    KEY_REQUIRED = True

    def __init__(self, path: str | os.PathLike[str], run: Run, compute: str = "step") -> None:
        super().__init__(path, run, compute)
        self.tail = TensorBoardTail(self.path, self.saved.get("last"))

    def _tail_state(self) -> Any:
        return self.tail.last

    def _records(self) -> Iterator[tuple[int, dict[str, float], float | None]]:
        yield from self.tail.poll()
