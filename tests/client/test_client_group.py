"""`group=` in the client: `init(..., group=...)` validates at the call site and registers the
run in its group; `scalewatch import ... --group` does the same (live server, SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from trainer_client import init
from trainer_client.cli import main as cli_main
from trainer_client.validation import check_group


def test_check_group_refuses_what_the_server_would() -> None:
    assert check_group("cispo-768") == "cispo-768"
    with pytest.raises(TypeError, match="group must be a string"):
        check_group(768)
    for bad in ("", "   ", "x" * 101, "a\x00b"):
        with pytest.raises(ValueError, match="group must be"):
            check_group(bad)
    with pytest.raises(ValueError, match="group must be"):
        init("p", "r", group="", mode="offline")


def test_init_and_import_register_the_group(live_server: LiveServer, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with init("recipes", "seed0", url=live_server.url, home=home, group="cispo-768") as run:
        for step in range(1, 6):
            run.log({"val_pass_rate": step / 10}, step=step, compute=float(step))
    out = tmp_path / "outputs" / "run"
    out.mkdir(parents=True)
    rows = [{"step": s, "eval/gsm8k/default/agent/avg@4": s / 20} for s in range(1, 6)]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = cli_main(["import", "prime-rl", str(tmp_path / "outputs"), "--project", "recipes",
                     "--name", "seed1", "--group", "cispo-768", "--url", live_server.url,
                     "--home", str(tmp_path / "h"), "--no-progress"])
    assert code == 0
    with live_server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": "recipes"}).json()["runs"]
        assert {r["name"]: r["group"] for r in runs} == {"seed0": "cispo-768",
                                                        "seed1": "cispo-768"}
        groups = api.get("/api/v1/groups", params={"project": "recipes"}).json()["groups"]
        assert [(g["name"], g["n_runs"]) for g in groups] == [("cispo-768", 2)]
