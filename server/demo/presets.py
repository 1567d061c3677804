"""Simulated training recipes, shaped by the fits in Table 1 of arXiv 2510.13786 (ScaleRL).

Each :class:`Recipe` is one run: the Table-1 sigmoid it follows (A, B, C_mid with compute in
GB200 GPU-hours), how much compute one trainer step costs, the budget it stops at, and the
recipe knobs that go into the run's config and tags. The cost per step is derived from the
paper: ~1.5 GPU-h per step at batch 768 with 14k generation (about 1k steps per 1.5k GPU-h),
scaled with the batch size and, roughly, with the generation length; the Scout MoE run used
50k GPU-h over 7,100 steps (~7 GPU-h per step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEMO_PROJECT = "scalerl-demo"
R0_8B = 0.30  # assumed pass rate of the post-SFT 8B checkpoint (the paper does not report R0)
R0_SCOUT = 0.38  # the bigger MoE starts higher (assumption, consistent with its higher A)


@dataclass(frozen=True)
class Drop:
    """A mid-run change (e.g. a new data mix) that moves the run onto a worse sigmoid."""

    at: float  # GPU-h where the change happens
    a_after: float  # asymptote of the new, worse sigmoid
    width: float = 250.0  # GPU-h over which the curve bends over to the new sigmoid


@dataclass(frozen=True)
class Collapse:
    """Training instability: past ``at`` the pass rate decays towards ``floor``."""

    at: float
    floor: float = 0.12
    scale: float = 1500.0  # GPU-h e-folding of the decay


@dataclass(frozen=True)
class Recipe:
    key: str  # preset name
    name: str  # run name
    a: float
    b: float
    c_mid: float
    target: float  # GPU-h budget (the run's target_compute); the run stops there
    gpu_h_per_step: float
    r0: float = R0_8B
    model: str = "8B dense"
    batch_size: int = 768  # completions per step
    gen_length: int = 14_336  # generation budget in tokens ("14k")
    gens_per_prompt: int = 16
    eval_every: int = 100  # steps between evaluations, as in the paper
    drop: Drop | None = None
    collapse: Collapse | None = None
    extra_tags: tuple[str, ...] = field(default_factory=tuple)
    note: str = ""

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.gens_per_prompt

    @property
    def n_steps(self) -> int:
        """Steps to reach the target, rounded up to a whole evaluation interval."""
        steps = int(-(-self.target // self.gpu_h_per_step))
        return int(-(-steps // self.eval_every) * self.eval_every)

    @property
    def n_evals(self) -> int:
        """Evaluations including the one at step 0 (R0)."""
        return self.n_steps // self.eval_every + 1

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "recipe": "ScaleRL",
            "model": self.model,
            "batch_size": self.batch_size,
            "prompts_per_step": self.prompts_per_step,
            "generations_per_prompt": self.gens_per_prompt,
            "generation_length": self.gen_length,
            "loss": "CISPO",
            "off_policy": "PipelineRL-8",
            "eval_every_steps": self.eval_every,
            "gpu_hours_per_step": self.gpu_h_per_step,
            "simulated": True,
            "simulated_from": {"A": self.a, "B": self.b, "C_mid": self.c_mid, "R0": self.r0,
                               "source": "arXiv 2510.13786 Table 1"},
        }
        if self.drop is not None:
            cfg["data_mix_change_at_gpu_hours"] = self.drop.at
        if self.collapse is not None:
            cfg["instability_from_gpu_hours"] = self.collapse.at
        if self.note:
            cfg["note"] = self.note
        return cfg

    def tags(self) -> list[str]:
        model = "scout" if "MoE" in self.model else "8b"
        return [
            "simulated",
            model,
            f"bs{self.batch_size}",
            f"gen{self.gen_length // 1024}k",
            f"{self.gens_per_prompt}gen",
            *self.extra_tags,
        ]


BASE = Recipe("baseline", "scalerl-8b-bs768-14k", 0.610, 1.92, 2542, 16_000, 1.5)

PRESETS: dict[str, Recipe] = {
    r.key: r
    for r in (
        BASE,
        # Longer generations: each step costs ~2x, early progress is slower, A is higher.
        Recipe("gen32k", "scalerl-8b-bs768-32k", 0.645, 1.89, 11_272, 32_000, 3.0,
               gen_length=32_768),
        Recipe("bs2048", "scalerl-8b-bs2048-14k", 0.645, 1.70, 10_909, 50_000, 4.0,
               batch_size=2048),
        # Generations per prompt at a fixed total batch of 768 completions: same cost per step.
        Recipe("gen8", "scalerl-8b-8gen", 0.585, 2.44, 2542, 16_000, 1.5, gens_per_prompt=8),
        Recipe("gen24", "scalerl-8b-24gen", 0.590, 2.22, 3054, 16_000, 1.5, gens_per_prompt=24),
        Recipe("gen32", "scalerl-8b-32gen", 0.595, 2.07, 2936, 16_000, 1.5, gens_per_prompt=32),
        Recipe("scout", "scalerl-scout-17bx16", 0.710, 1.65, 4242, 50_000, 7.0, r0=R0_SCOUT,
               model="Llama-4 Scout 17Bx16 MoE"),
        # The baseline recipe whose data mix changes at 11k GPU-h (~4 x C_mid, so the fit
        # is pinned down before the change): the curve bends onto a sigmoid with A = 0.52.
        Recipe("drop", "scalerl-8b-datamix-v2", 0.610, 1.92, 2542, 16_000, 1.5,
               drop=Drop(at=11_000, a_after=0.52), extra_tags=("datamix-change",),
               note="data mix changed mid-run (simulated asymptote drop)"),
        # An unstable variant (e.g. truncations above 10%): the pass rate collapses.
        Recipe("collapse", "scalerl-8b-unstable", 0.610, 1.92, 2542, 10_000, 1.5,
               collapse=Collapse(at=4_000), extra_tags=("unstable",),
               note="training collapses (simulated instability)"),
    )
}

# `scalewatch serve --demo` runs these live (and the real Deep-GRPO runs, finished).
DEMO_PRESETS: tuple[str, ...] = (
    "baseline", "gen32k", "bs2048", "gen8", "gen24", "gen32", "scout", "drop",
)
# Recipes the demo runs as several seeds, one group each (the Runs page's "by group" view, the
# Group page, groups on Compare): 8 and 32 generations per prompt have ceilings 0.01 apart, the
# paper's case where seeds decide whether the recipes differ at all.
DEMO_SEEDS: dict[str, tuple[int, ...]] = {"gen8": (0, 1, 2), "gen32": (0, 1, 2)}


@dataclass(frozen=True)
class DemoRun:
    key: str  # preset
    seed: int
    name: str  # seed 0 keeps the preset's run name; other seeds add "-seed<k>"
    group: str | None  # the preset's run name when it runs as several seeds


def demo_runs() -> list[DemoRun]:
    """Every live run of the demo, in start order."""
    runs = []
    for key in DEMO_PRESETS:
        name, seeds = PRESETS[key].name, DEMO_SEEDS.get(key, (0,))
        group = name if len(seeds) > 1 else None
        runs += [DemoRun(key, s, name if s == 0 else f"{name}-seed{s}", group) for s in seeds]
    return runs


def resolve(name: str) -> list[Recipe]:
    """Recipes of a preset name; ``all`` is every preset."""
    if name == "all":
        return list(PRESETS.values())
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; expected one of {', '.join(choices())}")
    return [PRESETS[name]]


def choices() -> list[str]:
    return [*PRESETS, "all"]
