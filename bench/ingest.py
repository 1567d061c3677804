"""Ingest throughput: scalewatch over HTTP vs raw PostgreSQL COPY vs an MLflow tracking server.

    .venv/bin/python bench/ingest.py [--values 200000] [--batch 1000]

Every figure is measured in the same run on the same machine, and printed as a ratio:
- scalewatch: POST /api/v1/runs/{id}/points, gzip-encoded, 1,000 values a request (what the
  trainer client sends), one keep-alive connection, into SQLite and into PostgreSQL;
- raw COPY: the same rows straight into a PostgreSQL table of the same shape (same primary key)
  through psycopg COPY, one transaction per 1,000 rows: the ceiling for any PostgreSQL ingest
  (measured right before and after each PostgreSQL row, which is divided by their mean);
- MLflow: `mlflow server` with the same database kind, `MlflowClient.log_batch` with 1,000
  metrics a call (MLflow's own per-request maximum). MLflow is installed into
  `.bench/mlflow-venv` on first use (it is a bench-only dependency);
- scalewatch's MLflow-compatible endpoint (`/api/2.0/mlflow`): the same real `mlflow` client
  script, unchanged, pointed at a scalewatch server with the same database kind instead -- what
  a trainer logging to MLflow gets by changing only MLFLOW_TRACKING_URI.
- the mlflow client's own ceiling: the same script against a null tracking server (answers
  every call at once, stdlib, no storage): no server can make the real client log faster, so
  ceiling / `mlflow server` is the largest ratio any MLflow-compatible endpoint can show here.
Targets: >= 20x MLflow, >= 0.5x raw COPY; the MLflow-compatible endpoint >= 10x `mlflow server`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import (  # noqa: E402
    MLFLOW_VENV,
    Server,
    TempDatabase,
    ensure_mlflow,
    free_port,
    pg_available,
)


def batches(n_values: int, batch: int, metrics: int) -> list[bytes]:
    per_request = batch // metrics
    out = []
    step = 0
    # Per-step training metrics (not the fit metric): this measures ingestion, not refits.
    names = ["rl/kl", "rl/entropy", "rl/grad_norm", "rl/ess"][:metrics]
    while step * metrics < n_values:
        pts = [
            {
                "step": s,
                "compute": s * 0.75,
                "time": 1.7e9 + s,
                "metrics": {m: 0.3 + (s % 97) / 1000 for m in names},
            }
            for s in range(step, step + per_request)
        ]
        out.append(gzip.compress(json.dumps({"points": pts}).encode(), 1))
        step += per_request
    return out


def bench_scalewatch(kind: str, n_values: int, batch: int, metrics: int, clients: int = 1) -> float:
    """Values/s stored; `clients` trainers post concurrently, each to its own run."""
    db = TempDatabase(kind)
    server = Server(db.url)
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    try:
        bodies = batches(n_values, batch, metrics)
        with httpx.Client(base_url=server.url, timeout=60) as http:  # warm-up run
            rid = http.post("/api/v1/runs", json={"project": "bench", "name": "warm"}).json()["id"]
            http.post(f"/api/v1/runs/{rid}/points", content=bodies[0], headers=headers)
        shares = [bodies[i::clients] for i in range(clients)]
        stored = [0] * clients

        def trainer(i: int) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                rid = http.post(
                    "/api/v1/runs", json={"project": "bench", "name": f"{kind}-{i}"}
                ).json()["id"]
                for body in shares[i]:
                    r = http.post(f"/api/v1/runs/{rid}/points", content=body, headers=headers)
                    r.raise_for_status()
                    stored[i] += r.json()["accepted"]

        threads = [threading.Thread(target=trainer, args=(i,)) for i in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(stored) / (time.perf_counter() - t0)
    finally:
        server.stop()
        db.drop()


def bench_copy(n_values: int, batch: int) -> float:
    import psycopg

    db = TempDatabase("postgresql")
    try:
        with psycopg.connect(db.libpq_url) as conn:
            conn.execute(
                "CREATE TABLE points (series_id int, step bigint, compute double precision,"
                " value double precision, wall_time double precision,"
                " PRIMARY KEY (series_id, step))"
            )
            conn.commit()
            rows = [(1, s, s * 0.75, 0.3 + (s % 97) / 1000, 1.7e9 + s) for s in range(n_values)]
            t0 = time.perf_counter()
            for lo in range(0, n_values, batch):
                with (
                    conn.cursor() as cur,
                    cur.copy(
                        "COPY points (series_id, step, compute, value, wall_time) FROM STDIN"
                    ) as copy,
                ):
                    for row in rows[lo : lo + batch]:
                        copy.write_row(row)
                conn.commit()
            return n_values / (time.perf_counter() - t0)
    finally:
        db.drop()


MLFLOW_CLIENT = r"""
import sys, time, threading
from mlflow.tracking import MlflowClient
from mlflow.entities import Metric
url, n, batch, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
client = MlflowClient(tracking_uri=url)
exp = client.create_experiment("bench")
warm = client.create_run(exp).info.run_id
client.log_batch(warm, metrics=[Metric("warm", 0.1, 0, s) for s in range(batch)])
runs = [client.create_run(exp).info.run_id for _ in range(clients)]
done = [0] * clients
def trainer(i):
    c = MlflowClient(tracking_uri=url)
    t0 = time.perf_counter()
    while done[i] < n // clients and time.perf_counter() - t0 < 90:
        c.log_batch(runs[i], metrics=[Metric("val_pass_rate", 0.3, int(time.time() * 1000), s)
                                      for s in range(done[i], done[i] + batch)])
        done[i] += batch
threads = [threading.Thread(target=trainer, args=(i,)) for i in range(clients)]
t0 = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
print(sum(done) / (time.perf_counter() - t0))
"""


NULL_TRACKING_SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
RUN = {"run": {"info": {"run_id": "r1", "run_uuid": "r1", "experiment_id": "1",
                        "status": "RUNNING", "start_time": 1, "lifecycle_stage": "active"},
               "data": {}}}
class Null(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def _send(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("experiments/create"):
            return self._send({"experiment_id": "1"})
        return self._send(RUN if self.path.endswith("runs/create") else {})
    def do_GET(self):
        self._send({})
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Null).serve_forever()
"""


def bench_client_ceiling(n_values: int, batch: int, clients: int = 1) -> float | None:
    """Values/s of the same mlflow client script against a server that does nothing."""
    py = ensure_mlflow()
    if py is None:
        return None
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", NULL_TRACKING_SERVER, str(port)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        return run_mlflow_client(py, f"http://127.0.0.1:{port}", n_values, batch, clients)
    finally:
        proc.terminate()
        proc.wait(10)


# The reference is pinned: unpinned, the "x MLflow" ratio moved between sessions with the
# release pip picked (earlier sessions, release not recorded: 4.7-5.6k values/s; 3.17.2: 8.2-9.8k;
# scalewatch itself unchanged).
def run_mlflow_client(py: Path, url: str, n_values: int, batch: int, clients: int
                      ) -> float | None:
    """Values/s the real mlflow client's log_batch reaches against the tracking server `url`."""
    out = subprocess.run(
        [str(py), "-c", MLFLOW_CLIENT, url, str(n_values), str(batch), str(clients)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return float(out.stdout.strip().splitlines()[-1])


def bench_mlflow_compat(kind: str, n_values: int, batch: int, clients: int = 1
                        ) -> float | None:
    """The same mlflow client script against scalewatch's /api/2.0/mlflow endpoint."""
    py = ensure_mlflow()
    if py is None:
        return None
    db = TempDatabase(kind)
    server = Server(db.url)
    try:
        return run_mlflow_client(py, server.url, n_values, batch, clients)
    finally:
        server.stop()
        db.drop()


def bench_mlflow(kind: str, n_values: int, batch: int, clients: int = 1) -> float | None:
    py = ensure_mlflow()
    if py is None:
        return None
    db = TempDatabase(kind)
    port = free_port()
    store = db.url
    art = tempfile.mkdtemp(prefix="mlflow-art-")
    proc = subprocess.Popen(
        [
            str(MLFLOW_VENV / "bin" / "mlflow"),
            "server",
            "--backend-store-uri",
            store,
            "--default-artifact-root",
            art,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            return None
        return run_mlflow_client(py, url, n_values, batch, clients)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        db.drop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument(
        "--metrics", type=int, default=1, help="metrics per point (values/request fixed)"
    )
    ap.add_argument("--mlflow-values", type=int, default=20_000)
    ap.add_argument("--compat-values", type=int, default=200_000,
                    help="values the mlflow client sends to scalewatch's MLflow endpoint")
    ap.add_argument(
        "--clients",
        type=int,
        nargs="+",
        default=[1, 4],
        help="concurrent trainers (each row of the table is one setting)",
    )
    ap.add_argument("--skip-mlflow", action="store_true")
    args = ap.parse_args()
    kinds = ["sqlite"] + (["postgresql"] if pg_available() else [])
    rows = []
    copies: dict[int, float] = {}
    for kind in kinds:
        for clients in args.clients:
            # Raw COPY right before and after each PostgreSQL row (their mean is its "x COPY"):
            # on a shared machine the load moves within a run, and one COPY figure taken
            # minutes apart from a row skewed its ratio either way (0.43-0.52 for one build).
            before = bench_copy(args.values, args.batch) if kind == "postgresql" else None
            sw = bench_scalewatch(kind, args.values, args.batch, args.metrics, clients)
            if before is not None:
                copies[clients] = (before + bench_copy(args.values, args.batch)) / 2
            ml = (
                None
                if args.skip_mlflow
                else bench_mlflow(kind, args.mlflow_values, args.batch, clients)
            )
            compat = (
                None
                if args.skip_mlflow
                else bench_mlflow_compat(kind, args.compat_values, args.batch, clients)
            )
            rows.append((kind, clients, sw, ml, compat))
    ceilings = {} if args.skip_mlflow else {
        c: bench_client_ceiling(args.compat_values // 4, args.batch, c) for c in args.clients}

    print(
        f"\ningest, {args.batch} values a request, {args.values} values "
        f"({args.metrics} metric(s) a point); raw COPY is one writer, measured right before "
        "and after each PostgreSQL row (mean)"
    )
    print(
        f"{'database':<12}{'clients':>8}{'scalewatch/s':>14}{'MLflow/s':>12}{'x MLflow':>10}"
        f"{'raw COPY/s':>13}{'x COPY':>9}{'MLflow API/s':>14}{'x MLflow':>10}"
        f"{'ceiling x':>11}"
    )
    for kind, clients, sw, ml, compat in rows:
        ratio_ml = f"{sw / ml:>10.1f}" if ml else f"{'n/a':>10}"
        ml_s = f"{ml:>12,.0f}" if ml else f"{'n/a':>12}"
        cp = copies.get(clients) if kind == "postgresql" else None
        cp_s = f"{cp:>13,.0f}" if cp else f"{'-':>13}"
        ratio_cp = f"{sw / cp:>9.2f}" if cp else f"{'-':>9}"
        compat_s = f"{compat:>14,.0f}" if compat else f"{'n/a':>14}"
        ratio_compat = f"{compat / ml:>10.1f}" if compat and ml else f"{'n/a':>10}"
        ceil = ceilings.get(clients)
        ceil_s = f"{ceil / ml:>11.1f}" if ceil and ml else f"{'n/a':>11}"
        print(f"{kind:<12}{clients:>8}{sw:>14,.0f}{ml_s}{ratio_ml}{cp_s}{ratio_cp}"
              f"{compat_s}{ratio_compat}{ceil_s}")
    print("MLflow API/s: the same mlflow client log_batch script against scalewatch's "
          "/api/2.0/mlflow (x MLflow: vs `mlflow server`); ceiling x: that script against a "
          "null server (no storage) vs `mlflow server`, the most any endpoint can show")
    for c, ceil in ceilings.items():
        if ceil:
            print(f"  mlflow client ceiling, {c} client(s): {ceil:,.0f} values/s")
    print("targets: >= 20x MLflow, >= 0.5x raw COPY (PostgreSQL), MLflow API >= 10x MLflow")


if __name__ == "__main__":
    main()
