"""Simulated ScaleRL trainers: pure curve + noise generation, and a loop posting it live.

Generation (:func:`true_curve`, :func:`generate`) is pure numpy and deterministic in the seed,
so a resumed run re-logs exactly the values it logged before (the server upserts on
(run, metric, step): a redone step changes nothing). Posting (:class:`SimRun`, :func:`drive`)
goes through the real :mod:`trainer_client`, like a trainer would.

Pacing: a run advances in *evaluation chunks* (``eval_every`` = 100 trainer steps, each with
a per-step training ``reward``, closed by the ``val_pass_rate`` evaluation). ``speed`` is in
evaluations per real second per run; a ``burst`` fraction of each run's budget is logged at
once so a dashboard has history to fit immediately.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalewatch.server.demo.presets import Recipe
from scalewatch.server.fitting.synth import ar1
from scalewatch.server.fitting.synth import true_curve as sigmoid_with_linear_start

log = logging.getLogger("scalewatch.demo")

EVAL_SIGMA = 0.01  # evaluation noise (1,000 prompts x 16 samples)
EVAL_RHO = 0.6  # the same held-out prompts every evaluation: errors persist between evals
REWARD_SIGMA = 0.04  # a training batch is 48 prompts: much noisier than the evaluation
REWARD_OFFSET = 0.03  # training prompts are filtered towards learnable ones: a bit higher
C_LIN = 1500.0  # the paper's early, roughly linear regime (~1 epoch, ~1.5k GPU-h)


# ---- pure generation ---------------------------------------------------------------------------
def true_curve(recipe: Recipe, c: np.ndarray) -> np.ndarray:
    """The noiseless pass rate of ``recipe`` at compute ``c`` (GPU-h)."""
    c = np.asarray(c, dtype=float)
    y = sigmoid_with_linear_start(c, recipe.a, recipe.b, recipe.c_mid, recipe.r0, C_LIN)
    if recipe.drop is not None:
        d = recipe.drop
        worse = sigmoid_with_linear_start(c, d.a_after, recipe.b, recipe.c_mid, recipe.r0, C_LIN)
        # Smoothstep blend over `width` GPU-h: a sharp bend, but no discontinuity.
        t = np.clip((c - d.at) / d.width, 0.0, 1.0)
        w = t * t * (3 - 2 * t)
        y = (1 - w) * y + w * worse
    if recipe.collapse is not None:
        k = recipe.collapse
        at = float(sigmoid_with_linear_start(
            np.array([k.at]), recipe.a, recipe.b, recipe.c_mid, recipe.r0, C_LIN)[0])
        decay = 1 - np.exp(-np.clip(c - k.at, 0.0, None) / k.scale)
        y = np.where(c > k.at, at - (at - k.floor) * decay, y)
    return y


@dataclass(frozen=True)
class Trajectory:
    """Everything one run will log. Index ``k`` of the ``eval_*`` arrays is chunk ``k``."""

    steps: np.ndarray  # 0 .. n_steps
    compute: np.ndarray  # GPU-h after each step
    reward: np.ndarray  # per-step training reward (reward[0] is unused: nothing trained yet)
    eval_steps: np.ndarray  # 0, 100, 200, ...
    eval_compute: np.ndarray
    val_pass_rate: np.ndarray
    truncation_rate: np.ndarray
    truth: np.ndarray  # noiseless val_pass_rate at the evaluations

    @property
    def n_chunks(self) -> int:
        return int(self.eval_steps.size)


def generate(recipe: Recipe, seed: int = 0) -> Trajectory:
    """The full, deterministic trajectory of ``recipe`` for ``seed``."""
    rng = np.random.default_rng([seed, _stable_hash(recipe.key)])
    steps = np.arange(recipe.n_steps + 1)
    compute = steps * recipe.gpu_h_per_step
    eval_steps = steps[:: recipe.eval_every]
    eval_compute = compute[:: recipe.eval_every]
    truth = true_curve(recipe, eval_compute)
    val = truth + ar1(eval_steps.size, EVAL_SIGMA, EVAL_RHO, rng)
    val[0] = recipe.r0 + rng.normal(0.0, EVAL_SIGMA / 2)  # the starting checkpoint
    reward = true_curve(recipe, compute) + REWARD_OFFSET + rng.normal(0, REWARD_SIGMA, steps.size)
    # Truncations: a few percent, rising sharply when the run is unstable (paper A.15).
    trunc = 0.03 + np.abs(rng.normal(0.0, 0.01, eval_steps.size))
    if recipe.collapse is not None:
        trunc = trunc + 0.25 * (1 - np.exp(-np.clip(eval_compute - recipe.collapse.at, 0, None)
                                            / recipe.collapse.scale))
    return Trajectory(
        steps=steps,
        compute=compute,
        reward=np.clip(reward, 0.0, 1.0),
        eval_steps=eval_steps,
        eval_compute=eval_compute,
        val_pass_rate=np.clip(val, 0.0, 1.0),
        truncation_rate=np.clip(trunc, 0.0, 1.0),
        truth=truth,
    )


def chunk_points(
    recipe: Recipe, traj: Trajectory, k: int
) -> list[tuple[int, float, dict[str, Any]]]:
    """(step, compute, metrics) of chunk ``k``: the steps since the previous evaluation, the
    last one carrying the evaluation metrics too."""
    end = int(traj.eval_steps[k])
    start = end - recipe.eval_every + 1 if k > 0 else 0
    out: list[tuple[int, float, dict[str, Any]]] = []
    for s in range(max(start, 1), end):
        out.append((s, float(traj.compute[s]), {"reward": float(traj.reward[s])}))
    metrics = {
        "val_pass_rate": float(traj.val_pass_rate[k]),
        "truncation_rate": float(traj.truncation_rate[k]),
    }
    if end > 0:
        metrics["reward"] = float(traj.reward[end])
    out.append((end, float(traj.compute[end]), metrics))
    return out


def resume_chunk(last_step: int | None, eval_every: int) -> int:
    """First chunk to (re)log when the server already has points up to ``last_step``.

    Points are sent in order, so everything up to ``last_step`` is stored; a partly stored
    chunk is logged again in full (same values, idempotent on the server).
    """
    if last_step is None:
        return 0
    return last_step // eval_every + 1


def _stable_hash(text: str) -> int:
    # hash() is salted per process; the trajectory must be the same after a restart.
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (2**32)


# ---- posting -----------------------------------------------------------------------------------
class SimRun:
    """One simulated trainer: a trajectory, a trainer_client run, and how far it has logged."""

    def __init__(self, recipe: Recipe, traj: Trajectory, run: Any, start_chunk: int = 0):
        self.recipe = recipe
        self.traj = traj
        self.run = run
        self.next_chunk = start_chunk
        self.first_chunk = start_chunk
        self.finisher: threading.Thread | None = None

    @property
    def done(self) -> bool:
        return self.next_chunk >= self.traj.n_chunks

    @property
    def last_logged(self) -> tuple[float, float] | None:
        """(compute, val_pass_rate) of the newest logged evaluation."""
        k = self.next_chunk - 1
        if k < 0:
            return None
        return float(self.traj.eval_compute[k]), float(self.traj.val_pass_rate[k])

    def log_until(self, chunk: int) -> int:
        """Log chunks up to (excluding) ``chunk``; returns how many were logged."""
        chunk = min(chunk, self.traj.n_chunks)
        n = 0
        while self.next_chunk < chunk:
            for step, compute, metrics in chunk_points(self.recipe, self.traj, self.next_chunk):
                self.run.log(metrics, step=step, compute=compute)
            self.next_chunk += 1
            n += 1
        return n

    def finish_async(self, timeout: float = 60.0) -> None:
        """Mark the run finished without stalling the other runs' pacing."""
        if self.finisher is None:
            self.finisher = threading.Thread(
                target=self.run.finish, kwargs={"timeout": timeout, "status": "finished"},
                name=f"scalewatch-demo-finish[{self.recipe.name}]", daemon=True,
            )
            self.finisher.start()


Progress = Callable[[SimRun, int], None]


def burst_chunk(sim: SimRun, burst: float) -> int:
    """The first chunk after a burst of ``burst`` (a fraction of the run's evaluations)."""
    return math.ceil(burst * sim.traj.n_chunks)


def drive(
    sims: Sequence[SimRun],
    speed: float,
    stop: threading.Event,
    burst: float | Sequence[float] = 0.0,
    progress: Progress | None = None,
    tick: float = 0.1,
) -> bool:
    """Log every run at ``speed`` evaluations per second after a ``burst`` (fraction of each
    run's evaluations logged at once; one for all runs or one per run); finish each run when
    it reaches its budget.

    Returns True when all runs are done, False when ``stop`` was set first (the runs are left
    unfinished, so the next start resumes them).
    """
    if speed <= 0 or not math.isfinite(speed):
        raise ValueError(f"speed must be a positive number of evaluations per second: {speed}")
    bursts = [float(burst)] * len(sims) if isinstance(burst, (int, float)) else list(burst)
    if len(bursts) != len(sims):
        raise ValueError(f"{len(bursts)} bursts for {len(sims)} runs")
    base: dict[int, int] = {}
    for i, sim in enumerate(sims):
        base[i] = max(sim.next_chunk, burst_chunk(sim, bursts[i]))
    t0 = time.monotonic()
    while True:
        live = int((time.monotonic() - t0) * speed)
        for i, sim in enumerate(sims):
            if not sim.done and sim.log_until(base[i] + live + 1) and progress is not None:
                progress(sim, sim.next_chunk)
            if sim.done:  # also a resumed run whose points were all stored already
                sim.finish_async()
        if all(sim.done for sim in sims):
            break
        # Sleep until the next evaluation is due, but wake up for a stop at once.
        due = t0 + (live + 1) / speed
        if stop.wait(max(0.0, min(tick, due - time.monotonic()))):
            return False
    for sim in sims:
        if sim.finisher is not None:
            sim.finisher.join()
    return True


def open_run(
    recipe: Recipe,
    url: str,
    token: str | None,
    project: str,
    seed: int = 0,
    name: str | None = None,
    existing: dict[str, dict[str, Any]] | None = None,
    home: Any = None,
    group: str | None = None,
) -> SimRun | None:
    """A SimRun resuming where the server's copy of the run stops; None if it is finished."""
    import trainer_client as sw

    run_name = name or recipe.name
    prior = (existing or {}).get(run_name)
    if prior is not None and prior.get("status") == "finished":
        return None
    traj = generate(recipe, seed)
    start = resume_chunk(prior.get("last_step") if prior else None, recipe.eval_every)
    config = {**recipe.config(), "seed": seed}
    run = sw.init(
        project=project, name=run_name, config=config, tags=recipe.tags(),
        target_compute=recipe.target, compute_unit="gpu_hours", fit_metric="val_pass_rate",
        url=url, token=token, mode="online", home=home, group=group,
    )
    return SimRun(recipe, traj, run, min(start, traj.n_chunks))
