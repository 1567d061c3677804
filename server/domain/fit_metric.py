"""Which metric a run's fit follows when nobody said: the RL frameworks' validation metrics,
recognised by name, else their training reward -- and a warning when that fallback was taken
although the run logs something that looks like a validation metric.

Runs that arrive with no change to the trainer (MLflow, JSONL, TensorBoard and W&B followers)
carry the framework's own names, so "val_pass_rate else reward" would fit nothing useful. The
first matching rule below wins (validation before training reward; within a rule, the
alphabetically first name, so the choice is stable); `explain_fit_metric` says which rule chose
it. The shapes follow each framework's code (tests/server/test_fit_metric_keys.py keeps real key
sets, with the source file each comes from). Some reach us rewritten by the tracker: verl's
MLflow adapter turns ``@`` into ``_at_`` and collapses ``//``; transformers' W&B and TensorBoard
callbacks turn ``eval_x`` into ``eval/x`` and prefix the rest with ``train/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    training: bool  # a training reward: chosen only when no validation metric is recognised
    requires: str | None = None  # another name the run must log for the rule to apply


_AT = r"(?:@|_at_)"  # verl's `@N`, as files/W&B keep it and as its MLflow adapter renames it


def _rules(training: bool, *rows: tuple[str, ...]) -> list[Rule]:
    """(name, pattern[, required name]) rows."""
    return [Rule(r[0], re.compile(r[1]), training, r[2] if len(r) > 2 else None) for r in rows]


RULES: tuple[Rule, ...] = (
    *_rules(
        False,
        ("scalewatch validation pass rate", r"^val_pass_rate$"),
        # `val-core/{data_source}/{acc|reward}/mean@N`: data sources often hold a slash
        # (openai/gsm8k, DigitalLearningGmbH/MATH-lighteval).
        ("verl validation accuracy", rf"^val-core/.+/acc/mean{_AT}\d+(?:/mean)?$"),
        ("verl validation reward", rf"^val-core/.+/reward/mean{_AT}\d+(?:/mean)?$"),
        ("verl (before 0.3) validation score", r"^val/test_score/.+$"),
        ("TRL / HF eval reward", r"^eval[_/]reward$"),
        ("NeMo-RL validation accuracy", r"^validation/accuracy$"),
        ("SkyRL eval score (all data sources)", r"^eval/all/avg_score$"),
        ("SkyRL eval score", r"^eval/[^/]+/avg_score$"),
        ("OpenRLHF eval pass@1", r"^eval/.+_pass1$"),
        ("prime-rl eval average", rf"^eval/.+/all/[^/]+/avg{_AT}\d+$"),
        ("prime-rl eval average", rf"^eval/.+/avg{_AT}\d+$"),
        ("PipelineRL test success", r"^(?:actor/)?test_success_mean$"),
        ("PipelineRL test reward", r"^(?:actor/)?test_reward_mean$"),
        ("AReaL eval reward", r"^eval-rollout/reward$"),
        ("ROLL validation accuracy", r"^val_correct/all/mean$"),
        ("ROLL validation accuracy", r"^val_correct/[^/]+/mean$"),
        ("ROLL agentic validation score", r"^val/score/mean$"),
        ("ROLL agentic validation score", r"^val/[^/]+/score/mean$"),
        # slime logs `eval/{dataset}` (and `eval/{dataset}-pass@k`, `.../truncated_ratio`)
        # with its own x-axis `eval/step`: only a run that has it is a slime run.
        ("slime eval reward",
         r"^eval/(?!step$|global_step$|epoch$)(?![^/]*-(?:truncated_ratio|pass@\d+)$)[^/]+$",
         "eval/step"),
    ),
    # No validation metric: the training reward.
    *_rules(
        True,
        ("training reward", r"^reward$"),
        ("verl training score (ROLL's too)", r"^critic/score/mean$"),
        ("NeMo-RL / TRL training reward", r"^train/reward$"),
        ("SkyRL training reward", r"^reward/avg_raw_reward$"),
        ("OpenRLHF training reward", r"^train/rollout/reward_mean$"),
        ("prime-rl training reward", r"^train/(?:.+/)?reward/mean$"),
        ("AReaL training reward", r"^rollout/reward$"),
        ("slime training reward", r"^rollout/raw_reward$"),
        ("PipelineRL training reward", r"^(?:actor/)?reward_mean$"),
        ("PipelineRL training reward", r"^rl/reward$"),
        ("verl training reward", r"^critic/rewards/mean$"),
    ),
)
FALLBACK = "reward"
_NONE = len(RULES)


@lru_cache(maxsize=65_536)
def _matches(name: str) -> tuple[int, ...]:
    """The indices of the rules `name` matches, in order; cached because ingest asks about the
    same few names with every batch."""
    return tuple(i for i, rule in enumerate(RULES) if rule.pattern.match(name))


# A name "looks like validation" when one of its path parts starts with val/eval/test
# (val-core, val_correct, eval-rollout, eval_reward, actor/test_success_mean, validation/...).
_HELD_OUT_PART = re.compile(r"^(?:val|valid|validation|eval|evaluation|test)(?:$|[-_@])")
# ... unless it is bookkeeping (counters, lengths, timings) rather than a score.
_BOOKKEEPING = re.compile(r"step|epoch|length|_len|turns|tokens|time|count|per_second|loss|"
                          r"version|truncat|clip")
_SCORE_WORDS = re.compile(r"acc|score|reward|pass|success|correct|solve")


@lru_cache(maxsize=65_536)
def looks_like_validation(name: str) -> bool:
    return (any(_HELD_OUT_PART.match(part) for part in name.split("/"))
            and not _BOOKKEEPING.search(name))


@dataclass(frozen=True)
class FitMetricChoice:
    metric: str
    reason: str
    warning: str | None = None  # said plainly by the API and the Run page


def choose(explicit: str | None, names: Iterable[str],
           project_default: str | None = None) -> FitMetricChoice:
    """The fit metric: the run's own, else its project's default, else the recognised one --
    with a warning when a training reward was chosen beside a validation-looking metric."""
    if explicit:
        return FitMetricChoice(explicit, "set for this run")
    if project_default:
        return FitMetricChoice(project_default, "the project's default")
    present = set(names)
    best: tuple[int, str] | None = None
    for name in present:
        rank = next((i for i in _matches(name)
                     if RULES[i].requires is None or RULES[i].requires in present), _NONE)
        if best is None or (rank, name) < best:
            best = (rank, name)
    if best is None or best[0] == _NONE:
        only = _only_validation_score(present)
        if only is not None:  # better than fitting a `reward` the run does not log
            return FitMetricChoice(only, "the run's only validation-looking score (no metric "
                                   "recognised by name)", _guess_warning(only))
        metric, reason = FALLBACK, "default (no recognised validation or reward metric yet)"
    else:
        metric, reason = best[1], f"recognised: {RULES[best[0]].name}"
    if best is not None and best[0] < _NONE and not RULES[best[0]].training:
        return FitMetricChoice(metric, reason)
    return FitMetricChoice(metric, reason, _warning(metric, present))


def _only_validation_score(names: set[str]) -> str | None:
    """The one name that looks like a held-out score (``val/acc``, ``test/pass_rate``), if
    exactly one does: a custom loop's own validation metric, which no rule can know."""
    scores = [n for n in names if looks_like_validation(n) and _SCORE_WORDS.search(n)]
    return scores[0] if len(scores) == 1 else None


def _guess_warning(metric: str) -> str:
    return (f"fitting {metric}: no metric was recognised by name, and it is the only one this "
            "run logs that looks like a held-out score. If it is not, make the right one the "
            "fit metric (this run's or the project's: `scalewatch fit-metric`, or PATCH "
            "fit_metric)")


def _warning(metric: str, names: set[str]) -> str | None:
    held_out = sorted(n for n in names if looks_like_validation(n))
    if not held_out:
        return None
    scores = [n for n in held_out if _SCORE_WORDS.search(n)] or held_out
    more = f" (and {len(held_out) - 1} more)" if len(held_out) > 1 else ""
    return (f"fitting the training reward {metric}: no validation metric was recognised, but "
            f"this run logs {scores[0]}{more}, which looks like one. If that is the held-out "
            "score, make it the fit metric (this run's or the project's: `scalewatch "
            "fit-metric`, or PATCH fit_metric)")


def explain_fit_metric(explicit: str | None, names: Iterable[str],
                       project_default: str | None = None) -> tuple[str, str]:
    """(metric, why it was chosen)."""
    c = choose(explicit, names, project_default)
    return c.metric, c.reason


def choose_fit_metric(explicit: str | None, names: Iterable[str],
                      project_default: str | None = None) -> str:
    return choose(explicit, names, project_default).metric
