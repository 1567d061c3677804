"""`value_range=` in the client: `init(..., value_range=(0, 100))` is checked at the call site
and creates the run with that fit setting, so a metric logged in percent is fitted on its own
scale from its first fit (live server, SQLite)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.live_server import LiveServer
from tests.support.polling import wait_for
from trainer_client import init
from trainer_client.validation import check_value_range


def test_check_value_range_refuses_what_the_server_would() -> None:
    assert check_value_range((0, 100)) == [0.0, 100.0]
    assert check_value_range([-1.0, 1.0]) == [-1.0, 1.0]
    for bad in ("01", 5, None, (1,), (0, 1, 2), ("a", 1), ("0", "1"), (True, 2)):
        with pytest.raises(TypeError, match="value_range must be two numbers"):
            check_value_range(bad)
    for bad in ((1, 1), (2, 1), (0, math.inf), (math.nan, 1), (0, 10**400)):
        with pytest.raises(ValueError, match="low < high"):
            check_value_range(bad)
    with pytest.raises(ValueError, match="value_range"):
        init("p", "r", value_range=(100, 0), mode="offline")


def test_a_percentage_run_is_created_with_its_range(live_server: LiveServer,
                                                   tmp_path: Path) -> None:
    a, b, c_mid, r0 = 61.0, 1.9, 2500.0, 30.0
    with init("pct", "r", url=live_server.url, home=tmp_path / "home",
              value_range=(0, 100), target_compute=16000) as run:
        for step in range(1, 81):
            c = 100.0 * step
            y = r0 + (a - r0) / (1.0 + (c_mid / c) ** b) + 0.6 * math.sin(1.7 * step)
            run.log({"val_pass_rate": y}, step=step, compute=c)
    with live_server.client() as api:
        rid = api.get("/api/v1/runs", params={"project": "pct"}).json()["runs"][0]["id"]
        assert api.get(f"/api/v1/runs/{rid}").json()["fit_settings"] == {
            "value_range": [0.0, 100.0]}
        fit = wait_for(lambda: ((f := api.get(f"/api/v1/runs/{rid}/fit").json())["fit_id"]
                                and f["n_points"] == 80 and f))
        assert fit["status"] == "ok", fit["withheld"]
        lo, hi = fit["ci"]["A"]
        assert lo <= a <= hi


def test_a_range_the_fit_cannot_scale_to_is_refused_at_init() -> None:
    for bad in ((0, 1e-6), (0, 1e300), (1e13, 1e13 + 10)):
        with pytest.raises(ValueError, match="rescale the metric"):
            check_value_range(bad)
