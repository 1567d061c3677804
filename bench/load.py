"""Many trainers at once: N simulated trainers against one server process on PostgreSQL.

    .venv/bin/python bench/load.py [--trainers 25,50,100,150,200] [--seconds 15]
                                   [--baseline-ref HEAD~3] [--workers 1] [--sqlite]
                                   [--no-refits] [--compare-refit-thread] [--val-every 2]

Each trainer is what the client's sender does for a trainer logging 20 steps a second: one
gzip-encoded POST /api/v1/runs/{id}/points a second on a keep-alive connection, 20 steps × 3
metrics named as verl sends them (`actor/entropy`, `actor/kl_loss`, `critic/score/mean`), and
every --val-every-th request also the validation metric (`val-core/openai/gsm8k/acc/mean@1`,
the run's fit metric, a noisy sigmoid in compute): so every run keeps being refitted, at the
rate a real run causes, while ingest is measured (--no-refits leaves the validation metric out:
ingest alone). Requests go one after the other (a trainer never has two requests in flight;
when a response takes longer than a second, the next request goes out at once). The trainers
start at random phases within the first second. The server is one real `scalewatch serve`
process (started here on a temporary PostgreSQL database on loopback), the load generator a raw
asyncio HTTP/1.1 client in this process, so that the generator costs as little CPU as possible
next to the server; its own CPU share is printed (on 2 cores it competes with the server).

For each N (levels run in increasing order, each for --seconds after a --warmup, bounded by
--max-trainers), prints requests sent, achieved rate, p50/p99 latency and errors (non-2xx,
connection errors, timeouts), and at the end the largest N with p99 <= --p99-ms (250) and no
error. Levels stop at the first one that misses the target (--all-levels to run every level).

--baseline-ref REF runs the same levels against a second server built from that git revision
(exported with `git archive` into a temporary directory, its own database), alternating
baseline and current at each level so both see the same machine load, and prints the ratios.

--scaling 1,2,4 (PostgreSQL) is a PROXY for `serve --workers N` scaling, for machines with fewer
cores than workers: one fixed offered load (--trainers, a single number, below one worker's
saturation) against servers of 1, 2 and 4 workers, in --rounds rounds (the order of the worker
counts alternates), measuring server CPU-seconds per 1,000 requests (the process tree, from
/proc), PostgreSQL backend CPU per 1,000 requests, and backend-seconds waiting on locks and on
WAL flushes (sampled from pg_stat_activity every 10 ms). Constant CPU per request and no lock
waits growing with the worker count mean N workers on N free cores serve N times the load; it
is not a throughput measurement.

--scaling 1,2 --saturate: the same, each trainer posting back to back (a closed loop of
--trainers connections a worker, so every server runs at saturation with the same requests in
flight a worker; up to the pool's size, 20 by default, each has a kept-open connection) and the
server's processes pinned to
cores 0..N-1 (the load generator and PostgreSQL are not pinned: they share every core). Adds
requests/s reached, server cores busy, the load generator's CPU per request and what the whole
pipeline (server + PostgreSQL + load generator CPU per request) could reach on this machine's
cores: with fewer cores than server + database + client need, it measures how close N workers
get to that bound, not N-core scaling. --cpu-quota 0.25 caps the server's processes at 0.25 core
a worker (a cgroup CPU quota; needs root) instead of pinning: N workers get N x 0.25 cores, a
scaled-down 'one core a worker' that leaves the rest of the machine to PostgreSQL and the load
generator, so requests/s from 1 to N workers is a measured scaling ratio at that budget. The
quota throttles the server every 100 ms period, which makes its CPU per request noisy and
higher the smaller the budget (a ratio above N comes from there: compare the CPU column).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import ROOT, Server, TempDatabase, pg_available  # noqa: E402

STEPS_PER_REQUEST = 20
METRICS = ("actor/entropy", "actor/kl_loss", "critic/score/mean")
VAL_METRIC = "val-core/openai/gsm8k/acc/mean@1"
REQUEST_TIMEOUT = 30.0


class HttpError(Exception):
    pass


class Conn:
    """One keep-alive HTTP/1.1 connection; just enough protocol for these requests."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()
        ) + f"Content-Length: {len(body)}\r\n\r\n"
        try:
            self.writer.write(head.encode() + body)
            await self.writer.drain()
            status_line = await self.reader.readline()
            if not status_line:
                raise HttpError("connection closed")
            status = int(status_line.split()[1])
            length, close = 0, False
            while True:
                line = await self.reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "connection" and value.strip().lower() == "close":
                    close = True
            data = await self.reader.readexactly(length)
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, HttpError):
            self.close()
            raise
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def val_score(step: int, run_id: int) -> float:
    """A ScaleRL-shaped validation score (its own ceiling a run) with evaluation noise."""
    c = step * 0.75
    a = 0.55 + 0.3 * ((run_id * 37) % 100) / 100
    return 0.1 + (a - 0.1) / (1 + (3000.0 / max(c, 1e-9)) ** 1.5) + random.gauss(0, 0.01)


def points_body(first_step: int, t: float, run_id: int = 0, with_val: bool = False,
                val_points: int = 1) -> bytes:
    pts = [
        {
            "step": s,
            "compute": s * 0.75,
            "time": t,
            "metrics": {m: 0.3 + ((s * (i + 1)) % 97) / 1000 for i, m in enumerate(METRICS)},
        }
        for s in range(first_step, first_step + STEPS_PER_REQUEST)
    ]
    if with_val:  # evaluations at the request's last `val_points` steps
        for p in pts[-val_points:]:
            p["metrics"][VAL_METRIC] = val_score(p["step"], run_id)
    return gzip.compress(json.dumps({"points": pts}).encode(), compresslevel=5)


@dataclass
class Trainer:
    run_id: int
    conn: Conn
    next_step: int = 0
    sent_batches: int = 0


@dataclass
class Level:
    n: int
    latencies: list[float] = field(default_factory=list)  # seconds, of counted requests
    errors: int = 0
    sent: int = 0
    seconds: float = 0.0
    error_kinds: dict[str, int] = field(default_factory=dict)
    batches_a_commit: float | None = None  # the group commit's batches per transaction
    refits: float | None = None  # fits stored per second during the level
    backlog: int | None = None  # series waiting for a refit at the level's end
    oldest_wait: float | None = None  # seconds the oldest of them has waited
    lag_median: float | None = None  # refit lag's median (from /metrics' histogram), seconds
    generator_cpu: float = 0.0  # share of the machine's cores the load generator used

    def p(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) * 1e3 if self.latencies else float("nan")

    @property
    def p99(self) -> float:
        return self.p(0.99)

    @property
    def p999(self) -> float:
        return self.p(0.999)

    def ok(self, p99_ms: float) -> bool:
        return self.errors == 0 and bool(self.latencies) and self.p99 <= p99_ms


class Target:
    """One server under test and its trainers (created as levels need them)."""

    def __init__(self, label: str, server: Server, val_every: int = 0,
                 val_points: int = 1) -> None:
        """`val_every`: every how many requests a trainer sends the validation metric (0:
        never, ingest alone)."""
        self.label = label
        self.server = server
        self.val_every = val_every
        self.val_points = val_points
        u = urlsplit(server.url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.trainers: list[Trainer] = []

    async def ensure(self, n: int) -> None:
        async def make(i: int) -> Trainer:
            conn = Conn(self.host, self.port)
            body = json.dumps({"project": "load", "name": f"trainer-{i}",
                               "fit_metric": VAL_METRIC}).encode()
            status, data = await conn.request(
                "POST", "/api/v1/runs", body, {"Content-Type": "application/json"}
            )
            if status not in (200, 201):
                raise SystemExit(f"{self.label}: cannot create run: {status} {data[:200]!r}")
            return Trainer(json.loads(data)["id"], conn)

        sem = asyncio.Semaphore(20)

        async def bounded(i: int) -> Trainer:
            async with sem:
                return await make(i)

        new = await asyncio.gather(*(bounded(i) for i in range(len(self.trainers), n)))
        self.trainers.extend(new)

    async def scrape(self) -> dict[str, float]:
        """/metrics as {series: value} (labels kept in the name)."""
        conn = Conn(self.host, self.port)
        try:
            status, data = await conn.request("GET", "/metrics", b"", {})
        finally:
            conn.close()
        if status != 200:
            return {}
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    @staticmethod
    def ingest_groups(m: dict[str, float]) -> tuple[int, int] | None:
        """(transactions, batches) of the server's ingest group commit (None: a server without
        it, e.g. an older --baseline-ref or SQLite)."""
        g = m.get("scalewatch_ingest_groups_total")
        b = m.get("scalewatch_ingest_group_batches_total")
        return None if g is None or b is None else (int(g), int(b))

    async def run_level(self, n: int, seconds: float, warmup: float,
                        interval: float = 1.0) -> Level:
        """`interval`: seconds between a trainer's requests (0: back to back, a closed loop)."""
        await self.ensure(n)
        level = Level(n)
        before = await self.scrape()
        groups_before = self.ingest_groups(before)
        cpu_before = time.process_time()
        loop = asyncio.get_running_loop()
        start = loop.time()
        count_from, stop_at = start + warmup, start + warmup + seconds
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}

        async def trainer(tr: Trainer) -> None:
            nxt = start + random.random() * interval  # random phase within the first one
            while True:
                now = loop.time()
                if nxt > now:
                    await asyncio.sleep(nxt - now)
                if loop.time() >= stop_at:
                    return
                with_val = self.val_every > 0 and tr.sent_batches % self.val_every == 0
                body = points_body(tr.next_step, time.time(), tr.run_id, with_val,
                                   self.val_points)
                tr.next_step += STEPS_PER_REQUEST
                tr.sent_batches += 1
                sent = loop.time()
                counted = sent >= count_from
                try:
                    status, data = await asyncio.wait_for(
                        tr.conn.request("POST", f"/api/v1/runs/{tr.run_id}/points", body,
                                        headers),
                        REQUEST_TIMEOUT,
                    )
                    kind = None if status == 200 else f"HTTP {status}"
                except (TimeoutError, asyncio.TimeoutError):
                    tr.conn.close()
                    kind = "timeout"
                except (OSError, ValueError, IndexError, asyncio.IncompleteReadError,
                        HttpError) as exc:
                    kind = type(exc).__name__
                done = loop.time()
                if counted:
                    level.sent += 1
                    if kind is None:
                        level.latencies.append(done - sent)
                    else:
                        level.errors += 1
                        level.error_kinds[kind] = level.error_kinds.get(kind, 0) + 1
                nxt = max(nxt + interval, done)  # one in flight; late -> next goes at once

        await asyncio.gather(*(trainer(tr) for tr in self.trainers[:n]))
        level.seconds = seconds
        wall = loop.time() - start
        level.generator_cpu = (time.process_time() - cpu_before) / wall / (os.cpu_count() or 1)
        after = await self.scrape()
        groups_after = self.ingest_groups(after)
        if groups_before and groups_after and groups_after[0] > groups_before[0]:
            level.batches_a_commit = ((groups_after[1] - groups_before[1])
                                      / (groups_after[0] - groups_before[0]))
        fits = after.get("scalewatch_fits_total", 0.0) - before.get("scalewatch_fits_total", 0.0)
        level.refits = fits / wall
        if "scalewatch_refit_backlog" in after:
            level.backlog = int(after["scalewatch_refit_backlog"])
            level.oldest_wait = after.get("scalewatch_refit_oldest_wait_seconds")
        level.lag_median = lag_median(before, after)
        return level


def lag_median(before: dict[str, float], after: dict[str, float]) -> float | None:
    """The median refit lag of the fits stored between two scrapes: the upper bound of the
    histogram bucket that holds it (None: no fit, or a server without the histogram)."""
    prefix = 'scalewatch_refit_lag_seconds_bucket{le="'
    buckets = sorted(
        (float("inf") if k[len(prefix):-2] == "+Inf" else float(k[len(prefix):-2]),
         v - before.get(k, 0.0))
        for k, v in after.items() if k.startswith(prefix))
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    return next(bound for bound, n in buckets if n >= total / 2)


def export_tree(ref: str) -> Path:
    """The source tree at `ref`, read-only from the repository's point of view."""
    out = Path(tempfile.mkdtemp(prefix="sw-baseline-"))
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def row(label: str, lv: Level, p99_ms: float) -> str:
    rate = lv.sent / lv.seconds if lv.seconds else 0.0
    kinds = ", ".join(f"{k}: {v}" for k, v in sorted(lv.error_kinds.items()))
    verdict = "ok" if lv.ok(p99_ms) else "MISS"
    grouped = "" if lv.batches_a_commit is None else f"  {lv.batches_a_commit:.1f} batches/commit"
    lag = "      -" if lv.lag_median is None else f"{lv.lag_median:7g}"
    backlog = "    -" if lv.backlog is None else f"{lv.backlog:5d}"
    wait = "" if lv.oldest_wait is None else f" (oldest {lv.oldest_wait:.1f} s)"
    return (f"{label:10s} {lv.n:5d} {lv.sent:7d} {rate:8.1f} {lv.p50:9.1f} {lv.p99:9.1f} "
            f"{lv.p999:9.1f} {lv.errors:6d} {lv.refits or 0:8.1f} {lag} {backlog}{wait} "
            f"gen {100 * lv.generator_cpu:4.1f}%  {verdict}"
            f"{'  (' + kinds + ')' if kinds else ''}{grouped}")


async def main_async(args: argparse.Namespace, targets: list[Target]) -> dict[str, list[Level]]:
    levels = sorted({int(x) for x in args.trainers.split(",") if x.strip()})
    levels = [n for n in levels if 0 < n <= args.max_trainers]
    results: dict[str, list[Level]] = {t.label: [] for t in targets}
    alive = {t.label for t in targets}
    print(f"{'server':10s} {'N':>5s} {'sent':>7s} {'req/s':>8s} {'p50 ms':>9s} {'p99 ms':>9s} "
          f"{'p99.9 ms':>9s} {'errors':>6s} {'refits/s':>8s} {'lag p50':>7s} {'backlog':>5s}  "
          f"target p99 <= {args.p99_ms:g} ms, 0 errors (lag p50: bucket bound, s; gen: the load "
          "generator's share of all cores)")
    for n in levels:
        for t in targets:
            if t.label not in alive:
                continue
            lv = await t.run_level(n, args.seconds, args.warmup)
            results[t.label].append(lv)
            print(row(t.label, lv, args.p99_ms), f"  load {os.getloadavg()[0]:.1f}", flush=True)
            if not lv.ok(args.p99_ms) and not args.all_levels:
                alive.discard(t.label)
            await asyncio.sleep(args.pause)  # let the refitter and autovacuum settle
        if not alive:
            break
    for t in targets:
        for tr in t.trainers:
            tr.conn.close()
    return results


def largest_ok(levels: list[Level], p99_ms: float) -> int:
    best = 0
    for lv in levels:
        if not lv.ok(p99_ms):
            break
        best = lv.n
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trainers", default="25,50,100,150,200,250,300",
                    help="comma-separated numbers of trainers, run in increasing order")
    ap.add_argument("--max-trainers", type=int, default=400, help="never more than this")
    ap.add_argument("--seconds", type=float, default=15.0, help="measured seconds per level")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds per level")
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between levels")
    ap.add_argument("--p99-ms", type=float, default=250.0)
    ap.add_argument("--all-levels", action="store_true", help="do not stop at the first miss")
    ap.add_argument("--workers", type=int, default=1, help="server processes (serve --workers)")
    ap.add_argument("--sqlite", action="store_true", help="SQLite instead of PostgreSQL")
    ap.add_argument("--val-every", type=int, default=2,
                    help="a trainer sends its validation metric every this many requests")
    ap.add_argument("--val-points", type=int, default=1, choices=range(1, STEPS_PER_REQUEST + 1),
                    metavar=f"1..{STEPS_PER_REQUEST}",
                    help="evaluations in a request that carries the validation metric (20 with "
                    "--val-every 1: the metric on every step, the worst case for the refitter)")
    ap.add_argument("--no-refits", action="store_true",
                    help="no validation metric: ingest alone, nothing to refit")
    ap.add_argument("--compare-refit-thread", action="store_true",
                    help="also measure a server that fits in a thread of its own process "
                    "(serve --refit-in-process, the layout before the refit process), "
                    "alternating with the default at each level")
    ap.add_argument("--baseline-ref", help="also measure a server built from this git revision")
    ap.add_argument("--scaling", help="worker counts, e.g. 1,2,4: the CPU/lock proxy (above)")
    ap.add_argument("--rounds", type=int, default=2, help="--scaling: rounds per worker count")
    ap.add_argument("--saturate", action="store_true",
                    help="--scaling: --trainers a worker posting back to back, server pinned to "
                    "N cores (above)")
    ap.add_argument("--cpu-quota", type=float,
                    help="--saturate: cap the server at this many cores a worker (cgroup quota) "
                    "instead of pinning whole cores")
    args = ap.parse_args()
    if args.scaling:
        from bench._scaling import run_scaling

        run_scaling(args)
        return
    kind = "sqlite" if args.sqlite else "postgresql"
    if kind == "postgresql" and not pg_available():
        raise SystemExit("PostgreSQL is not reachable (SCALEWATCH_BENCH_PG_URL)")
    random.seed(1)
    extra = ["--workers", str(args.workers)] if args.workers != 1 else []
    dbs: list[TempDatabase] = []
    servers: list[Server] = []
    trees: list[Path] = []
    targets: list[Target] = []
    try:
        val_every = 0 if args.no_refits else args.val_every
        if args.baseline_ref:
            tree = export_tree(args.baseline_ref)
            trees.append(tree)
            dbs.append(TempDatabase(kind))
            servers.append(Server(dbs[-1].url, root=tree, extra_args=extra))
            targets.append(Target("baseline", servers[-1], val_every, args.val_points))
        if args.compare_refit_thread:
            dbs.append(TempDatabase(kind))
            servers.append(Server(dbs[-1].url, extra_args=[*extra, "--refit-in-process"]))
            targets.append(Target("thread", servers[-1], val_every, args.val_points))
        dbs.append(TempDatabase(kind))
        servers.append(Server(dbs[-1].url, extra_args=extra))
        targets.append(Target("current", servers[-1], val_every, args.val_points))
        refits = ("no validation metric (ingest alone)" if not val_every else
                  f"+ the validation metric every {val_every} requests, {args.val_points} "
                  "evaluation(s) each (refits on)")
        print(f"{kind}, {args.workers} server process(es), {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f} at start; each trainer: 1 gzip request/s of "
              f"{STEPS_PER_REQUEST} steps × {len(METRICS)} metrics {refits}"
              + (f"; baseline = {args.baseline_ref}" if args.baseline_ref else ""))
        results = asyncio.run(main_async(args, targets))
    finally:
        for s in servers:
            s.stop()
        for d in dbs:
            d.drop()
        for tree in trees:
            shutil.rmtree(tree, ignore_errors=True)
    print()
    best = {label: largest_ok(lvs, args.p99_ms) for label, lvs in results.items()}
    for label, n in best.items():
        print(f"{label}: largest N with p99 <= {args.p99_ms:g} ms and 0 errors: {n}")
    for other in ("baseline", "thread"):
        if other not in results:
            continue
        b, c = best[other], best["current"]
        print(f"current / {other}, largest N: {c}/{b}" + (f" = x{c / b:.2f}" if b else ""))
        for lb, lc in zip(results[other], results["current"], strict=False):
            if lb.latencies and lc.latencies:
                print(f"  N={lb.n}: p50 x{lb.p50 / lc.p50:.2f} faster, p99 x{lb.p99 / lc.p99:.2f}"
                      f" faster, req/s {lc.sent / lc.seconds:.0f} vs {lb.sent / lb.seconds:.0f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
