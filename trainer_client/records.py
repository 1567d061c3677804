"""What every follower and importer shares: how a record's compute is derived, how a record
becomes points, and where a follower keeps its state."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trainer_client.limits import MAX_METRICS_PER_POINT
from trainer_client.run import Run
from trainer_client.spool import _atomic_write

logger = logging.getLogger("scalewatch.follow")

STATE_FILE = "follow_state.json"  # in the run's spool directory
TIME_KEYS = ("_timestamp", "timestamp", "time")  # a record's wall-clock time, if it has one


class Compute:
    """Compute of each record: its step, a cumulative metric, a running sum of one, or
    GPU-hours from wall-clock time x a GPU count."""

    def __init__(self, spec: str = "step", total: float = 0.0, last: float = 0.0,
                 t0: float | None = None) -> None:
        kind, _, name = spec.partition(":")
        if kind not in ("step", "metric", "sum", "gpu-hours") or (kind != "step" and not name):
            raise ValueError("--compute must be step, metric:NAME, sum:NAME or gpu-hours:N, "
                             f"not {spec!r}")
        self.gpus = 0.0
        if kind == "gpu-hours":
            try:
                self.gpus = float(name)
            except ValueError:
                self.gpus = -1.0
            if not (math.isfinite(self.gpus) and self.gpus > 0):
                raise ValueError(f"--compute gpu-hours:N needs a GPU count > 0, not {name!r}")
        self.kind, self.name = kind, name
        self.total = total  # running sum (sum:NAME)
        self.last = last  # last compute (metric:NAME: rows without the metric keep it)
        self.t0 = t0  # gpu-hours: the first step's wall-clock time

    @property
    def unit(self) -> str:
        if self.kind == "gpu-hours":
            return "gpu_hours"
        return "steps" if self.kind == "step" else self.name

    def state(self) -> dict[str, float | None]:
        return {"total": self.total, "last": self.last, "t0": self.t0}

    def of(self, step: int, metrics: Mapping[str, float], t: float | None = None) -> float:
        """`t`: the step's wall-clock time (gpu-hours); None = its own field, else now."""
        if self.kind == "step":
            return float(step)
        if self.kind == "gpu-hours":
            if t is None:
                t = next((metrics[k] for k in TIME_KEYS if k in metrics), None)
            if t is None:
                t = time.time()
            if self.t0 is None:
                self.t0 = t
            self.last = max(self.last, (t - self.t0) / 3600.0 * self.gpus)
            return self.last
        value = metrics.get(self.name)
        if value is not None and value >= 0:
            if self.kind == "sum":
                self.total += value
                self.last = self.total
            else:
                self.last = value
        return self.last


def log_record(run: Run, step: int, metrics: dict[str, float], compute: float) -> int:
    items = list(metrics.items())
    for i in range(0, len(items), MAX_METRICS_PER_POINT):  # the per-point cap of log()
        run.log(dict(items[i : i + MAX_METRICS_PER_POINT]), step=step, compute=compute)
    return len(items)


class BadLines:
    """Counts a source's bad lines (records) and warns about each, naming where it is, up to
    ``WARN_EACH``; after that one summary per 1,000, so a broken file cannot flood the log."""

    WARN_EACH = 20

    def __init__(self) -> None:
        self.count = 0

    def skip(self, where: str, why: str) -> None:
        self.count += 1
        if self.count <= self.WARN_EACH:
            logger.warning("scalewatch: skipped %s: %s", where, why)
            if self.count == self.WARN_EACH:
                logger.warning("scalewatch: further bad lines are counted, one warning per 1,000")
        elif self.count % 1000 == 0:
            logger.warning("scalewatch: %d bad lines skipped so far (the last: %s: %s)",
                           self.count, where, why)


class Follower:
    """A follower of one log source: its run, the compute of its records, and a state file in
    the run's spool directory, saved only once the points are spooled, so a restarted
    follower resumes where it stopped.  Subclasses read the source (:meth:`_records`: what is
    new since the last pass) and say where they are in it (:meth:`_tail_state`, saved under
    ``STATE_KEY``); :meth:`poll_once` is one pass.

    Write order, so that a kill at any moment loses nothing: a record's points are journaled by
    ``log()`` before the source's position moves past it (``_records`` advances only when the
    next record is asked for), and the state file is written only after ``flush()`` put every
    journaled point into the spool. A record ``log()`` refuses (a ``ValueError``/``TypeError``:
    a name or value the server would refuse) is skipped with a warning naming ``where`` it is;
    the records after it are sent.

    ``source_finished`` is set by a subclass whose source says the run ended (a final record,
    an exit marker): ``scalewatch follow`` then stops and marks the run finished."""

    STATE_KEY = "tail"
    KEY_REQUIRED = False  # a saved state without STATE_KEY is ignored whole

    def __init__(self, path: str | os.PathLike[str], run: Run, compute: str) -> None:
        self.run = run
        self.path = Path(path).resolve()
        self.state_path = run.spool.dir / STATE_FILE
        self.saved = self._load_state()
        self.compute = Compute(compute, **self.saved.get("compute", {}))
        self.posted = 0
        self.where = str(self.path)  # of the record being read, for warnings ("FILE:LINE")
        self.bad = BadLines()
        self.source_finished = False

    def _load_state(self) -> dict[str, Any]:
        try:
            st = json.loads(self.state_path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        if st.get("path") != str(self.path) or (self.KEY_REQUIRED and self.STATE_KEY not in st):
            return {}
        return st

    def _save_state(self) -> None:
        st = {"path": str(self.path), self.STATE_KEY: self._tail_state(),
              "compute": self.compute.state()}
        try:
            _atomic_write(self.state_path, json.dumps(st).encode("utf-8"), fsync=False)
        except OSError as exc:
            logger.warning("scalewatch follow: cannot save %s: %s", self.state_path, exc)

    def _records(self) -> Iterator[tuple[int, dict[str, float], float | None]]:
        raise NotImplementedError

    def _tail_state(self) -> Any:
        raise NotImplementedError

    def poll_once(self) -> int:
        n = 0
        for step, metrics, t in self._records():
            before = copy.copy(self.compute)
            try:
                n += log_record(self.run, step, metrics, self.compute.of(step, metrics, t))
            except (ValueError, TypeError) as exc:
                self.compute = before  # the refused record counts for nothing
                self.bad.skip(self.where, str(exc))
        if self.run.flush(timeout=30):  # the state is saved only once the points are spooled
            self._save_state()
        self.posted += n
        return n
