"""The real `mlflow` client against a real scalewatch server (auth on), doing what the trainers'
MLflow loggers do: verl's `Tracking`, Hugging Face's `MLflowCallback` (asynchronous logging),
NeMo-RL's and SkyRL's loggers. Each trainer runs in its own process, configured only by the
environment variables its users set, as in production."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from tests.support.databases import migrated_sqlite
from tests.support.live_server import LiveServer

pytest.importorskip("mlflow")
pytestmark = pytest.mark.slow

STEPS = 30

# What each framework's logger calls, in its order (see ../shared/notes/ingestion.md).
TRAINERS = {
    # verl/utils/tracking.py: set_experiment(project), start_run(run_name=experiment),
    # log_params(flattened config), log_metrics(cleaned keys, step=) per step.
    "verl": """
        import mlflow
        mlflow.set_experiment("math-rl")
        mlflow.start_run(run_name="verl-grpo")
        mlflow.log_params({f"actor.p{i}": i for i in range(150)})  # 100 + 50 on the wire
        for step in range(1, STEPS + 1):
            mlflow.log_metrics({"val-core/gsm8k/acc/mean_at_1": 0.2 + step / 100,
                                "critic/score/mean": step / 50,
                                "perf/total_num_tokens": 1000.0}, step=step)
        mlflow.end_run()
    """,
    # transformers' MLflowCallback: MLFLOW_EXPERIMENT_NAME, log_params in batches of 100,
    # log_metrics(synchronous=False) on every on_log, end_run at train end.
    "hf": """
        import mlflow
        mlflow.set_experiment(os.environ["MLFLOW_EXPERIMENT_NAME"])
        mlflow.start_run(run_name="trl-grpo")
        params = {f"learning_rate_{i}": 1e-6 for i in range(120)}
        items = list(params.items())
        for i in range(0, len(items), 100):
            mlflow.log_params(dict(items[i:i + 100]), synchronous=False)
        for step in range(1, STEPS + 1):
            mlflow.log_metrics({"reward": step / 40, "eval_reward": step / 30},
                               step=step, synchronous=False)
        mlflow.end_run()
    """,
    # NeMo-RL (nemo_rl/utils/logger.py) and SkyRL (skyrl/train/utils/tracking.py): tracking
    # URI set in code, experiment, run, log_metrics(step=) -- here with async logging on.
    "nemo_skyrl": """
        import mlflow
        mlflow.set_tracking_uri(os.environ["SW_URI"])
        mlflow.set_experiment("nemo-rl")
        with mlflow.start_run(run_name="grpo-llama"):
            mlflow.log_params({"policy.model_name": "llama", "grpo.num_generations": 8})
            for step in range(1, STEPS + 1):
                mlflow.log_metrics({"validation/accuracy": 0.3 + step / 200,
                                    "train/reward": step / 60}, step=step)
    """,
    # Artifacts: configs and files (log_artifact / log_text / log_dict / log_artifacts, as
    # HF's MLflowCallback does with HF_MLFLOW_LOG_ARTIFACTS), one of them larger than the API's
    # request body cap, between metric logs: the trainer keeps running and logging.
    "artifacts": """
        import mlflow, pathlib, tempfile
        mlflow.set_experiment("artifacts")
        with mlflow.start_run(run_name="ckpt") as run:
            d = pathlib.Path(tempfile.mkdtemp())
            (d / "config.yaml").write_text("lr: 1e-6\\n")
            ckpt = d / "ckpt"
            ckpt.mkdir()
            with open(ckpt / "model.bin", "wb") as f:
                f.truncate(int(os.environ["SW_CKPT_BYTES"]))
            (ckpt / "notes.txt").write_text("step 1")
            for step in range(1, STEPS + 1):
                mlflow.log_metrics({"eval_reward": step / 30}, step=step)
                if step == 1:
                    mlflow.log_artifact(str(d / "config.yaml"))
                    mlflow.log_text("hello", "notes/hello.txt")
                    mlflow.log_dict({"a": 1}, "config/run.json")
                if step == STEPS // 2:
                    mlflow.log_artifacts(str(ckpt), artifact_path="checkpoint-15")
            print("URI", run.info.artifact_uri)
            print("LISTED", len(mlflow.MlflowClient().list_artifacts(run.info.run_id)))
    """,
    # A metric key as long as MLflow allows (250 characters), logged asynchronously with short
    # ones (a refused batch lost them all); then the run is resumed under a new run_name
    # (start_run(run_id=..., run_name=...) sends it with runs/update) and renamed again.
    "long_keys": """
        import mlflow
        mlflow.set_tracking_uri(os.environ["SW_URI"])
        mlflow.set_experiment("long-keys")
        long = ("eval/" + "x" * 300)[:250]
        with mlflow.start_run(run_name="keys") as run:
            for step in range(1, STEPS + 1):
                mlflow.log_metrics({long: step / 100, "reward": step / 50}, step=step,
                                   synchronous=False)
        with mlflow.start_run(run_id=run.info.run_id, run_name="keys-resumed"):
            mlflow.log_metric("reward", 1.0, step=STEPS + 1)
            print("RESUMED", mlflow.active_run().info.run_name)
        mlflow.MlflowClient().update_run(run.info.run_id, name="keys-final")
    """,
}


def _script(body: str) -> str:
    tail = "print('RUN', mlflow.last_active_run().info.run_id)"
    return f"import os\nSTEPS = {STEPS}\n{textwrap.dedent(body)}\n{tail}\n"


def _run_trainer(name: str, env: dict[str, str], python: str = sys.executable
                 ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    full.update(env)
    return subprocess.run(
        [python, "-c", _script(TRAINERS[name])],
        env=full, capture_output=True, text=True, timeout=300,
    )


# Trainers pin their own mlflow: the 2.x line is still common (verl's and NeMo-RL's images).
MLFLOW_2 = "mlflow-skinny>=2.8,<3"


@pytest.fixture(scope="module")
def mlflow2_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter with the 2.x mlflow client, in a venv of its own (the dev environment
    has 3.x; the two cannot share one)."""
    venv = tmp_path_factory.mktemp("mlflow2") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    done = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", MLFLOW_2],
        capture_output=True, text=True, timeout=900,
    )
    if done.returncode != 0:
        why = f"cannot install {MLFLOW_2}: {done.stderr[-1500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)  # in CI the package index is there: a skip would hide a break
        pytest.skip(why)
    return py


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("mlflow")
    s = LiveServer(migrated_sqlite(tmp), auth=True, home=tmp / "home")
    s.start()
    yield s
    s.stop()


def _env_for(name: str, server: LiveServer, token: str) -> dict[str, str]:
    env = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    if name == "verl":
        env |= {"MLFLOW_TRACKING_URI": server.url, "MLFLOW_TRACKING_TOKEN": token}
    elif name == "hf":
        env |= {
            "MLFLOW_TRACKING_URI": server.url,
            "MLFLOW_EXPERIMENT_NAME": "trl",
            "MLFLOW_TRACKING_USERNAME": "anyone",  # basic auth: the password is the token
            "MLFLOW_TRACKING_PASSWORD": token,
        }
    else:
        env |= {"SW_URI": server.url, "MLFLOW_TRACKING_TOKEN": token,
                "MLFLOW_ENABLE_ASYNC_LOGGING": "true"}
    return env


@pytest.mark.parametrize(
    ("trainer", "project", "run_name", "metric", "fit_metric"),
    [
        ("verl", "math-rl", "verl-grpo", "val-core/gsm8k/acc/mean_at_1",
         "val-core/gsm8k/acc/mean_at_1"),
        ("hf", "trl", "trl-grpo", "eval_reward", "eval_reward"),
        ("nemo_skyrl", "nemo-rl", "grpo-llama", "validation/accuracy", "validation/accuracy"),
    ],
)
def test_trainer_logs_every_step_once_and_finishes(
    server: LiveServer, trainer: str, project: str, run_name: str, metric: str, fit_metric: str
) -> None:
    token = server.make_token("write")
    done = _run_trainer(trainer, _env_for(trainer, server, token))
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = done.stdout.split("RUN", 1)[1].split()[0]
    _check_run(server, trainer, run_id, project, run_name, metric, fit_metric)


@pytest.mark.parametrize(
    ("trainer", "project", "run_name", "metric", "fit_metric"),
    [
        ("verl", "math-rl", "verl-grpo", "val-core/gsm8k/acc/mean_at_1",
         "val-core/gsm8k/acc/mean_at_1"),
        ("hf", "trl", "trl-grpo", "eval_reward", "eval_reward"),
    ],
)
def test_mlflow_2x_client_logs_every_step_once_and_finishes(
    server: LiveServer, mlflow2_python: str, trainer: str, project: str, run_name: str,
    metric: str, fit_metric: str,
) -> None:
    version = subprocess.run([mlflow2_python, "-c", "import mlflow; print(mlflow.__version__)"],
                             capture_output=True, text=True, timeout=120).stdout.strip()
    assert version.startswith("2."), version
    done = _run_trainer(trainer, _env_for(trainer, server, server.make_token("write")),
                        python=mlflow2_python)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = done.stdout.split("RUN", 1)[1].split()[0]
    _check_run(server, trainer, run_id, project, run_name, metric, fit_metric)
    with server.client() as api:
        bad = _run_trainer(trainer, _env_for(trainer, server, "sw_not_a_token"),
                           python=mlflow2_python)
        assert bad.returncode != 0
        assert "401" in bad.stderr or "UNAUTHENTICATED" in bad.stderr, bad.stderr[-2000:]
        assert api.get(f"/api/v1/runs/{run_id}").json()["status"] == "finished"


def _check_run(server: LiveServer, trainer: str, run_id: str, project: str, run_name: str,
               metric: str, fit_metric: str) -> None:
    """Every step exactly once, the run finished, and MlflowClient reads it back."""
    with server.client() as api:
        run = api.get(f"/api/v1/runs/{run_id}").json()
        assert (run["project"], run["status"]) == (project, "finished")
        # A second MLflow run of the same name is a new run, named "NAME (2)".
        assert run["name"] in (run_name, f"{run_name} (2)")
        assert run["compute_unit"] == "steps"
        assert run["fit_metric"] == fit_metric
        points = api.get(f"/api/v1/runs/{run_id}/points", params={"metric": metric}).json()
        assert [p["step"] for p in points["points"]] == list(range(1, STEPS + 1))
        assert [p["compute"] for p in points["points"]] == [float(s) for s in range(1, STEPS + 1)]
    if trainer == "verl":
        assert len(run["config"]) == 150
        assert run["config"]["actor.p149"] == "149"

    # MlflowClient reads it back (metrics/get-history, runs/get) with a read token.
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_TRACKING_TOKEN"] = server.make_token("read")
    try:
        client = MlflowClient(tracking_uri=server.url)
        history = client.get_metric_history(run_id, metric)
        assert sorted(m.step for m in history) == list(range(1, STEPS + 1))
        got = client.get_run(run_id)
        assert got.info.status == "FINISHED"
        assert got.info.run_name == run["name"]
    finally:
        del os.environ["MLFLOW_TRACKING_TOKEN"]


def test_bad_token_is_refused(server: LiveServer) -> None:
    with server.client() as api:
        before = api.get("/api/v1/runs").json()["total"]
        done = _run_trainer("verl", _env_for("verl", server, "sw_not_a_token"))
        assert done.returncode != 0
        assert "UNAUTHENTICATED" in done.stderr or "401" in done.stderr, done.stderr[-2000:]
        assert api.get("/api/v1/runs").json()["total"] == before


def test_read_token_cannot_log(server: LiveServer) -> None:
    done = _run_trainer("verl", _env_for("verl", server, server.make_token("read")))
    assert done.returncode != 0
    assert "PERMISSION_DENIED" in done.stderr or "403" in done.stderr, done.stderr[-2000:]


def test_a_project_scoped_token_logs_to_its_experiment_only(server: LiveServer) -> None:
    """Issue 35: the real client with a token limited to project "math-rl" logs verl's run
    there; NeMo-RL's experiment "nemo-rl" is refused (PERMISSION_DENIED) and nothing of it is
    stored."""
    with server.client() as api:
        made = api.post("/api/v1/tokens", json={"name": "team-math", "scope": "write",
                                                "projects": ["math-rl"]})
        assert made.status_code == 201, made.text
        token = made.json()["token"]
        before = api.get("/api/v1/runs", params={"project": "nemo-rl"}).json()["total"]
    done = _run_trainer("verl", _env_for("verl", server, token))
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = done.stdout.split("RUN", 1)[1].split()[0]
    refused = _run_trainer("nemo_skyrl", _env_for("nemo_skyrl", server, token))
    assert refused.returncode != 0
    assert "PERMISSION_DENIED" in refused.stderr or "403" in refused.stderr, refused.stderr[-2000:]
    with server.client() as api:
        assert api.get(f"/api/v1/runs/{run_id}").json()["project"] == "math-rl"
        assert api.get("/api/v1/runs", params={"project": "nemo-rl"}).json()["total"] == before


def _artifact_env(server: LiveServer) -> dict[str, str]:
    from scalewatch.server import limits

    return {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_TRACKING_URI": server.url,
            "MLFLOW_TRACKING_TOKEN": server.make_token("write"),
            # Larger than any API request body: artifact uploads are not held to that cap.
            "SW_CKPT_BYTES": str(limits.MAX_BODY_BYTES + 1024 * 1024),
            # Multipart uploads on, for files from 1 MB: the client asks, hears "not
            # supported" and falls back to a single PUT.
            "MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD": "true",
            "MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE": str(1024 * 1024)}


def _check_artifact_run(server: LiveServer, done: subprocess.CompletedProcess[str]) -> None:
    """The trainer logged artifacts (a file larger than the body cap too) and ran to the end:
    every metric step stored, the run finished; the artifacts were accepted and discarded."""
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mlflow-artifacts:/" in done.stdout.split("URI", 1)[1].split()[0]
    assert done.stdout.split("LISTED", 1)[1].split()[0] == "0"  # discarded, as documented
    run_id = done.stdout.split("RUN", 1)[1].split()[0]
    with server.client() as api:
        run = api.get(f"/api/v1/runs/{run_id}").json()
        assert (run["project"], run["status"]) == ("artifacts", "finished")
        points = api.get(f"/api/v1/runs/{run_id}/points", params={"metric": "eval_reward"})
        assert [p["step"] for p in points.json()["points"]] == list(range(1, STEPS + 1))


def test_logging_artifacts_does_not_stop_the_trainer(server: LiveServer) -> None:
    _check_artifact_run(server, _run_trainer("artifacts", _artifact_env(server)))


def test_logging_artifacts_with_the_2x_client(server: LiveServer, mlflow2_python: str) -> None:
    _check_artifact_run(
        server, _run_trainer("artifacts", _artifact_env(server), python=mlflow2_python)
    )


def test_a_250_character_key_logged_async_and_run_name_updates(server: LiveServer) -> None:
    """The real client: every point of a 250-character key and of the short keys logged with it
    is stored; a resume with a run_name and `MlflowClient.update_run(name=...)` rename the run."""
    done = _run_trainer("long_keys", _env_for("long_keys", server, server.make_token("write")))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("RESUMED", 1)[1].split()[0] == "keys-resumed"
    run_id = done.stdout.split("RUN", 1)[1].split()[0]
    long = ("eval/" + "x" * 300)[:250]
    with server.client() as api:
        run = api.get(f"/api/v1/runs/{run_id}").json()
        assert (run["project"], run["name"], run["status"]) == ("long-keys", "keys-final",
                                                                 "finished")
        for metric, steps in ((long, STEPS), ("reward", STEPS + 1)):
            got = api.get(f"/api/v1/runs/{run_id}/points", params={"metric": metric}).json()
            assert [p["step"] for p in got["points"]] == list(range(1, steps + 1)), metric
