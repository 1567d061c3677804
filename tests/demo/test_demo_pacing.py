"""The demo's default pace: fits within 30 s (the burst), trainers live for 15+ minutes, the
data-mix alert within a few minutes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from scalewatch.server.config import load_settings
from scalewatch.server.demo.presets import PRESETS, demo_runs
from scalewatch.server.demo.runner import DROP_LEAD_EVALS, demo_bursts
from scalewatch.server.demo.simulator import burst_chunk, generate

MIN_LIVE_SECONDS = 15 * 60


def _sims() -> list[SimpleNamespace]:
    return [
        SimpleNamespace(recipe=PRESETS[r.key], traj=generate(PRESETS[r.key], r.seed), next_chunk=0)
        for r in demo_runs()
    ]


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    for var in ("SCALEWATCH_DEMO_SPEED", "SCALEWATCH_DEMO_BURST"):
        monkeypatch.delenv(var, raising=False)
    return load_settings()


def test_every_demo_trainer_stays_live_for_15_minutes_at_the_default_speed(settings) -> None:  # noqa: ANN001
    sims = _sims()
    bursts = demo_bursts(sims, settings.demo_burst)  # type: ignore[arg-type]
    for sim, burst in zip(sims, bursts, strict=True):
        remaining = sim.traj.n_chunks - burst_chunk(sim, burst)  # type: ignore[arg-type]
        live = remaining / settings.demo_speed
        assert live >= MIN_LIVE_SECONDS, (sim.recipe.key, live)
        # ... and it moves: a new evaluation at least every 30 s.
        assert 1 / settings.demo_speed <= 30
    # The burst gives every run a fit in the first seconds (enough evaluations to fit).
    assert all(burst_chunk(s, settings.demo_burst) >= 20 for s in sims)  # type: ignore[arg-type]


def test_the_data_mix_change_comes_within_minutes(settings) -> None:  # noqa: ANN001
    sims = _sims()
    [drop] = [s for s in sims if s.recipe.drop is not None]
    bursts = demo_bursts(sims, settings.demo_burst)  # type: ignore[arg-type]
    start = burst_chunk(drop, bursts[sims.index(drop)])  # type: ignore[arg-type]
    change = int(np.searchsorted(drop.traj.eval_compute, drop.recipe.drop.at))
    assert 0 < change - start <= DROP_LEAD_EVALS + 1
    # Lead plus a few evaluations for detection: under five minutes at the default pace.
    assert (change - start + 6) / settings.demo_speed < 5 * 60
    # The other runs keep the plain burst.
    assert all(b == settings.demo_burst for s, b in zip(sims, bursts, strict=True) if s is not drop)
