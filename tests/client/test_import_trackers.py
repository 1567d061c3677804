"""`scalewatch import mlflow` / `scalewatch import wandb`: finished runs from other trackers,
read with the real readers and sent through trainer_client (spool, retries) to a live server.

MLflow runs are written by the real `mlflow` client (a file-store tracking directory, and a
scalewatch server's MLflow-compatible endpoint with more than one get-history page). W&B's
service is not reachable here: its `scan_history()` row format is tested on recorded rows; the
CSV and Parquet exports are real files."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from trainer_client.cli import main as cli_main
from trainer_client.follow import Compute
from trainer_client.importers import read_wandb_csv, wandb_row_records

T0 = 1_760_000_000.0  # a wall-clock start (seconds since the epoch)

# What `wandb.Api().run(path).scan_history()` yields, recorded: bookkeeping keys with a leading
# underscore, nested dicts for grouped summaries, media / histogram dicts with `_type`, None
# for a key missing from a row, strings.
SCAN_HISTORY_ROWS = [
    {"_step": 0, "_runtime": 3.2, "_timestamp": T0, "train/reward": 0.1,
     "eval/gsm8k/avg_score": None, "lr": 1e-6, "_wandb": {"runtime": 3}},
    {"_step": 1, "_runtime": 63.0, "_timestamp": T0 + 60, "train/reward": 0.2,
     "eval/gsm8k/avg_score": 0.05, "samples": {"_type": "table-file", "path": "x.json"},
     "hist": {"_type": "histogram", "bins": [0, 1], "values": [3]}, "note": "text"},
    {"_step": 2, "_runtime": 123.0, "_timestamp": T0 + 120, "train/reward": float("nan"),
     "perf": {"tokens": 512, "mfu": 0.4}, "flag": True},
    {"_runtime": 130.0, "train/reward": 0.9},  # no _step: not a history row
]


def _run(server: LiveServer, project: str, name: str) -> dict:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
        return next(r for r in runs if r["name"] == name)


def _all_points(server: LiveServer, run_id: int, metric: str) -> list[dict]:
    out: list[dict] = []
    with server.client() as api:
        while True:
            params: dict = {"metric": metric}
            if out:
                params["since_step"] = out[-1]["step"] + 1
            page = api.get(f"/api/v1/runs/{run_id}/points", params=params).json()["points"]
            if not page:
                return out
            out += page


def test_scan_history_rows() -> None:
    assert wandb_row_records(SCAN_HISTORY_ROWS) == [
        (0, {"train/reward": 0.1, "lr": 1e-6}, T0),
        (1, {"train/reward": 0.2, "eval/gsm8k/avg_score": 0.05}, T0 + 60),
        (2, {"perf/tokens": 512.0, "perf/mfu": 0.4}, T0 + 120),
    ]


def test_wandb_csv_exports(tmp_path: Path) -> None:
    chart = tmp_path / "chart.csv"  # a chart's "Export as CSV": RUN - metric, __MIN/__MAX
    with chart.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Step", "grpo-7b - eval_reward", "grpo-7b - eval_reward__MIN",
                    "grpo-7b - eval_reward__MAX"])
        w.writerows([[10, 0.25, 0.2, 0.3], [20, "", "", ""], [30, 0.5, 0.4, 0.6]])
    assert read_wandb_csv(chart) == [(10, {"eval_reward": 0.25}, None),
                                     (30, {"eval_reward": 0.5}, None)]
    table = tmp_path / "history.csv"  # a run's history table: _step, _timestamp, metrics
    with table.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["_step", "_runtime", "_timestamp", "reward", "eval_reward"])
        w.writerows([[0, 1, T0, 0.1, ""], [1, 61, T0 + 60, 0.2, 0.3], [2, 121, T0 + 120, "NaN",
                                                                        0.4]])
    assert read_wandb_csv(table) == [(0, {"reward": 0.1}, T0),
                                     (1, {"reward": 0.2, "eval_reward": 0.3}, T0 + 60),
                                     (2, {"eval_reward": 0.4}, T0 + 120)]


def test_gpu_hours_compute() -> None:
    c = Compute("gpu-hours:8")
    assert c.unit == "gpu_hours"
    assert c.of(0, {}, T0) == 0.0
    assert c.of(1, {}, T0 + 1800) == 4.0  # half an hour x 8 GPUs
    assert c.of(2, {"_timestamp": T0 + 3600}) == 8.0  # the record's own time field
    resumed = Compute("gpu-hours:8", **c.state())  # a restarted follower keeps its start
    assert resumed.of(3, {}, T0 + 7200) == 16.0
    for bad in ("gpu-hours:0", "gpu-hours:x", "gpu-hours"):
        with pytest.raises(ValueError):
            Compute(bad)


@pytest.mark.slow
def test_import_wandb_parquet_with_gpu_hours(live_server: LiveServer, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    hist = tmp_path / "run-abc-history"
    hist.mkdir()
    steps = 3000
    for part, rng in enumerate((range(0, 1500), range(1500, steps))):  # two history files
        rows = [{"_step": s, "_timestamp": T0 + 36.0 * s, "_runtime": 36.0 * s,
                 "train/reward": s / steps,
                 "eval/math/avg_score": (s / (2 * steps)) if s % 100 == 0 else None}
                for s in rng]
        pq.write_table(pa.Table.from_pylist(rows), hist / f"{part:04d}.parquet")
    code = cli_main(["import", "wandb", str(hist), "--project", "wb", "--name", "w1",
                     "--url", live_server.url, "--home", str(tmp_path / "h"),
                     "--compute", "gpu-hours:4"])
    assert code == 0
    run = _run(live_server, "wb", "w1")
    assert (run["status"], run["compute_unit"]) == ("finished", "gpu_hours")
    assert run["fit_metric"] == "eval/math/avg_score"
    pts = _all_points(live_server, run["id"], "train/reward")
    assert [p["step"] for p in pts] == list(range(steps))  # every step, once
    # 36 s a step x 4 GPUs = 0.04 GPU-hours a step.
    assert [p["compute"] for p in pts] == pytest.approx([0.04 * s for s in range(steps)])
    evals = _all_points(live_server, run["id"], "eval/math/avg_score")
    assert [p["step"] for p in evals] == list(range(0, steps, 100))


@pytest.mark.slow
def test_import_mlflow_file_store(live_server: LiveServer, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch,
                                  caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3 keeps ./mlruns opt-in
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("math-rl")
    run = client.create_run(exp, run_name="verl-grpo", tags={
        "scalewatch.fit_metric": "critic/score/mean", "scalewatch.group": "grpo-7b"})
    rid = run.info.run_id
    ms = int(T0 * 1000)
    for start in range(0, 600, 200):
        client.log_batch(rid, metrics=[
            m for s in range(start, start + 200) for m in (
                Metric("critic/score/mean", s / 600, ms + 90_000 * s, s),
                Metric("val-core/gsm8k/acc/mean_at_1", s / 1000, ms + 90_000 * s, s))
        ] + [Metric("critic/score/mean", 0.0, ms + 90_000 * start, start)])  # a re-log
    client.log_metric(rid, "val-core/gsm8k/acc/mean_at_1", 0.9, ms + 90_000 * 599, 599)
    client.log_metric(rid, "critic/score/mean", float("nan"), ms, 700)  # named, not dropped
    client.set_terminated(rid)

    code = cli_main(["import", "mlflow", uri, "--experiment", "math-rl", "--run", "verl-grpo",
                     "--project", "imported", "--name", "grpo", "--url", live_server.url,
                     "--home", str(tmp_path / "h"), "--compute", "gpu-hours:8",
                     "--no-progress"])
    assert code == 0
    assert "skipped metric 'critic/score/mean' step 700: nan is not a finite number" in caplog.text
    got = _run(live_server, "imported", "grpo")
    assert got["status"] == "finished"
    assert got["fit_metric"] == "critic/score/mean"  # the scalewatch.fit_metric tag
    assert got["group"] == "grpo-7b"  # the scalewatch.group tag
    assert got["config"]["mlflow_run_id"] == rid
    acc = _all_points(live_server, got["id"], "val-core/gsm8k/acc/mean_at_1")
    assert [p["step"] for p in acc] == list(range(600))
    assert acc[-1]["value"] == 0.9  # the later value of a step wins
    # 90 s a step x 8 GPUs = 0.2 GPU-hours a step.
    assert [p["compute"] for p in acc] == pytest.approx([0.2 * s for s in range(600)])

    # A run id needs no experiment; a missing run is an error, not an empty import.
    assert cli_main(["import", "mlflow", uri, "--run", "nope", "--project", "imported",
                     "--name", "x", "--url", live_server.url, "--home", str(tmp_path / "h")]) == 2


@pytest.mark.slow
def test_import_mlflow_from_scalewatch_endpoint_pages_history(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """More steps than one metrics/get-history page (25,000): the import reads every page."""
    pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=live_server.url)
    exp = client.create_experiment("paged")
    rid = client.create_run(exp, run_name="long").info.run_id
    steps = 26_000
    for start in range(0, steps, 1000):
        client.log_batch(rid, metrics=[Metric("eval_reward", s / steps, 0, s)
                                       for s in range(start, start + 1000)])
    code = cli_main(["import", "mlflow", live_server.url, "--run", rid, "--project", "copy",
                     "--name", "long", "--url", live_server.url, "--home",
                     str(tmp_path / "h"), "--no-progress"])
    assert code == 0
    got = _run(live_server, "copy", "long")
    assert (got["fit_metric"], got["compute_unit"]) == ("eval_reward", "steps")
    pts = _all_points(live_server, got["id"], "eval_reward")
    assert [p["step"] for p in pts] == list(range(steps))


@pytest.mark.slow
def test_fit_metric_cli(live_server: LiveServer, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / "h")
    for name in ("a", "b"):
        log = tmp_path / f"{name}.jsonl"
        log.write_text("".join(
            f'{{"step": {s}, "eval_reward": {s / 10}, "reward": {s / 20}}}\n' for s in range(5)))
        assert cli_main(["import", "jsonl", str(log), "--project", "fm", "--name", name,
                         "--url", live_server.url, "--home", home, "--no-progress"]) == 0
    base = ["fit-metric", "--project", "fm", "--url", live_server.url]
    assert cli_main([*base, "reward"]) == 0
    assert "default fit metric reward" in capsys.readouterr().out
    assert _run(live_server, "fm", "a")["fit_metric_reason"] == "the project's default"
    assert cli_main([*base, "--run", "b", "eval_reward"]) == 0
    assert "fm/b fits eval_reward (set for this run)" in capsys.readouterr().out
    assert (_run(live_server, "fm", "a")["fit_metric"],
            _run(live_server, "fm", "b")["fit_metric"]) == ("reward", "eval_reward")
    assert cli_main([*base, "--run", "b", "--clear"]) == 0
    assert "fm/b fits reward (the project's default)" in capsys.readouterr().out
    assert cli_main([*base, "--clear"]) == 0
    assert _run(live_server, "fm", "a")["fit_metric"] == "eval_reward"  # recognised again
    assert cli_main([*base, "--run", "nope", "x"]) == 1


def test_steps_past_2_53_keep_their_value() -> None:
    """A step went through float on its way in: past 2^53 neighbouring steps became one (49
    steps near 2^62 of an MLflow run imported as one, its last value), and others moved. The
    API takes steps up to 2^62 exactly; so does import (ints, their text, numpy integers)."""
    import numpy as np

    base = 2**62 - 49
    rows = [{"_step": base + i, "m": float(i)} for i in range(3)]
    rows += [{"_step": str(base + 10), "m": 10.0}, {"_step": np.int64(base + 11), "m": 11.0}]
    got = wandb_row_records(rows)
    assert [(s, m["m"]) for s, m, _ in got] == [
        (base, 0.0), (base + 1, 1.0), (base + 2, 2.0), (base + 10, 10.0), (base + 11, 11.0)]
    assert wandb_row_records([{"_step": 2**62 + 1, "m": 1.0}, {"_step": 1.5, "m": 1.0},
                              {"_step": -1, "m": 1.0}, {"_step": True, "m": 1.0}]) == []
    assert wandb_row_records([{"_step": 7.0, "m": 1.0}])[0][0] == 7  # a whole float is a step


def test_import_mlflow_from_scalewatch_by_a_quoted_name_with_times(
    live_server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run named with a ' is found by name (the filter escaped it with a backslash, which
    MLflow's parser keeps); each value's logged time comes back from metrics/get-history (it
    was 0, so `--compute gpu-hours:N` refused this source); the source URL keeps its "//";
    without --experiment a server that cannot list experiments says to give one."""
    pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=live_server.url)
    exp = client.create_experiment("quoted")
    rid = client.create_run(exp, run_name="it's").info.run_id
    ms = int(T0 * 1000)
    client.log_batch(rid, metrics=[Metric("eval_reward", s / 100, ms + 90_000 * s, s)
                                   for s in range(30)])
    args = ["--project", "copy", "--url", live_server.url, "--home", str(tmp_path / "h"),
            "--no-progress"]
    code = cli_main(["import", "mlflow", live_server.url, "--experiment", "quoted", "--run",
                     "it's", "--name", "quoted", "--compute", "gpu-hours:8", *args])
    assert code == 0
    got = _run(live_server, "copy", "quoted")
    assert got["config"]["source"] == f"mlflow:{live_server.url}"
    pts = _all_points(live_server, got["id"], "eval_reward")
    assert [p["compute"] for p in pts] == pytest.approx([0.2 * s for s in range(30)])
    capsys.readouterr()
    assert cli_main(["import", "mlflow", live_server.url, "--run", "it's", "--name", "x",
                     *args]) == 2
    assert "give --experiment NAME" in capsys.readouterr().err


def test_what_an_export_cannot_hold_is_named_not_dropped_silently(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """W&B CSV rows whose step is 1.5, -1 or text, cells that are text or NaN and a column
    name the server refuses were dropped without a word (exit 0, fewer points), where the line
    formats warn for the same thing; MLflow/Parquet/API rows go the same way."""
    from trainer_client.records import BadLines

    table = tmp_path / "history.csv"
    with table.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["_step", "reward", "x" * 260])
        w.writerows([[0, 0.1, 1], [1.5, 0.2, 1], [-1, 0.3, 1], ["abc", 0.4, 1], [2, "oops", 1],
                     [3, "NaN", 1], [4, "", 1], [5, 0.5, 1]])
    bad = BadLines()
    with caplog.at_level("WARNING", logger="scalewatch"):
        got = read_wandb_csv(table, bad=bad)
    assert [(s, m) for s, m, _ in got] == [(0, {"reward": 0.1}), (5, {"reward": 0.5})]
    said = caplog.text
    assert bad.count == 6, said  # the column, three steps, "oops" and NaN; not the empty cell
    for where in ("history.csv:3", "history.csv:4", "history.csv:5", "history.csv:6 column "
                  "'reward'", "history.csv:7 column 'reward'", "column 'xxxx"):
        assert where in said, (where, said)
    rows = wandb_row_records([{"_step": 0, "a": float("nan"), "b": 1.0, "note": "text"},
                              {"_step": -3, "a": 1.0}], bad=(rows_bad := BadLines()))
    assert rows == [(0, {"b": 1.0}, None)] and rows_bad.count == 2
