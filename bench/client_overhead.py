"""Trainer-side cost of one logging call: scalewatch ``run.log`` vs MLflow ``log_metric``.

    .venv/bin/python bench/client_overhead.py [--url URL] [--calls 20000] [--mlflow-sync-calls 300]

Measures, in the same process and run, the wall time each call takes on the calling (trainer)
thread - median and p99 in microseconds:

* scalewatch ``run.log({...}, step, compute)`` against a live scalewatch server (started here on
  a temporary SQLite database unless ``--url`` is given), with 1 and with 2 metrics per call,
  with the write-ahead journal (the default) and without it (``SCALEWATCH_JOURNAL=0``). The
  two are measured in alternating rounds (``--rounds``) so that the machine's load drifts the
  same way for both, and the ratio journal / no journal is printed;
* ``mlflow.log_metric(key, value, step)`` synchronous (one HTTP round trip per call) and
  asynchronous (``synchronous=False``), against a local ``mlflow server`` started here as a
  subprocess on a temporary SQLite store. MLflow is a bench-only dependency; if it is not
  installed the script says so and still prints the scalewatch figures.

Ratios are MLflow time / scalewatch time (1 metric per call on both sides). Numbers depend on the
machine and its load; this is a comparison made in one run, not an absolute figure.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import trainer_client as sw  # noqa: E402
from bench._common import MLFLOW_VENV, ensure_mlflow  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, 15)
        proc.wait(20)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(10)


def stats(ns: list[int]) -> tuple[float, float]:
    ns = sorted(ns)
    med = statistics.median(ns) / 1000.0
    p99 = ns[min(len(ns) - 1, int(len(ns) * 0.99))] / 1000.0
    return med, p99


def _one_round(
    url: str, calls: int, home: str, n_metrics: int, journal: bool, rnd: int
) -> tuple[list[int], int]:
    saved = os.environ.get("SCALEWATCH_JOURNAL")
    os.environ["SCALEWATCH_JOURNAL"] = "1" if journal else "0"  # read by init()
    try:
        tag = "j" if journal else "nj"
        run = sw.init("bench", f"overhead-{n_metrics}m-{tag}-{rnd}-{os.getpid()}", url=url,
                      home=home)
    finally:
        if saved is None:
            os.environ.pop("SCALEWATCH_JOURNAL", None)
        else:
            os.environ["SCALEWATCH_JOURNAL"] = saved
    clock = time.perf_counter_ns
    names = [f"m{i}" for i in range(n_metrics)]
    for i in range(1000):  # warm-up
        run.log({k: 0.5 for k in names}, step=i, compute=float(i))
    out = []
    for i in range(1000, 1000 + calls):
        metrics = {k: i * 1e-6 for k in names}
        t = clock()
        run.log(metrics, step=i, compute=i * 0.01)
        out.append(clock() - t)
    left = run.finish(timeout=120)
    return out, left


def bench_pair(
    url: str, calls: int, home: str, n_metrics: int, rounds: int
) -> tuple[tuple[float, float, int], tuple[float, float, int]]:
    """(journal, no journal), measured in alternating rounds of calls / rounds calls each."""
    on: list[int] = []
    off: list[int] = []
    left = [0, 0]
    per = max(1, calls // rounds)
    for r in range(rounds):
        s, lft = _one_round(url, per, home, n_metrics, True, r)
        on += s
        left[0] += lft
        s, lft = _one_round(url, per, home, n_metrics, False, r)
        off += s
        left[1] += lft
    return (*stats(on), left[0]), (*stats(off), left[1])


def start_scalewatch(tmp: str) -> tuple[str, subprocess.Popen]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer_client.cli", "serve", "--port", str(port),
         "--database-url", f"sqlite:///{tmp}/scalewatch.db", "--no-auth", "--log-level",
         "warning"],
        cwd=str(REPO), env={**os.environ, "SCALEWATCH_HOME": f"{tmp}/server-home",
                            "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    if not wait_http(url + "/healthz", 90, proc):
        stop(proc)
        raise SystemExit("scalewatch server did not start")
    return url, proc


def bench_mlflow(tmp: str, sync_calls: int, async_calls: int) -> dict | str:
    try:
        import mlflow
    except ImportError:
        return "MLflow is not installed (pip install mlflow); MLflow figures skipped"
    # The server from the bench's own MLflow venv (this venv has only the client, mlflow-skinny).
    if ensure_mlflow() is None:
        return "could not install MLflow into .bench/mlflow-venv; MLflow figures skipped"
    exe = str(MLFLOW_VENV / "bin" / "mlflow")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "server", "--backend-store-uri", f"sqlite:///{tmp}/mlflow.db",
         "--default-artifact-root", f"{tmp}/mlartifacts", "--host", "127.0.0.1", "--port",
         str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        if not wait_http(url + "/health", 180, proc):
            why = "exited" if proc.poll() is not None else "did not answer within 180 s"
            return f"MLflow server {why}; MLflow figures skipped"
        mlflow.set_tracking_uri(url)
        mlflow.set_experiment("scalewatch-bench")
        res = {}
        clock = time.perf_counter_ns
        with mlflow.start_run():
            for i in range(20):  # warm-up (connection pool, experiment cache)
                mlflow.log_metric("reward", 0.5, step=i)
            out = []
            for i in range(sync_calls):
                t = clock()
                mlflow.log_metric("reward", i * 1e-3, step=100 + i)
                out.append(clock() - t)
            res["sync"] = stats(out) + (sync_calls,)
            for i in range(200):
                mlflow.log_metric("reward_async", 0.5, step=i, synchronous=False)
            out = []
            for i in range(async_calls):
                t = clock()
                mlflow.log_metric("reward_async", i * 1e-3, step=1000 + i, synchronous=False)
                out.append(clock() - t)
            res["async"] = stats(out) + (async_calls,)
            with contextlib.suppress(Exception):  # flushing is not what we measure
                mlflow.flush_async_logging()
        res["version"] = mlflow.__version__
        return res
    finally:
        stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="existing scalewatch server (default: start one)")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=4,
                    help="alternating journal / no-journal rounds the calls are split over")
    ap.add_argument("--mlflow-sync-calls", type=int, default=300)
    ap.add_argument("--mlflow-async-calls", type=int, default=5000)
    ap.add_argument("--skip-mlflow", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sw-bench-")
    proc = None
    try:
        url = args.url
        if url is None:
            url, proc = start_scalewatch(tmp)
        home = f"{tmp}/client-home"
        sw1, nj1 = bench_pair(url, args.calls, home, 1, args.rounds)
        sw2, nj2 = bench_pair(url, args.calls, home, 2, args.rounds)
        print(f"{'call':52s} {'median µs':>10s} {'p99 µs':>10s} {'calls':>7s}")
        for label, r in (("scalewatch run.log (1 metric)", sw1),
                         ("scalewatch run.log (1 metric, SCALEWATCH_JOURNAL=0)", nj1),
                         ("scalewatch run.log (2 metrics)", sw2),
                         ("scalewatch run.log (2 metrics, SCALEWATCH_JOURNAL=0)", nj2)):
            print(f"{label:52s} {r[0]:10.2f} {r[1]:10.2f} {args.calls:7d}")
        print("journal / no journal (same run, alternating rounds): "
              f"1 metric median x{sw1[0] / nj1[0]:.2f} p99 x{sw1[1] / nj1[1]:.2f}; "
              f"2 metrics median x{sw2[0] / nj2[0]:.2f} p99 x{sw2[1] / nj2[1]:.2f}")
        print(f"load average while measuring: {os.getloadavg()[0]:.2f} "
              f"({os.cpu_count()} cores)")
        left = sw1[2] + sw2[2] + nj1[2] + nj2[2]
        if left:
            print(f"  (warning: {left} points were not acknowledged)")
        if args.skip_mlflow:
            return
        ml = bench_mlflow(tmp, args.mlflow_sync_calls, args.mlflow_async_calls)
        if isinstance(ml, str):
            print(ml)
            return
        for key, label in (("sync", "mlflow.log_metric (synchronous)"),
                           ("async", "mlflow.log_metric (synchronous=False)")):
            med, p99, n = ml[key]
            print(f"{label:52s} {med:10.2f} {p99:10.2f} {n:7d}")
        print(f"MLflow {ml['version']}; ratios MLflow / scalewatch (1 metric per call):")
        for key in ("sync", "async"):
            med, p99, _ = ml[key]
            print(f"  {key:5s}: median x{med / sw1[0]:.0f}, p99 x{p99 / sw1[1]:.0f}")
    finally:
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
