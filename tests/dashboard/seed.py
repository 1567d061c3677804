"""Synthetic runs for dashboard tests, screenshots and demos (through the REST API)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
from fastapi.testclient import TestClient

from scalewatch.server.refit import Refitter
from tests.conftest import make_app
from tests.support.curves import noisy_sigmoid

R0 = 0.30
# Two runs whose curves cross: "fast" rises early to a lower ceiling, "slow" later to a higher
# one, so the predicted winner flips between a small and a large budget.
CROSSING = {
    "fast-lowceiling": {"A": 0.56, "B": 2.4, "C_mid": 1500.0},
    "slow-highceiling": {"A": 0.68, "B": 1.6, "C_mid": 5000.0},
}
SMALL_BUDGET = 3000.0  # fast wins
LARGE_BUDGET = 200000.0  # slow wins


def series(params: dict[str, float], n: int = 80, c_max: float = 8000.0, seed: int = 0) -> tuple:
    """A sigmoid with ``params`` (A, B, C_mid; R0 = 0.30) and AR(1) evaluation noise."""
    return noisy_sigmoid(**params, R0=R0, n=n, c_max=c_max, seed=seed, sd=0.006)


def post_points(
    client: httpx.Client, rid: int, c: Any, y: Any, start: int = 0, metric: str = "val_pass_rate"
) -> None:
    pts = [
        {"step": start + i, "compute": float(ci), "metrics": {metric: float(yi)}}
        for i, (ci, yi) in enumerate(zip(c, y, strict=True))
    ]
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": pts})
    r.raise_for_status()


def post_in_chunks(
    client: httpx.Client, rid: int, c: Any, y: Any, chunks: int = 4, timeout: float = 30.0
) -> None:
    """Post a series in parts, waiting for a new fit after each, so the fit history has steps."""
    edges = np.linspace(0, len(c), chunks + 1).astype(int)
    last = None
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        post_points(client, rid, c[lo:hi], y[lo:hi], start=int(lo))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fit_id = client.get(f"/api/v1/runs/{rid}/fit").json().get("fit_id")
            if fit_id and fit_id != last:
                last = fit_id
                break
            time.sleep(0.2)


def create_run(client: httpx.Client, project: str, name: str, **fields: Any) -> int:
    r = client.post("/api/v1/runs", json={"project": project, "name": name, **fields})
    r.raise_for_status()
    return r.json()["id"]


def seed(client: httpx.Client, project: str = "grpo-scaling") -> dict[str, int]:
    """Five runs: two crossing, one with warm-up and held-out points, one unfitted, one more."""
    ids: dict[str, int] = {}
    # Fires for the low-ceiling run; the webhook points at a closed port so attempts fail.
    client.post(
        "/api/v1/alert-rules",
        json={"project": project, "kind": "asymptote_below", "params": {"threshold": 0.6},
              "webhook_url": "http://127.0.0.1:9/hook"},
    ).raise_for_status()  # fmt: skip
    for k, (name, params) in enumerate(CROSSING.items()):
        rid = create_run(
            client, project, name, target_compute=20000, tags=["sweep", "bs512"],
            config={"lr": 3e-4 * (k + 1), "batch": 512, "loss": "cispo"},
        )  # fmt: skip
        c, y = series(params, seed=k)
        post_points(client, rid, c, y)
        ids[name] = rid
    rid = create_run(
        client, project, "scalerl-heldout", target_compute=16000, tags=["baseline"],
        config={"lr": 1e-4, "batch": 768, "loss": "cispo"},
    )  # fmt: skip
    client.patch(
        f"/api/v1/runs/{rid}", json={"fit_settings": {"warmup": 800.0, "fit_until": 6000.0}}
    ).raise_for_status()
    c, y = series({"A": 0.61, "B": 1.92, "C_mid": 2542.0}, n=100, c_max=10000.0, seed=7)
    post_in_chunks(client, rid, c, y, chunks=5)
    ids["scalerl-heldout"] = rid
    rid = create_run(client, project, "just-started", config={"lr": 2e-4, "batch": 256})
    c, y = series({"A": 0.6, "B": 2.0, "C_mid": 3000.0}, n=3, c_max=300.0, seed=3)
    post_points(client, rid, c, y)
    ids["just-started"] = rid
    rid = create_run(
        client, project, "scout-long", target_compute=40000, tags=["scout"],
        config={"lr": 3e-4, "batch": 2048, "loss": "dapo"},
    )  # fmt: skip
    c, y = series({"A": 0.71, "B": 1.65, "C_mid": 4242.0}, n=120, c_max=12000.0, seed=5)
    post_in_chunks(client, rid, c, y, chunks=6)
    ids["scout-long"] = rid
    return ids


def wait_for_fits(client: httpx.Client, ids: list[int], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        for rid in list(pending):
            fit = client.get(f"/api/v1/runs/{rid}/fit").json()
            if fit.get("fit_id") and fit.get("B") is not None:
                pending.discard(rid)
        time.sleep(0.3)
    if pending:
        raise AssertionError(f"no fit for runs {sorted(pending)} after {timeout}s")


@contextlib.contextmanager
def fitted_client(database_url: str, add_runs: Callable[[Any], list[int]]
                  ) -> Iterator[TestClient]:
    """An in-process app on ``database_url`` whose store ``add_runs`` fills (returning the
    run ids), refitted once; the client carries ``ids`` and Dash's ``deps``."""
    app = make_app(database_url)
    store = app.state.store
    with TestClient(app) as c:
        c.ids = add_runs(store)  # type: ignore[attr-defined]
        Refitter(store).run_once()
        c.deps = c.get("/dashboard/_dash-dependencies").json()  # type: ignore[attr-defined]
        yield c
    store.engine.dispose()
