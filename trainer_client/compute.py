"""Compute counters for the x-axis of the ScaleRL fit.

* :class:`ComputeMeter` counts GPU-hours from wall-clock time: ``gpus x running seconds / 3600``.
  Pause it around time that should not count (evaluation on other hardware, checkpoint
  uploads, waiting on a queue), either with ``pause()``/``resume()`` or ``with meter.paused():``.
  Read it with ``meter.value`` or ``meter()``; pass it straight to ``run.log(..., compute=meter)``.
  For a resumed training job, start it from the checkpointed value: ``ComputeMeter(80,
  initial=812.5)``.
* :func:`flops` is the usual dense-transformer *estimate*: 6·N FLOPs per trained token
  (forward + backward) plus 2·N per generated token (forward only), N = parameter count. It
  ignores attention FLOPs, recomputation, the logprob recompute pass and padding; use it for
  comparing runs of one model family, not as an exact count.

Both say their unit, so a run needs no ``compute_unit`` for them: ``flops()`` returns a
:class:`Flops` (a ``float`` whose ``unit`` is ``"flops"``; arithmetic on it gives plain floats,
whose unit the run cannot know), and a ``ComputeMeter``'s ``unit`` is ``"gpu_hours"``.
``log()`` looks at the unit only for values that are not plain floats, so the hot path for
plain floats is unchanged.
"""

from __future__ import annotations

import contextlib
import numbers
import time
from collections.abc import Iterator

__all__ = ["ComputeMeter", "DEFAULT_UNIT", "Flops", "flops"]

DEFAULT_UNIT = "gpu_hours"  # the unit of plain numbers when the run is not told another


class Flops(float):
    """A FLOP count: what :func:`flops` returns. A float that carries its unit."""

    __slots__ = ()
    unit = "flops"

    def __repr__(self) -> str:
        return f"Flops({float(self)!r})"


class ComputeMeter:
    """GPU-hours from wall-clock time. ``ComputeMeter(gpus=80)`` starts counting at once."""

    __slots__ = ("gpus", "_initial", "_accum", "_since", "_clock")
    unit = "gpu_hours"  # what value counts (a run logging it needs no compute_unit)

    def __init__(self, gpus: float = 1, initial: float = 0.0, start: bool = True, clock=None):
        if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus <= 0:
            raise ValueError(f"gpus must be a positive number, got {gpus!r}")
        if isinstance(initial, bool) or not isinstance(initial, (int, float)) or initial < 0:
            raise ValueError(f"initial must be a non-negative number, got {initial!r}")
        self.gpus = float(gpus)
        self._initial = float(initial)
        self._clock = clock or time.monotonic
        self._accum = 0.0  # running seconds before the current stretch
        self._since: float | None = self._clock() if start else None

    @property
    def running(self) -> bool:
        return self._since is not None

    @property
    def seconds(self) -> float:
        """Wall-clock seconds counted so far (excluding paused time)."""
        since = self._since
        return self._accum + (self._clock() - since if since is not None else 0.0)

    @property
    def value(self) -> float:
        """GPU-hours so far (``initial`` + gpus x counted seconds / 3600)."""
        return self._initial + self.gpus * self.seconds / 3600.0

    def __call__(self) -> float:
        return self.value

    def __float__(self) -> float:
        return self.value

    def pause(self) -> None:
        since = self._since
        if since is not None:
            self._accum += self._clock() - since
            self._since = None

    def resume(self) -> None:
        if self._since is None:
            self._since = self._clock()

    start = resume

    @contextlib.contextmanager
    def paused(self) -> Iterator[ComputeMeter]:
        """``with meter.paused(): evaluate()`` - the block's time does not count."""
        was_running = self.running
        self.pause()
        try:
            yield self
        finally:
            if was_running:
                self.resume()

    def __repr__(self) -> str:
        state = "running" if self.running else "paused"
        return f"ComputeMeter(gpus={self.gpus:g}, value={self.value:.6g} GPU-h, {state})"


def flops(trained_tokens: float = 0, generated_tokens: float = 0, *, params: float) -> Flops:
    """Estimated FLOPs: ``6 * params * trained_tokens + 2 * params * generated_tokens``.

    An estimate for dense transformers (see the module docstring for what it leaves out). The
    result is a :class:`Flops`: a run it is logged to counts compute in ``"flops"``.
    """
    for label, v in (("trained_tokens", trained_tokens), ("generated_tokens", generated_tokens),
                     ("params", params)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or v < 0 or v != v:
            raise ValueError(f"{label} must be a non-negative number, got {v!r}")
    n, t, g = float(params), float(trained_tokens), float(generated_tokens)
    return Flops(6.0 * n * t + 2.0 * n * g)
