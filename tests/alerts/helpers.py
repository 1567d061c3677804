"""Simulated runs, a real webhook receiver on loopback, and polling helpers for alert tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

R0, B, C_MID = 0.10, 1.92, 2542.0
EVALS, C_MAX = 200, 20000.0  # an evaluation every 100 steps, 100 GPU-h apart


def sigmoid(c: Any, A: float, b: float = B, c_mid: float = C_MID) -> np.ndarray:
    return R0 + (A - R0) / (1 + (c_mid / np.asarray(c, dtype=float)) ** b)


def ar1(n: int, seed: int, sd: float = 0.01, phi: float = 0.5) -> np.ndarray:
    """Serially correlated evaluation noise (what real eval curves show)."""
    rng = np.random.default_rng(seed)
    noise = np.zeros(n)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + rng.normal(0, sd)
    return noise


def compute_axis(n: int = EVALS, c_max: float = C_MAX) -> np.ndarray:
    return np.linspace(c_max / n, c_max, n)


def stable_run(seed: int, A: float = 0.61) -> tuple[np.ndarray, np.ndarray]:
    c = compute_axis()
    return c, sigmoid(c, A) + ar1(c.size, seed)


def dropping_run(seed: int, switch: float, A2: float = 0.50) -> tuple[np.ndarray, np.ndarray]:
    """A = 0.61 until `switch`, then the worse sigmoid (A = A2) takes over continuously: the
    gap to the old curve at the switch decays as (switch / C)^B, so the metric sags to A2."""
    c = compute_axis()
    good, bad = sigmoid(c, 0.61), sigmoid(c, A2)
    gap = float(sigmoid(switch, 0.61) - sigmoid(switch, A2))
    y = np.where(c < switch, good, bad + gap * (switch / c) ** B)
    return c, y + ar1(c.size, seed)


def collapsing_run(seed: int, peak_at: float = 9000.0) -> tuple[np.ndarray, np.ndarray]:
    """Rises like a healthy run, then collapses (GRPO without clipping)."""
    c = compute_axis()
    y = sigmoid(c, 0.61) - np.where(c > peak_at, 0.4 * (1 - np.exp(-(c - peak_at) / 1500)), 0)
    return c, y + ar1(c.size, seed)


def points(c: Any, y: Any, start: int, metric: str = "val_pass_rate") -> list[dict]:
    return [
        {"step": (start + i + 1) * 100, "compute": float(ci), "metrics": {metric: float(yi)}}
        for i, (ci, yi) in enumerate(zip(c, y, strict=True))
    ]


def wait_for(predicate: Any, timeout: float = 60.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def post_and_fit(client: Any, rid: int, c: Any, y: Any, start: int, timeout: float = 60) -> dict:
    """Post evaluations [start, start + len) and wait until the refitter has fitted them all."""
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": points(c, y, start)})
    assert r.status_code == 200, r.text
    want = start + len(c)

    def fitted() -> dict | None:
        fit = client.get(f"/api/v1/runs/{rid}/fit").json()
        return fit if fit.get("fit_id") and fit["n_points"] >= want else None

    return wait_for(fitted, timeout)


class Receiver:
    """A webhook endpoint on loopback: records every request; fails the first `fail_first`."""

    def __init__(self, fail_first: int = 0, status: int = 503) -> None:
        self.fail_first = fail_first
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    fail = len(outer.requests) < outer.fail_first
                    code = outer.status if fail else 200
                    outer.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": body,
                            "json": json.loads(body),
                            "status": code,
                        }
                    )
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def delivered(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["status"] == 200]
