"""Prometheus text metrics: requests, latencies and points ingested (per process)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Refit lag: from a point's arrival to the stored fit that includes it (seconds).
_LAG_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], list[int]] = {}  # counts per bucket
        self.latency_sum: dict[tuple[str, str], float] = defaultdict(float)
        self.points = 0
        self.fits = 0
        self.fit_failures = 0
        self.lag_buckets = [0] * (len(_LAG_BUCKETS) + 1)
        self.lag_sum = 0.0

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            key = (method, route)
            buckets = self.latency.setdefault(key, [0] * (len(_BUCKETS) + 1))
            for i, bound in enumerate(_BUCKETS):
                if seconds <= bound:
                    buckets[i] += 1
            buckets[-1] += 1
            self.latency_sum[key] += seconds

    def points_ingested(self, n: int) -> None:
        with self._lock:
            self.points += n

    def fit_done(self, ok: bool) -> None:
        with self._lock:
            if ok:
                self.fits += 1
            else:
                self.fit_failures += 1

    def refit_lag(self, seconds: float) -> None:
        with self._lock:
            for i, bound in enumerate(_LAG_BUCKETS):
                if seconds <= bound:
                    self.lag_buckets[i] += 1
            self.lag_buckets[-1] += 1
            self.lag_sum += max(seconds, 0.0)

    def render(self, ingest_groups: tuple[int, int] | None = None) -> str:
        """The text exposition; `ingest_groups`: (groups, batches) written by the store's group
        commit, whose ratio is how many batches shared a transaction."""
        lines = [
            "# HELP scalewatch_requests_total HTTP requests by method, route and status.",
            "# TYPE scalewatch_requests_total counter",
        ]
        with self._lock:
            for (method, route, status), n in sorted(self.requests.items()):
                lines.append(
                    f'scalewatch_requests_total{{method="{method}",route="{route}",'
                    f'status="{status}"}} {n}'
                )
            lines += [
                "# HELP scalewatch_request_seconds Request latency.",
                "# TYPE scalewatch_request_seconds histogram",
            ]
            for (method, route), buckets in sorted(self.latency.items()):
                labels = f'method="{method}",route="{route}"'
                for bound, n in zip(_BUCKETS, buckets, strict=False):
                    lines.append(f'scalewatch_request_seconds_bucket{{{labels},le="{bound}"}} {n}')
                lines.append(
                    f'scalewatch_request_seconds_bucket{{{labels},le="+Inf"}} {buckets[-1]}'
                )
                lines.append(
                    f"scalewatch_request_seconds_sum{{{labels}}} "
                    f"{self.latency_sum[(method, route)]:.6f}"
                )
                lines.append(f"scalewatch_request_seconds_count{{{labels}}} {buckets[-1]}")
            lines += [
                "# HELP scalewatch_points_ingested_total Metric values accepted by ingestion.",
                "# TYPE scalewatch_points_ingested_total counter",
                f"scalewatch_points_ingested_total {self.points}",
                "# HELP scalewatch_fits_total Curve fits stored by the refitter.",
                "# TYPE scalewatch_fits_total counter",
                f"scalewatch_fits_total {self.fits}",
                "# HELP scalewatch_fit_failures_total Refits that raised.",
                "# TYPE scalewatch_fit_failures_total counter",
                f"scalewatch_fit_failures_total {self.fit_failures}",
                "# HELP scalewatch_refit_lag_seconds From a point's arrival to the stored fit "
                "that includes it (fits of this process's refitter).",
                "# TYPE scalewatch_refit_lag_seconds histogram",
            ]
            for bound, n in zip(_LAG_BUCKETS, self.lag_buckets, strict=False):
                lines.append(f'scalewatch_refit_lag_seconds_bucket{{le="{bound}"}} {n}')
            lines += [
                f'scalewatch_refit_lag_seconds_bucket{{le="+Inf"}} {self.lag_buckets[-1]}',
                f"scalewatch_refit_lag_seconds_sum {self.lag_sum:.3f}",
                f"scalewatch_refit_lag_seconds_count {self.lag_buckets[-1]}",
            ]
        if ingest_groups is not None:
            lines += [
                "# HELP scalewatch_ingest_groups_total Ingest transactions (batches waiting "
                "meanwhile are written together).",
                "# TYPE scalewatch_ingest_groups_total counter",
                f"scalewatch_ingest_groups_total {ingest_groups[0]}",
                "# HELP scalewatch_ingest_group_batches_total Batches those transactions wrote.",
                "# TYPE scalewatch_ingest_group_batches_total counter",
                f"scalewatch_ingest_group_batches_total {ingest_groups[1]}",
            ]
        return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """Times every request; labels by route template so ids don't explode label cardinality."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None)
            if path is None:
                path = "/dashboard" if scope["path"].startswith("/dashboard") else "other"
            self.metrics.observe(scope["method"], path, status, time.perf_counter() - start)
