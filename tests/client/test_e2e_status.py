"""finish() marks the run finished on the real server; a failing `with` block marks it failed."""

from __future__ import annotations

import httpx
import pytest

import trainer_client as sw


@pytest.mark.timeout(300)
def test_finish_sets_status(live_server, tmp_path, caplog):
    run = sw.init(project="p", name="ok", url=live_server.url, home=tmp_path / "h")
    for s in range(5):
        run.log({"reward": 0.1 * s}, step=s, compute=float(s))
    # A bound, not a wait: finish() returns as soon as the server has acknowledged every
    # point. 30 s ran out once with two copies of the suite loading the 2 cores.
    left = run.finish(timeout=120)
    # When it fails, say why: what the client logged (unreachable, HTTP errors) and the server.
    assert left == 0, f"client: {caplog.text}\nserver: {live_server.logs()}"
    runs = httpx.get(live_server.url + "/api/v1/runs", params={"project": "p"}).json()["runs"]
    assert runs[0]["status"] == "finished" and runs[0]["last_step"] == 4

    crash = sw.init(project="p", name="crash", url=live_server.url, home=tmp_path / "h")
    with pytest.raises(ZeroDivisionError), crash as r2:
        r2.log({"reward": 0.5}, step=0, compute=0.0)
        1 / 0  # noqa: B018
    got = {r["name"]: r["status"] for r in
           httpx.get(live_server.url + "/api/v1/runs", params={"project": "p"}).json()["runs"]}
    assert got == {"ok": "finished", "crash": "failed"}
