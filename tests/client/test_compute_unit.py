"""Compute that is what it says (issue 36, item 3): a run logging ``flops()`` counts FLOPs and
one logging a ComputeMeter GPU-hours without being told; plain numbers are GPU-hours unless
``compute_unit`` says otherwise; one run's compute has one unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trainer_client as sw
from tests.support.live_server import LiveServer
from trainer_client.sync import replay_spools


def _unit(server: LiveServer, project: str, name: str) -> str:
    with server.client() as api:
        runs = api.get("/api/v1/runs", params={"project": project}).json()["runs"]
    return next(r for r in runs if r["name"] == name)["compute_unit"]


def test_flops_and_meters_carry_their_unit() -> None:
    f = sw.flops(trained_tokens=1e6, generated_tokens=2e6, params=7e9)
    assert isinstance(f, sw.Flops) and isinstance(f, float)
    assert f.unit == "flops" and float(f) == 6 * 7e9 * 1e6 + 2 * 7e9 * 2e6
    assert type(f * 2) is float  # arithmetic gives plain numbers: their unit is not known
    assert sw.ComputeMeter(gpus=8, start=False).unit == "gpu_hours"


def test_the_run_takes_its_unit_from_the_compute(live_server: LiveServer,
                                                 tmp_path: Path) -> None:
    home = tmp_path / "h"
    with sw.init("units", "flops", url=live_server.url, home=home) as run:
        assert run.compute_unit is None  # decided by the first log()
        for step in range(1, 4):
            run.log({"acc": step / 10}, step=step,
                    compute=sw.flops(trained_tokens=1e6 * step, params=1e9))
        assert run.compute_unit == "flops"
        run.log({"acc": 0.5}, step=4, compute=1e16)  # a plain number: in the run's unit
        with pytest.raises(ValueError, match="gpu_hours.*counts compute in flops"):
            run.log({"acc": 0.6}, step=5, compute=sw.ComputeMeter(gpus=8))
    assert _unit(live_server, "units", "flops") == "flops"

    meter = sw.ComputeMeter(gpus=8)
    with sw.init("units", "meter", url=live_server.url, home=home, meter=meter) as run:
        assert run.compute_unit == "gpu_hours"
        run.log({"acc": 0.1}, step=1)
        with pytest.raises(ValueError, match="flops"):
            run.log({"acc": 0.2}, step=2, compute=sw.flops(trained_tokens=1, params=1))
    assert _unit(live_server, "units", "meter") == "gpu_hours"

    with sw.init("units", "plain", url=live_server.url, home=home) as run:
        run.log({"acc": 0.1}, step=1, compute=12.5)
        assert run.compute_unit == "gpu_hours"  # the default for plain numbers
        with pytest.raises(ValueError, match="init\\(compute_unit=...\\)"):
            run.log({"acc": 0.2}, step=2, compute=sw.flops(trained_tokens=1, params=1))
    assert _unit(live_server, "units", "plain") == "gpu_hours"


def test_an_explicit_unit_is_kept_and_checked(live_server: LiveServer, tmp_path: Path) -> None:
    home = tmp_path / "h"
    with sw.init("units", "tokens", url=live_server.url, home=home,
                 compute_unit="tokens") as run:
        run.log({"acc": 0.1}, step=1, compute=1000.0)
        with pytest.raises(ValueError, match="compute_unit"):
            run.log({"acc": 0.2}, step=2, compute=sw.flops(trained_tokens=1, params=1))
    assert _unit(live_server, "units", "tokens") == "tokens"
    with pytest.raises(ValueError, match="meter counts gpu_hours"):
        sw.init("units", "bad", url=live_server.url, home=home, compute_unit="flops",
                meter=sw.ComputeMeter(gpus=1))
    with pytest.raises(ValueError, match="compute_unit"):
        sw.init("units", "long", url=live_server.url, home=home, compute_unit="x" * 33)


def test_an_offline_run_spools_its_inferred_unit_for_sync(live_server: LiveServer,
                                                          tmp_path: Path) -> None:
    """run.json (what `scalewatch sync` registers the run from) gets the unit the first
    log() decided, so a run synced later is not registered as GPU-hours."""
    home = tmp_path / "h"
    run = sw.init("units", "offline", mode="offline", home=home)
    run.log({"acc": 0.1}, step=1, compute=sw.flops(trained_tokens=1e6, params=1e9))
    assert run.flush()
    meta = json.loads((Path(run.spool_dir) / "run.json").read_text())
    assert meta["compute_unit"] == "flops"
    run.finish()
    summary = replay_spools(url=live_server.url, home=home)
    assert summary["ok"], summary
    assert _unit(live_server, "units", "offline") == "flops"
