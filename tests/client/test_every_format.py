"""Every registered log format is followed (``scalewatch follow``, the real command in a
subprocess) and imported (``scalewatch import``) end to end on a tiny sample, into a real server.
A format added to the registry (``trainer_client/formats.py``) without a sample here fails
`test_every_format_has_a_sample`."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.client.test_pipelinerl_sidecar import T0, append, log_path, make_exp, trainer_line
from tests.client.test_wandb_follow import _finished, _writer
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from trainer_client.cli import main as cli_main
from trainer_client.formats import follow_formats, import_formats

pytestmark = pytest.mark.slow
STEPS = list(range(1, 6))


@dataclass(frozen=True)
class Sample:
    """Writes a tiny source under a folder: (the PATH argument, extra arguments, the project
    and run name the points land in, the metric to look at, the steps expected)."""

    write: Callable[[Path], tuple[Path, list[str], str, str, str, list[int]]]


def _lines(tmp: Path, rows: list[dict[str, Any]], name: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _verl(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    rows = [{"step": s, "data": {"reward": s / 10}} for s in STEPS]
    return _lines(tmp, rows, "verl.jsonl"), [], "fmt", "verl", "reward", STEPS


def _prime_rl(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    _lines(tmp, [{"step": s, "reward": s / 10} for s in STEPS], "out/metrics.jsonl")
    return tmp / "out", [], "fmt", "prime-rl", "reward", STEPS


def _jsonl(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    rows = [{"it": s, "eval": {"score": s / 10}} for s in STEPS]
    return (_lines(tmp, rows, "any.jsonl"), ["--step-key", "it"], "fmt", "jsonl", "eval/score",
            STEPS)


def _tensorboard(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    tbx = pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    writer = tbx.SummaryWriter(str(tmp / "tb"))
    for s in STEPS:
        writer.add_scalar("reward", s / 10, s)
    writer.close()
    return tmp / "tb", [], "fmt", "tensorboard", "reward", STEPS


def _mlflow(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = (tmp / "mlruns").as_uri()
    client = MlflowClient(tracking_uri=uri)
    run = client.create_run(client.create_experiment("fmt-exp"), run_name="ml")
    client.log_batch(run.info.run_id, metrics=[
        Metric("reward", s / 10, int(T0 * 1000) + s, s) for s in STEPS])
    client.set_terminated(run.info.run_id)
    return (Path(uri), ["--run", "ml", "--experiment", "fmt-exp"], "fmt", "mlflow", "reward",
            STEPS)


def _wandb_export(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    table = tmp / "history.csv"
    with table.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["_step", "_timestamp", "reward"])
        w.writerows([[s, T0 + 60 * s, s / 10] for s in STEPS])
    return table, [], "fmt", "wandb", "reward", STEPS


def _wandb_logs(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    pytest.importorskip("wandb")
    out = tmp / "trainer"
    _finished(_writer(tmp, out, "wb", 5)[0])  # the real wandb, offline
    return out / "wandb", [], "math-rl", "wb", "critic/score/mean", list(range(5))


def _pipelinerl(tmp: Path) -> tuple[Path, list[str], str, str, str, list[int]]:
    exp = make_exp(tmp)
    for s in STEPS:
        append(log_path(exp), trainer_line(s, T0 + 60 * s, reward=s / 10))
    return exp, ["--gpus", "4"], "fmt", "pipelinerl", "reward", STEPS  # posted as reward


IMPORT_SAMPLES = {"verl": Sample(_verl), "prime-rl": Sample(_prime_rl),
                  "jsonl": Sample(_jsonl), "tensorboard": Sample(_tensorboard),
                  "mlflow": Sample(_mlflow), "wandb": Sample(_wandb_export)}
FOLLOW_SAMPLES = {"verl": Sample(_verl), "prime-rl": Sample(_prime_rl),
                  "jsonl": Sample(_jsonl), "tensorboard": Sample(_tensorboard),
                  "wandb": Sample(_wandb_logs), "pipelinerl": Sample(_pipelinerl)}


def test_every_format_has_a_sample() -> None:
    assert sorted(IMPORT_SAMPLES) == sorted(import_formats())
    assert sorted(FOLLOW_SAMPLES) == sorted(follow_formats())


def _steps(server: LiveServer, project: str, name: str, metric: str) -> list[int]:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
        run = next((r for r in runs if r["name"] == name), None)
        if run is None:
            return []
        pts = api.get(f"/api/v1/runs/{run['id']}/points", params={"metric": metric}).json()
    return [p["step"] for p in pts.get("points", [])]


def _named(project: str, name: str, fmt: str) -> list[str]:
    # W&B transaction logs name their own runs (project and name from the W&B run).
    return [] if fmt == "wandb" and project == "math-rl" else ["--project", project,
                                                                "--name", name]


@pytest.mark.parametrize("fmt", import_formats())
def test_import_each_format(fmt: str, live_server: LiveServer, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3 keeps ./mlruns opt-in
    path, extra, project, name, metric, steps = IMPORT_SAMPLES[fmt].write(tmp_path)
    code = cli_main(["import", fmt, str(path), *_named(project, name, fmt), *extra,
                     "--url", live_server.url, "--home", str(tmp_path / "h"), "--no-progress"])
    assert code == 0
    assert _steps(live_server, project, name, metric) == steps


@pytest.mark.parametrize("fmt", follow_formats())
def test_follow_each_format(fmt: str, live_server: LiveServer, tmp_path: Path) -> None:
    path, extra, project, name, metric, steps = FOLLOW_SAMPLES[fmt].write(tmp_path)
    follower = subprocess.Popen(
        [sys.executable, "-m", "trainer_client.cli", "follow", fmt, str(path),
         *_named(project, name, fmt), *extra, "--url", live_server.url,
         "--home", str(tmp_path / "h"), "--poll-interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: _steps(live_server, project, name, metric) == steps, timeout=120)
    finally:
        follower.send_signal(signal.SIGTERM)
        log, _ = follower.communicate(timeout=120)
    assert follower.returncode == 0, log
    assert "Traceback" not in log, log
