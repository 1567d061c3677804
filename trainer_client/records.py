"""What every follower and importer shares: how a record's compute is derived, how a record
becomes points, and where a follower keeps its state."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from trainer_client.limits import MAX_METRICS_PER_POINT
from trainer_client.run import Run

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
