"""The fit metric chosen for each RL framework's real key set, and the warning when a training
reward is fitted beside a validation-looking metric.

The key sets are the names each framework's current code logs (the source of each is named
next to it; read in the frameworks' repositories, not copied), in the shape a tracker hands
them to scalewatch: W&B and TensorBoard keep them as logged (transformers' callbacks rewrite
``eval_x`` to ``eval/x`` and the rest to ``train/x``); verl's MLflow adapter turns ``@`` into
``_at_``.
"""

from __future__ import annotations

import pytest

from scalewatch.server.domain.fit_metric import choose, looks_like_validation

FRAMEWORK_KEYS: list[tuple[str, list[str], str]] = [
    # volcengine/verl: verl/trainer/ppo/ray_trainer.py (_val_metrics_update:
    # val-core/{data_source}/{acc|reward}/{mean@N, best@N/mean, maj@N/mean}, the rest val-aux),
    # verl/trainer/ppo/metric_utils.py (compute_data_metrics: critic/score/mean, ...).
    ("verl, data source with a slash, n=1",
     ["critic/score/mean", "critic/score/max", "critic/rewards/mean", "critic/advantages/mean",
      "response_length/mean", "perf/total_num_tokens", "perf/time_per_step", "timing_s/step",
      "training/global_step", "val-core/openai/gsm8k/acc/mean@1",
      "val-aux/openai/gsm8k/reward/mean@1", "val-aux/num_turns/mean"],
     "val-core/openai/gsm8k/acc/mean@1"),
    ("verl, reward-only data source, n=4",
     ["critic/score/mean", "critic/rewards/mean",
      "val-core/DigitalLearningGmbH/MATH-lighteval/reward/mean@4",
      "val-core/DigitalLearningGmbH/MATH-lighteval/reward/best@4/mean",
      "val-core/DigitalLearningGmbH/MATH-lighteval/reward/best@4/std",
      "val-core/DigitalLearningGmbH/MATH-lighteval/reward/maj@4/mean",
      "val-aux/DigitalLearningGmbH/MATH-lighteval/reward/mean@2",
      "val-aux/DigitalLearningGmbH/MATH-lighteval/reward/std@4"],
     "val-core/DigitalLearningGmbH/MATH-lighteval/reward/mean@4"),
    # verl/utils/tracking.py (_MlflowLoggingAdapter.log: "@" -> "_at_", "//" -> "/").
    ("verl through MLflow",
     ["critic/score/mean", "val-core/openai/gsm8k/acc/mean_at_1",
      "val-core/openai/gsm8k/acc/best_at_1/mean"],
     "val-core/openai/gsm8k/acc/mean_at_1"),
    # verl before 0.3 (commit 018b0d736, ray_trainer.py): val/test_score/{data_source}.
    ("verl before 0.3", ["critic/score/mean", "val/test_score/openai/gsm8k"],
     "val/test_score/openai/gsm8k"),
    # OpenRLHF/OpenRLHF: openrlhf/utils/logging_utils.py (WandbLogger: train/ and eval/
    # prefixes), openrlhf/trainer/ppo_trainer.py (eval_{ds}_pass1, eval_{ds}_pass{n},
    # _compute_rollout_stats: rollout/reward_mean).
    ("OpenRLHF",
     ["train/rollout/reward_mean", "train/rollout/reward_std", "train/rollout/truncated_rate",
      "train/global_step", "eval/eval_math_pass1", "eval/eval_math_pass4",
      "eval/eval_math_response_length_mean", "eval/eval_response_length_mean",
      "eval/global_step"],
     "eval/eval_math_pass1"),
    # huggingface/trl: trl/trainer/grpo_trainer.py (_metrics: reward, reward_std,
    # rewards/{fn}/mean; GRPOTrainer.log prefixes eval_), transformers' rewrite_logs (W&B).
    ("TRL GRPO through W&B",
     ["train/reward", "train/reward_std", "train/rewards/accuracy_reward/mean", "train/loss",
      "train/num_tokens", "train/global_step", "eval/reward", "eval/reward_std",
      "eval/rewards/accuracy_reward/mean", "eval/loss", "eval/runtime"],
     "eval/reward"),
    ("TRL GRPO through MLflow",
     ["reward", "reward_std", "rewards/accuracy_reward/mean", "loss", "num_tokens",
      "eval_reward", "eval_rewards/accuracy_reward/mean", "eval_loss"],
     "eval_reward"),
    # PrimeIntellect-ai/prime-rl: src/prime_rl/orchestrator/metrics.py (EvalMetrics.to_wandb:
    # {prefix}/{subset}/{agent}/avg@k, pass@k), orchestrator.py (train/agg, eval/{env}).
    ("prime-rl",
     ["progress/total_tokens", "progress/total_rollouts", "train/agg/all/agent/reward/mean",
      "train/agg/effective/agent/reward/mean", "train/agg/all/num_total_tokens/mean",
      "eval/math500/all/agent/avg@4", "eval/math500/effective/agent/avg@4",
      "eval/math500/effective/agent/pass@1", "eval/math500/policy_version"],
     "eval/math500/all/agent/avg@4"),
    # NVIDIA-NeMo/RL: nemo_rl/algorithms/grpo.py (validate: accuracy, avg_length, pass_k;
    # logger.log_metrics(prefix="validation" | "train")).
    ("NeMo-RL",
     ["train/reward", "train/loss", "train/total_num_tokens", "validation/accuracy",
      "validation/avg_length", "validation/pass_k"],
     "validation/accuracy"),
    # NovaSky-AI/SkyRL: skyrl/train/evaluate.py (eval/all/avg_score), skyrl/train/utils/
    # trainer_utils.py (eval/{data_source}/avg_score), skyrl/train/trainer.py (reward/...).
    ("SkyRL",
     ["reward/avg_raw_reward", "reward/avg_pass_at_8", "reward/mean_positive_reward",
      "eval/aime/avg_score", "eval/aime/pass_at_8", "eval/all/avg_score", "eval/all/pass_at_8",
      "eval/all/mean_positive_reward", "eval/gsm8k/avg_score"],
     "eval/all/avg_score"),
    # inclusionAI/AReaL: areal/workflow/rlvr.py (stats_tracker scalar reward in the
    # rollout / eval-rollout scope, areal/infra/workflow_context.py), areal/utils/
    # stats_tracker.py (scalars export key and key__count).
    ("AReaL",
     ["rollout/reward", "rollout/reward__count", "eval-rollout/reward",
      "eval-rollout/reward__count"],
     "eval-rollout/reward"),
    # alibaba/ROLL: roll/pipeline/rlvr/rlvr_pipeline.py (val_correct/all/mean,
    # val_correct/{tag}/mean), roll/utils/metrics/metrics_manager.py (critic/score/mean).
    ("ROLL RLVR",
     ["critic/score/mean", "critic/rewards/mean", "critic/correct/mean", "val_correct/all/mean",
      "val_correct/math/mean"],
     "val_correct/all/mean"),
    # roll/pipeline/agentic/agentic_pipeline.py (val/score/mean, val/{tag}/score/mean,
    # rollout/score/mean, critic/score/mean).
    ("ROLL agentic",
     ["critic/score/mean", "rollout/score/mean", "val/score/mean", "val/score/max",
      "val/SimpleSokoban/score/mean"],
     "val/score/mean"),
    # THUDM/slime: slime/observability/rollout_metrics.py (log_eval_rollout_data: eval/{key},
    # eval/{key}/..., eval/{key}-truncated_ratio, eval/{key}-pass@k, eval/step),
    # train_metric_utils.py (rollout/raw_reward, rollout/step).
    ("slime",
     ["rollout/raw_reward", "rollout/rewards", "rollout/step", "rollout/response_len/mean",
      "eval/aime", "eval/aime/response_len/mean", "eval/aime-truncated_ratio",
      "eval/aime-pass@1", "eval/aime-pass@16", "eval/step"],
     "eval/aime"),
    # ServiceNow/PipelineRL: pipelinerl/actor.py (publish_stats: wandb.log actor/...,
    # test_ prefix for eval), pipelinerl/finetune/rl/utils.py (rl/...).
    ("PipelineRL actor run",
     ["actor/success_mean", "actor/reward_mean", "actor/test_success_mean",
      "actor/test_reward_mean", "actor/aime_2024/success_mean", "actor/trainer_model_version"],
     "actor/test_success_mean"),
    ("PipelineRL finetune run", ["rl/reward", "rl/entropy", "stats/samples", "stats/tokens"],
     "rl/reward"),
]


@pytest.mark.parametrize(("framework", "names", "chosen"), FRAMEWORK_KEYS,
                         ids=[f[0] for f in FRAMEWORK_KEYS])
def test_each_frameworks_keys_fit_its_validation_metric(framework: str, names: list[str],
                                                        chosen: str) -> None:
    got = choose(None, names)
    assert got.metric == chosen, (framework, got)
    assert got.warning is None, got.warning  # recognised: nothing to warn about


def test_eval_bookkeeping_is_no_slime_eval_without_its_eval_step() -> None:
    # OpenRLHF's and HF's eval/ scalars are not slime's eval/{dataset} (no eval/step there).
    assert choose(None, ["train/rollout/reward_mean", "eval/eval_response_length_mean",
                         "eval/global_step"]).metric == "train/rollout/reward_mean"
    assert choose(None, ["train/reward", "eval/entropy", "eval/kl"]).metric == "train/reward"


def test_training_fallback_beside_a_validation_metric_is_a_warning() -> None:
    got = choose(None, ["critic/score/mean", "perf/total_num_tokens", "val/my_bench/accuracy",
                        "val/my_bench/response_length", "eval/global_step"])
    assert got.metric == "critic/score/mean" and "training score" in got.reason
    assert got.warning is not None
    assert "val/my_bench/accuracy" in got.warning and "(and" not in got.warning
    assert "fit-metric" in got.warning
    # Nothing recognised at all, and two validation-looking scores: the default, the same
    # warning naming them.
    got = choose(None, ["loss", "test/acc", "val/pass_rate"])
    assert got.metric == "reward" and "test/acc (and 1 more)" in (got.warning or "")
    # No validation-looking metric, a recognised validation metric, or a chosen metric: none.
    assert choose(None, ["train/reward", "train/loss", "eval/global_step"]).warning is None
    assert choose(None, ["critic/score/mean", "val-core/a/b/acc/mean@1"]).warning is None
    assert choose("critic/score/mean", ["val/my_bench/accuracy"]).warning is None
    assert choose(None, ["val/my_bench/accuracy"], "critic/score/mean").warning is None


@pytest.mark.parametrize(("name", "held_out"), [
    ("val-core/openai/gsm8k/acc/mean@1", True), ("eval_reward", True),
    ("actor/test_success_mean", True), ("validation/accuracy", True),
    ("eval-rollout/reward", True), ("val_correct/all/mean", True),
    ("critic/score/mean", False), ("timing_s/testing", False), ("eval/global_step", False),
    ("val-aux/num_turns/mean", False), ("evaluator_loss", False), ("interval/acc", False),
])
def test_what_looks_like_validation(name: str, held_out: bool) -> None:
    assert looks_like_validation(name) is held_out


def test_api_says_when_a_training_reward_is_fitted_beside_a_validation_metric(api) -> None:  # noqa: ANN001
    run = api.post("/api/v1/runs", json={"project": "warn", "name": "verl-custom"}).json()
    pts = [{"step": s, "compute": float(s), "metrics": {
        "critic/score/mean": s / 50, "val/my_bench/accuracy": s / 100}} for s in range(1, 6)]
    assert api.post(f"/api/v1/runs/{run['id']}/points", json={"points": pts}).status_code == 200

    got = api.get(f"/api/v1/runs/{run['id']}").json()
    assert got["fit_metric"] == "critic/score/mean"
    assert "val/my_bench/accuracy" in got["fit_metric_warning"]
    listed = api.get("/api/v1/runs", params={"project": "warn"}).json()["runs"][0]
    assert listed["fit_metric_warning"] == got["fit_metric_warning"]
    fit = api.get(f"/api/v1/runs/{run['id']}/fit").json()
    assert fit["metric"] == "critic/score/mean"
    assert fit["fit_metric_warning"] == got["fit_metric_warning"]
    # Asked for a metric by name, or once the run says what it fits: no warning.
    named = api.get(f"/api/v1/runs/{run['id']}/fit",
                    params={"metric": "critic/score/mean"}).json()
    assert "fit_metric_warning" not in named
    api.patch(f"/api/v1/runs/{run['id']}", json={"fit_metric": "val/my_bench/accuracy"})
    assert api.get(f"/api/v1/runs/{run['id']}").json()["fit_metric_warning"] is None
    assert "fit_metric_warning" not in api.get(f"/api/v1/runs/{run['id']}/fit").json()


@pytest.mark.parametrize("names", [["val/acc"], ["loss", "test/acc", "timing_s/testing"],
                                   ["val/acc", "val/response_length", "eval/global_step"]])
def test_a_custom_loops_only_validation_score_is_fitted(names: list[str]) -> None:
    """A loop no rule knows, logging one held-out score: fitting it beats fitting a `reward`
    the run does not log (which fitted nothing); a warning still asks to confirm it."""
    got = choose(None, names)
    score = next(n for n in names if n in ("val/acc", "test/acc"))
    assert got.metric == score and "only validation-looking score" in got.reason
    assert got.warning is not None and got.warning.startswith(f"fitting {score}:")
    # A recognised training reward still wins (with the warning it always had).
    got = choose(None, [*names, "train/reward"])
    assert got.metric == "train/reward" and score in (got.warning or "")


def test_api_fits_a_custom_loops_only_validation_score(api) -> None:  # noqa: ANN001
    run = api.post("/api/v1/runs", json={"project": "custom", "name": "loop"}).json()
    pts = [{"step": s, "compute": float(s), "metrics": {"val/acc": s / 100, "loss": 1 / s}}
           for s in range(1, 6)]
    assert api.post(f"/api/v1/runs/{run['id']}/points", json={"points": pts}).status_code == 200
    got = api.get(f"/api/v1/runs/{run['id']}").json()
    assert got["fit_metric"] == "val/acc"
    assert got["fit_metric_warning"].startswith("fitting val/acc:")
    fit = api.get(f"/api/v1/runs/{run['id']}/fit").json()
    assert fit["metric"] == "val/acc"
    assert fit["fit_metric_warning"] == got["fit_metric_warning"]
