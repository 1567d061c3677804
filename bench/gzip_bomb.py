"""A gzip bomb against a real server: how long it takes to refuse, what it costs in memory, and
how long /healthz takes meanwhile.

    .venv/bin/python bench/gzip_bomb.py [--inflated-mb 62] [--baseline PATH]

The bomb (issue 35): `POST /api/v1/runs/{id}/points` with `Content-Encoding: gzip`, a body of
about 200 KB that inflates to ~62 MB of nested brackets inside `{"points": [...]}` (nests of
50 levels: shallow enough for every JSON parser to build them, ~31 million lists in all, as the
issue's 154 KB body did). While it is in flight a second connection polls /healthz every
20 ms, and a sampler reads the server's resident memory (/proc/PID/status) every 5 ms.

Printed per server: time to the refusal and its status, peak RSS growth over the RSS before
the request, /healthz latency (max and median) of the polls that overlapped the bomb's
request, and of the polls in the second before it (the machine's own latency, as a reference).
`--baseline PATH` runs a second source tree (e.g. `git archive <commit> | tar -x -C PATH`) the
same way first, so before and after come from the same run on the same machine. Targets:
refused in < 1 s, RSS growth < 100 MB, /healthz < 100 ms.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import ROOT, Server  # noqa: E402


def make_bomb(inflated_bytes: int, depth: int = 50) -> bytes:
    """gzip of `{"points": [nest, nest, ...]}`, each nest `[[..[]..]]` of `depth` levels."""
    nest = b"[" * depth + b"]" * depth
    count = max(1, inflated_bytes // (len(nest) + 1))
    return gzip.compress(b'{"points": [' + b",".join([nest] * count) + b"]}", compresslevel=9)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    """Polls /healthz and the server's RSS until stopped."""

    def __init__(self, url: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.url, self.pid = url, pid
        self.stop = threading.Event()
        self.peak_kb = 0
        self.health: list[tuple[float, float]] = []  # (started, ms)
        self.health_errors = 0
        self._rss = threading.Thread(target=self._sample_rss, daemon=True)

    def _sample_rss(self) -> None:
        while not self.stop.is_set():
            self.peak_kb = max(self.peak_kb, rss_kb(self.pid))
            time.sleep(0.005)

    def run(self) -> None:
        self._rss.start()
        with httpx.Client(base_url=self.url, timeout=120) as client:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                try:
                    client.get("/healthz").raise_for_status()
                except httpx.HTTPError:
                    self.health_errors += 1
                self.health.append((t0, (time.perf_counter() - t0) * 1e3))
                self.stop.wait(0.02)
        self._rss.join()


def attack(root: Path, bomb: bytes) -> dict:
    home = Path(tempfile.mkdtemp(prefix="sw-bomb-"))
    server = Server(f"sqlite:///{home}/bomb.db", root=root)
    try:
        with httpx.Client(base_url=server.url, timeout=600) as client:
            run_id = client.post("/api/v1/runs", json={"project": "bomb", "name": "r"}).json()["id"]
            for _ in range(20):  # warm: the ingest path and /healthz have run
                client.get("/healthz")
            client.post(
                f"/api/v1/runs/{run_id}/points",
                json={"points": [{"step": 1, "compute": 1.0, "metrics": {"reward": 0.1}}]},
            ).raise_for_status()
            before_kb = rss_kb(server.proc.pid)
            sampler = Sampler(server.url, server.proc.pid)
            sampler.start()
            time.sleep(1.0)  # /healthz answers before the bomb: the machine's own latency
            t0 = time.perf_counter()
            r = client.post(
                f"/api/v1/runs/{run_id}/points",
                content=bomb,
                headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
            )
            elapsed = time.perf_counter() - t0
            sampler.stop.set()
            sampler.join()
            alive = client.get("/healthz").status_code == 200
    finally:
        server.stop()
    t1 = t0 + elapsed
    # a poll overlapping the bomb's request, and the polls before it (the reference)
    during = [ms for start, ms in sampler.health if start < t1 and start + ms / 1e3 > t0]
    before = [ms for start, ms in sampler.health if start + ms / 1e3 <= t0]
    during = during or [float("nan")]
    before = before or [float("nan")]
    return {
        "status": r.status_code,
        "detail": r.text[:160],
        "seconds": elapsed,
        "rss_before_mb": before_kb / 1024,
        "rss_growth_mb": max(0, sampler.peak_kb - before_kb) / 1024,
        "healthz_max_ms": max(during),
        "healthz_median_ms": statistics.median(during),
        "healthz_polls": len(during),
        "healthz_before_max_ms": max(before),
        "healthz_before_median_ms": statistics.median(before),
        "healthz_errors": sampler.health_errors,
        "alive_after": alive,
    }


def report(name: str, res: dict) -> None:
    print(
        f"{name}: {res['status']} in {res['seconds']:.2f} s; RSS {res['rss_before_mb']:.0f} MB "
        f"+ {res['rss_growth_mb']:.0f} MB at peak; /healthz during it: max "
        f"{res['healthz_max_ms']:.0f} ms, median {res['healthz_median_ms']:.1f} ms over "
        f"{res['healthz_polls']} polls ({res['healthz_errors']} failed; before it: max "
        f"{res['healthz_before_max_ms']:.0f} ms, median {res['healthz_before_median_ms']:.1f} ms);"
        f" server alive after: {res['alive_after']}"
    )
    print(f"    answer: {res['detail']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inflated-mb", type=float, default=62.0)
    parser.add_argument("--baseline", type=Path, help="another source tree, run first")
    args = parser.parse_args()
    bomb = make_bomb(int(args.inflated_mb * 1024 * 1024))
    print(f"bomb: {len(bomb) / 1024:.0f} KB gzip, {args.inflated_mb:.0f} MB inflated")
    if args.baseline is not None:
        report(f"baseline ({args.baseline})", attack(args.baseline, bomb))
    report("this tree", attack(ROOT, bomb))
    print("targets: refused in < 1 s, RSS growth < 100 MB, /healthz < 100 ms")


if __name__ == "__main__":
    main()
