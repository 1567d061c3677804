"""Finished real runs for the demo: Deep-GRPO GSM8K curves (Apache-2.0, see data/README.md).

The W&B exports have steps but no timing, so compute is counted in samples (generated
completions, step x 64 prompts x 8 rollouts) rather than in invented GPU-hours.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
FILES = ("training_dynamics__test_reward.csv", "tree_methods_training_instability__test_reward.csv")
SAMPLES_PER_STEP = 64 * 8  # 64 prompts x 8 rollouts (verl config at the vendored commit)
REAL_PROJECT = "deep-grpo-gsm8k"
SOURCE = "https://github.com/befocuss/Deep-GRPO (Apache-2.0), commit 7158a96"


@dataclass(frozen=True)
class RealRun:
    name: str
    wandb_metric: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    file: str

    @property
    def compute(self) -> tuple[float, ...]:
        return tuple(float(s * SAMPLES_PER_STEP) for s in self.steps)

    def config(self) -> dict[str, Any]:
        return {
            "source": SOURCE,
            "file": self.file,
            "wandb_metric": self.wandb_metric,
            "model": "Qwen2.5-0.5B-Instruct",
            "task": "GSM8K",
            "compute": f"samples = step x {SAMPLES_PER_STEP} (64 prompts x 8 rollouts)",
            "eval_every_steps": 5,
            "simulated": False,
        }

    def tags(self) -> list[str]:
        return ["real", "deep-grpo", "gsm8k", "qwen2.5-0.5b"]


def load(data_dir: Path = DATA) -> list[RealRun]:
    """Every `<run> - <metric>` column of the vendored CSVs (the __MIN/__MAX copies skipped)."""
    runs = []
    for file in FILES:
        with open(data_dir / file, newline="") as f:
            rows = list(csv.reader(f))
        header = rows[0]
        for i, col in enumerate(header):
            if i == 0 or col.endswith(("__MIN", "__MAX")) or " - " not in col:
                continue
            name, metric = col.split(" - ", 1)
            pts = [(int(float(r[0])), float(r[i])) for r in rows[1:] if i < len(r) and r[i]]
            runs.append(RealRun(name, metric, tuple(s for s, _ in pts),
                                tuple(v for _, v in pts), file))
    return runs


def post_real_runs(
    url: str,
    token: str | None,
    existing: dict[str, dict[str, Any]],
    home: Any = None,
    project: str = REAL_PROJECT,
) -> list[str]:
    """Post every real run not yet finished on the server, through the trainer client, and
    mark it finished. Returns the names posted (a re-post overwrites identical values)."""
    import trainer_client as sw

    posted = []
    for real in load():
        if existing.get(real.name, {}).get("status") == "finished":
            continue
        run = sw.init(
            project=project, name=real.name, config=real.config(), tags=real.tags(),
            target_compute=real.compute[-1], compute_unit="samples",
            fit_metric="val_pass_rate", url=url, token=token, mode="online", home=home,
        )
        for step, c, v in zip(real.steps, real.compute, real.values, strict=True):
            run.log({"val_pass_rate": v}, step=step, compute=c)
        run.finish(timeout=60.0, status="finished")
        posted.append(real.name)
    return posted
