"""The series bound (limits.MAX_SERIES_PER_RUN) as clients meet it, over real HTTP on both
databases: a follower (`scalewatch follow`'s LineFollower, the trainer client's sender under it)
and the real `mlflow` client.

The server runs in this process (uvicorn in a thread) so the test can lower the limit; the
clients talk to it over loopback exactly as they would to `scalewatch serve`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scalewatch.server import limits
from tests.conftest import make_app
from tests.support.net import free_port
from tests.support.polling import wait_for
from trainer_client import init
from trainer_client.lines import LineFollower

LIMIT = 4


@pytest.fixture
def url(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A server on a loopback port, in this process, with the bound lowered to LIMIT."""
    import uvicorn

    monkeypatch.setattr(limits, "MAX_SERIES_PER_RUN", LIMIT)
    monkeypatch.setenv("SCALEWATCH_FSYNC", "0")
    app = make_app(database_url)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        app.state.store.engine.dispose()


def _run(url: str, project: str, name: str) -> dict | None:
    runs = httpx.get(f"{url}/api/v1/runs", params={"project": project}).json()["runs"]
    return next((r for r in runs if r["name"] == name), None)


def _steps(url: str, run_id: int, metric: str) -> list[int]:
    got = httpx.get(f"{url}/api/v1/runs/{run_id}/points", params={"metric": metric}).json()
    return [p["step"] for p in got["points"]]


@pytest.mark.slow  # the sender's cadence: a batch waits up to 1 s, ~3 s a database
def test_a_follower_batch_past_the_bound_is_rejected_and_following_goes_on(
    url: str, tmp_path: Path
) -> None:
    """The refusal is a 422, which the sender treats as final: the batch goes to the spool's
    rejected/ with the server's reason, and the follower's later lines of the run's own
    metrics are stored (no retry loop, no wedged spool)."""
    log = tmp_path / "train.jsonl"
    run = init("follow", "bounded", url=url, home=tmp_path / "spool", compute_unit="steps")
    follower = LineFollower("jsonl", log, run)

    def line(step: int, names: str) -> None:
        with log.open("a") as out:
            out.write(json.dumps({"step": step, **{n: step / 10 for n in names}}) + "\n")
        follower.poll_once()
        assert run.flush(30)

    line(1, "ab")
    found = wait_for(lambda: _run(url, "follow", "bounded"))
    wait_for(lambda: _steps(url, found["id"], "a") == [1])
    line(2, "abcde")  # c, d, e: 2 + 3 names, past 4
    rejected = run.spool.dir / "rejected"
    reasons = wait_for(lambda: list(rejected.glob("*.reason.txt")))
    reason = reasons[0].read_text("utf-8")
    assert "brings 3 new metric name(s)" in reason and "at most 4" in reason, reason
    line(3, "ab")
    line(4, "abcd")  # two new names: at the limit, taken
    assert run.finish() == 0  # everything else acknowledged
    assert _steps(url, found["id"], "a") == [1, 3, 4]
    assert _steps(url, found["id"], "e") == []
    assert set(_run(url, "follow", "bounded")["latest"]) == set("abcd")
    assert len(reasons) == 1


def test_the_mlflow_client_gets_an_invalid_parameter_value(url: str) -> None:
    """A 400, which the client raises at once (it retries 408, 429 and 5xx, never a 400): the
    trainer sees an MlflowException naming the limit, not a retry loop or a 500."""
    mlflow = pytest.importorskip("mlflow")
    from mlflow.entities import Metric
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    exp = client.create_experiment("bounded")
    run_id = client.create_run(exp, run_name="r").info.run_id

    def metrics(keys: str, step: int) -> list[Metric]:
        return [Metric(k, 0.5, 0, step) for k in keys]

    client.log_batch(run_id, metrics=metrics("abcd", 1))  # at the limit
    client.log_metric(run_id, "a", 0.7, step=2)  # a key the run has
    with pytest.raises(MlflowException) as refused:
        client.log_batch(run_id, metrics=metrics("ax", 3), params=[mlflow.entities.Param("p", "1")])
    assert refused.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "at most 4 distinct metric names" in refused.value.message
    with pytest.raises(MlflowException) as refused:
        client.log_metric(run_id, "y", 0.1, step=3)
    assert refused.value.error_code == "INVALID_PARAMETER_VALUE"
    data = client.get_run(run_id).data
    assert set(data.metrics) == set("abcd") and data.params == {}
    assert [m.step for m in client.get_metric_history(run_id, "a")] == [1, 2]
