"""`scalewatch simulate`: the demo's simulated trainers against any scalewatch server."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import warnings

from scalewatch.server.demo.presets import choices

EPILOG = """\
--speed is in evaluations per real second, per run (one evaluation = 100 trainer steps, i.e.
150 GPU-h for the 14k baseline, 700 GPU-h for Scout). Each run logs a per-step `reward` and,
every 100 steps, `val_pass_rate` and `truncation_rate`, with compute in GPU-hours. Re-running
the same command resumes an interrupted run (same values: the trajectory depends only on
--seed) and skips finished ones. Ctrl-C flushes what was logged and leaves the run resumable.
"""


def add_simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = EPILOG
    p.add_argument("--url", default=os.environ.get("SCALEWATCH_URL", "http://127.0.0.1:8765"),
                   help="server URL (default: $SCALEWATCH_URL, else http://127.0.0.1:8765)")
    p.add_argument("--token", default=os.environ.get("SCALEWATCH_TOKEN"),
                   help="write token (default: $SCALEWATCH_TOKEN)")
    p.add_argument("--preset", required=True, choices=choices(),
                   help="recipe from the ScaleRL paper's Table 1 (all: every preset)")
    p.add_argument("--speed", type=float, default=2.0,
                   help="evaluations per second per run (default 2)")
    p.add_argument("--burst", type=float, default=0.0,
                   help="fraction of each run's budget to log at once first (default 0)")
    p.add_argument("--project", default="scalerl-sim", help="project (default scalerl-sim)")
    p.add_argument("--name", help="run name (default: the preset's; with 'all', a prefix)")
    p.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")


def cmd_simulate(args: argparse.Namespace) -> int:
    from scalewatch.server.demo import api
    from scalewatch.server.demo.presets import resolve
    from scalewatch.server.demo.simulator import SimRun, drive, open_run

    if not args.speed > 0 or not 0.0 <= args.burst <= 1.0:
        print("scalewatch simulate: --speed must be > 0 and --burst in [0, 1]", file=sys.stderr)
        return 2
    recipes = resolve(args.preset)
    try:
        existing = api.existing_runs(args.url, args.token, args.project)
    except Exception as exc:  # noqa: BLE001 - unreachable server, bad token: say so, exit 2
        print(f"scalewatch simulate: cannot list runs at {args.url}: {exc}", file=sys.stderr)
        return 2
    sims: list[SimRun] = []
    for recipe in recipes:
        name = args.name
        if name and len(recipes) > 1:
            name = f"{name}-{recipe.key}"
        sim = open_run(recipe, args.url, args.token, args.project, args.seed, name=name,
                       existing=existing)
        if sim is None:
            print(f"{name or recipe.name}: already finished on the server, skipped", flush=True)
            continue
        sims.append(sim)
        print(f"{sim.run.name}: {recipe.n_evals} evaluations to {recipe.target:g} GPU-h "
              f"(A={recipe.a}, B={recipe.b}, C_mid={recipe.c_mid:g}), from evaluation "
              f"{sim.next_chunk}", flush=True)
    if not sims:
        return 0
    last_print: dict[str, float] = {}

    def progress(sim: SimRun, chunk: int) -> None:
        now = time.monotonic()
        if not sim.done and now - last_print.get(sim.run.name, 0.0) < 2.0:
            return
        last_print[sim.run.name] = now
        c, v = sim.last_logged or (0.0, float("nan"))
        state = "done" if sim.done else "live"
        print(f"{sim.run.name}: evaluation {chunk}/{sim.traj.n_chunks}  {c:,.0f} GPU-h  "
              f"val_pass_rate {v:.3f}  [{state}]", flush=True)

    stop = threading.Event()
    try:
        drive(sims, args.speed, stop, burst=args.burst, progress=progress)
    except KeyboardInterrupt:
        print("interrupted: flushing; re-run the same command to resume", flush=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            left = sum(s.run.finish(timeout=10.0, status="") for s in sims if not s.done)
        if left:
            print(f"{left} point(s) are still in the local spool; `scalewatch sync` sends them",
                  flush=True)
        return 130
    failed = [s.run.name for s in sims if s.run.spool.pending_points()]
    if failed:
        print(f"not all points were acknowledged for {', '.join(failed)}; they are kept in the "
              "local spool (`scalewatch sync`)", file=sys.stderr)
        return 1
    print(f"done: {len(sims)} run(s) finished at {args.url}", flush=True)
    return 0
