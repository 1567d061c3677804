"""The trainer client takes metric names as long as the server does (250 characters, MLflow's
metric keys): log(), the followers' JSON lines and the W&B reader keep a 250-character name and
refuse or drop a 251-character one as they do any over-long name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trainer_client as sw
from trainer_client import lines, wandb_log
from trainer_client.limits import MAX_METRIC_NAME_LENGTH
from trainer_client.spool import Spool
from trainer_client.validation import metric_name_problem

LONG = ("val-core/" + "x" * 300)[:250]
TOO_LONG = LONG + "y"


def test_the_limit_is_mlflows_metric_key_length() -> None:
    assert MAX_METRIC_NAME_LENGTH == 250 == len(LONG)
    assert metric_name_problem(LONG) is None
    assert "250" in (metric_name_problem(TOO_LONG) or "")


def test_log_takes_a_250_character_name_and_refuses_251(tmp_path: Path) -> None:
    run = sw.init("p", "n", url="http://127.0.0.1:9", mode="offline", home=tmp_path)
    run.log({"reward": 0.5, LONG: 0.25}, step=1, compute=1.0)
    run.log({"reward": 0.6, LONG: 0.5}, step=2, compute=2.0)  # names known: the inline check
    for _ in range(2):  # refused however often it is logged, the run goes on
        with pytest.raises(ValueError, match="250"):
            run.log({"reward": 0.7, TOO_LONG: 0.75}, step=3, compute=3.0)
    run.log({LONG: 1.0}, step=4, compute=4.0)
    run.finish()
    pts = [p for f in run.spool.batches() for p in Spool.read_batch(f)]
    assert [(p["step"], p["metrics"]) for p in pts] == [
        (1, {"reward": 0.5, LONG: 0.25}), (2, {"reward": 0.6, LONG: 0.5}), (4, {LONG: 1.0})]


def test_a_follower_line_with_a_250_character_key_is_read() -> None:
    line = json.dumps({"step": 3, "reward": 0.5, LONG: 0.25, TOO_LONG: 1.0})
    assert lines.parse_record(line, "jsonl") == (3, {"reward": 0.5, LONG: 0.25})
    nested = json.dumps({"step": 4, "data": {"val-core": {"x" * 241: 0.5}}})
    assert lines.parse_record(nested, "verl") == (4, {"val-core/" + "x" * 241: 0.5})
    assert lines.parse_record(json.dumps({"step": 5, TOO_LONG: 1.0}), "jsonl") is None


def test_wandb_values_with_a_250_character_key_are_kept() -> None:
    assert dict(wandb_log._scalars(LONG, 0.5)) == {LONG: 0.5}
    assert dict(wandb_log._scalars(TOO_LONG, 0.5)) == {}
