"""Which metric a run's fit follows when nobody said: the RL frameworks' validation metrics,
recognised by name, else their training reward.

Runs that arrive with no change to the trainer (MLflow, JSONL and TensorBoard followers) carry
the framework's own names, so "val_pass_rate else reward" would fit nothing useful. The first
match below wins (validation before training reward; within a rule, the alphabetically first
name, so the choice is stable); `explain_fit_metric` says which rule chose it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

# (rule, pattern); the order is the preference. `@N` arrives as `_at_N` through MLflow (verl
# cleans keys) and as `@N` in files.
_AT = r"(?:@|_at_)"
RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (rule, re.compile(pattern))
    for rule, pattern in (
        ("scalewatch validation pass rate", r"^val_pass_rate$"),
        ("verl validation accuracy", rf"^val-core/[^/]+/acc/mean{_AT}\d+(?:/mean)?$"),
        ("verl validation reward", rf"^val-core/[^/]+/reward/mean{_AT}\d+(?:/mean)?$"),
        ("TRL / HF eval reward", r"^eval_reward$"),
        ("NeMo-RL validation accuracy", r"^validation/accuracy$"),
        ("SkyRL eval score", r"^eval/[^/]+/avg_score$"),
        ("OpenRLHF eval pass@1", r"^eval/.+_pass1$"),
        ("prime-rl eval average", rf"^eval/.+/avg{_AT}\d+$"),
        ("PipelineRL test success", r"^test_success_mean$"),
        ("AReaL eval reward", r"^eval-rollout/reward$"),
        # No validation metric: the training reward.
        ("training reward", r"^reward$"),
        ("verl training score", r"^critic/score/mean$"),
        ("NeMo-RL training reward", r"^train/reward$"),
        ("SkyRL training reward", r"^reward/avg_raw_reward$"),
        ("OpenRLHF training reward", r"^train/rollout/reward_mean$"),
        ("prime-rl training reward", r"^train/(?:.+/)?reward/mean$"),
        ("AReaL training reward", r"^rollout/reward$"),
        ("PipelineRL training reward", r"^reward_mean$"),
        ("verl training reward", r"^critic/rewards/mean$"),
    )
)
FALLBACK = "reward"


@lru_cache(maxsize=65_536)
def _rank(name: str) -> int:
    """The index of the first rule `name` matches (len(RULES) for none); cached because ingest
    asks about the same few names with every batch."""
    for i, (_rule, pattern) in enumerate(RULES):
        if pattern.match(name):
            return i
    return len(RULES)


def explain_fit_metric(explicit: str | None, names: Iterable[str],
                       project_default: str | None = None) -> tuple[str, str]:
    """(metric, why it was chosen): the run's own, else its project's default, else the
    recognised one."""
    if explicit:
        return explicit, "set for this run"
    if project_default:
        return project_default, "the project's default"
    best: tuple[int, str] | None = None
    for name in names:
        key = (_rank(name), name)
        if best is None or key < best:
            best = key
    if best is None or best[0] == len(RULES):
        return FALLBACK, "default (no recognised validation or reward metric yet)"
    return best[1], f"recognised: {RULES[best[0]][0]}"


def choose_fit_metric(explicit: str | None, names: Iterable[str],
                      project_default: str | None = None) -> str:
    return explain_fit_metric(explicit, names, project_default)[0]
