"""Simulated runs, a real webhook receiver on loopback, and polling helpers for alert tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from tests.support import curves
from tests.support.net import LoopbackHTTPServer
from tests.support.polling import wait_for

R0, B, C_MID = 0.10, 1.92, 2542.0
EVALS, C_MAX = 200, 20000.0  # an evaluation every 100 steps, 100 GPU-h apart


def sigmoid(c: Any, A: float) -> np.ndarray:
    return curves.sigmoid(c, A, B, C_MID, R0)


def ar1(n: int, seed: int) -> np.ndarray:
    return curves.ar1_noise(n, seed, sd=0.01)


def compute_axis() -> np.ndarray:
    return curves.compute_axis(EVALS, C_MAX)


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


def post_and_fit(client: Any, rid: int, c: Any, y: Any, start: int, timeout: float = 60) -> dict:
    """Post evaluations [start, start + len) and wait until the refitter has fitted them all."""
    r = client.post(f"/api/v1/runs/{rid}/points", json={"points": points(c, y, start)})
    assert r.status_code == 200, r.text
    want = start + len(c)

    def fitted() -> dict | None:
        fit = client.get(f"/api/v1/runs/{rid}/fit").json()
        return fit if fit.get("fit_id") and fit["n_points"] >= want else None

    return wait_for(fitted, timeout)


class Receiver(LoopbackHTTPServer):
    """A webhook endpoint on loopback: records every request; fails the first `fail_first`."""

    def __init__(self, fail_first: int = 0, status: int = 503) -> None:
        super().__init__()
        self.fail_first = fail_first
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"{self.base_url}/hook"

    def handler(self) -> type[BaseHTTPRequestHandler]:
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

        return Handler

    def delivered(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["status"] == 200]
