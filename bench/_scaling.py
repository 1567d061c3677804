"""What `bench/load.py --scaling` reads besides latencies: CPU of a process tree and of a
database's PostgreSQL backends (from /proc), and where those backends wait (sampled from
pg_stat_activity).

On a machine with fewer cores than workers, throughput scaling cannot be measured; what can
is whether more workers cost more per request. If CPU-seconds per request stay constant and
no lock makes requests wait for each other, N workers on N free cores serve N times the load.
Both are measured at one fixed offered load, so the figures compare like with like.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
IDLE_SECONDS = 5.0


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds: user + system) of a live process, else None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def tree_pids(root: int) -> list[int]:
    """`root` and every process descended from it (uvicorn's workers, fit pools)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            parents[int(entry)] = st[0]
    out, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parents.items() if pp in frontier]
        out += frontier
    return out


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    return {p: st[1] for p in pids if (st := _stat(p)) is not None}


def preemptions(pids: list[int]) -> dict[int, int]:
    """Involuntary context switches of each live process: times the kernel took its core away
    (more processes than free cores make more of them, and each costs cache refills)."""
    out = {}
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    out[p] = int(line.split()[1])
        except OSError:
            continue
    return out


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU spent between the two readings (a process new since `before` counts whole)."""
    return sum(v - before.get(p, 0.0) for p, v in after.items())


class WaitSampler:
    """Samples, every `interval` seconds in a thread, what the active backends of database
    `dbname` are doing: on a CPU (no wait event) or waiting, by wait event type ("Lock": a
    row or table lock; "LWLock": a shared-memory lock; "IO": e.g. the WAL flush of a commit).
    `seconds()` turns sample counts into estimated backend-seconds."""

    def __init__(self, libpq_url: str, dbname: str, interval: float = 0.01) -> None:
        import psycopg

        self.conn = psycopg.connect(libpq_url, autocommit=True)
        self.dbname, self.interval = dbname, interval
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def backend_pids(self) -> list[int]:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (self.dbname,),
        ).fetchall()
        return [r[0] for r in rows]

    def _run(self) -> None:
        q = ("SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), count(*) "
             "FROM pg_stat_activity WHERE datname = %s AND state = 'active' "
             "AND pid <> pg_backend_pid() GROUP BY 1")  # fmt: skip
        while not self._stop.wait(self.interval):
            for kind, n in self.conn.execute(q, (self.dbname,)).fetchall():
                self.counts[kind] += n
            self.samples += 1

    def start(self) -> None:
        self.counts.clear()
        self.samples = 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self, elapsed: float) -> dict[str, float]:
        """Estimated backend-seconds per state over `elapsed` seconds of sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        per_sample = elapsed / max(1, self.samples)
        return {k: n * per_sample for k, n in self.counts.items()}

    def close(self) -> None:
        self.conn.close()


def _is_wal(kind: str) -> bool:
    # A commit waits for its WAL flush (IO:WALSync/WALWrite), or for another backend's flush
    # that covers it (LWLock:WALWrite): that is the commit's cost, not contention.
    return kind.startswith("IO:WAL") or kind == "LWLock:WALWrite"


def lock_wait(seconds: dict[str, float]) -> float:
    """Backend-seconds spent waiting for a lock another backend holds (row and table locks,
    shared-memory locks), the WAL flush of commits excepted."""
    return sum(v for k, v in seconds.items()
               if k.startswith(("Lock:", "LWLock:")) and not _is_wal(k))  # fmt: skip


def wal_wait(seconds: dict[str, float]) -> float:
    """Backend-seconds spent waiting for commits' WAL flushes."""
    return sum(v for k, v in seconds.items() if _is_wal(k))


def run_scaling(args: Any) -> None:
    """`bench/load.py --scaling`: the proxy table (see bench/load.py's docstring)."""
    import asyncio
    import random
    import statistics

    from bench._common import Server, TempDatabase, pg_available
    from bench.load import Target

    if not pg_available():
        raise SystemExit("--scaling needs PostgreSQL (SCALEWATCH_BENCH_PG_URL)")
    counts = [int(x) for x in args.scaling.split(",") if x.strip()]
    n = int(args.trainers.split(",")[0])
    random.seed(1)
    print(f"PROXY for --workers scaling ({os.cpu_count()} cores here: throughput cannot scale "
          f"past them): {n} trainers x 1 request/s (fixed offered load), {args.seconds:g} s "
          f"measured after {args.warmup:g} s of warm-up, {args.rounds} round(s)")  # fmt: skip
    rows: dict[int, list[dict[str, float]]] = {w: [] for w in counts}
    for rnd in range(args.rounds):
        for workers in counts if rnd % 2 == 0 else counts[::-1]:
            db = TempDatabase("postgresql")
            server = Server(db.url, extra_args=["--workers", str(workers)])
            sampler = WaitSampler(db.libpq_url, str(db.name))
            try:
                target = Target(f"{workers}w", server)

                async def measure(target: Target = target, server: Server = server,
                                  sampler: WaitSampler = sampler) -> tuple:
                    await target.run_level(n, args.warmup, 0.0)  # pools and caches warm
                    # No requests for a while: what the processes cost by themselves (each
                    # worker's refitter, alert and outbox pollers), per second.
                    pids, backends = tree_pids(server.proc.pid), sampler.backend_pids()
                    idle0, pg_idle0 = cpu_seconds(pids), cpu_seconds(backends)
                    await asyncio.sleep(IDLE_SECONDS)
                    idle = cpu_delta(idle0, cpu_seconds(pids)) / IDLE_SECONDS
                    pg_idle = cpu_delta(pg_idle0, cpu_seconds(backends)) / IDLE_SECONDS
                    for tr in target.trainers:  # the server closed idle keep-alives by now
                        tr.conn.close()
                    pids = tree_pids(server.proc.pid)
                    cpu0, pg0 = cpu_seconds(pids), cpu_seconds(sampler.backend_pids())
                    pre0 = preemptions(pids)
                    sampler.start()
                    t0 = time.perf_counter()
                    level = await target.run_level(n, args.seconds, 0.0)
                    waits = sampler.stop(time.perf_counter() - t0)
                    after = tree_pids(server.proc.pid)
                    cpu = cpu_delta(cpu0, cpu_seconds(after))
                    pre = sum(v - pre0.get(p, 0) for p, v in preemptions(after).items())
                    pg = cpu_delta(pg0, cpu_seconds(sampler.backend_pids()))
                    for tr in target.trainers:
                        tr.conn.close()
                    return (level, waits, cpu, pg, idle * args.seconds, pg_idle * args.seconds,
                            pre)

                level, waits, cpu, pg, idle, pg_idle, pre = asyncio.run(measure())
            finally:
                sampler.stop(1.0)
                sampler.close()
                server.stop()
                db.drop()
            k = 1000 / max(1, level.sent)
            row = {"sent": level.sent, "p50": level.p50, "p99": level.p99,
                   "errors": level.errors, "cpu": cpu * k, "pg": pg * k,
                   "net": (cpu - idle) * k, "pg_net": (pg - pg_idle) * k, "idle": idle * k,
                   "pre": pre / max(1, level.sent),
                   "lock": lock_wait(waits) * k, "wal": wal_wait(waits) * k,
                   "load": os.getloadavg()[0]}  # fmt: skip
            rows[workers].append(row)
            print(f"  round {rnd + 1}, {workers} worker(s): {level.sent} requests, p50 "
                  f"{level.p50:.1f} ms, p99 {level.p99:.1f} ms, {level.errors} errors; per 1,000 "
                  f"requests: server CPU {row['cpu']:.2f} s ({row['idle']:.2f} s of it the "
                  f"processes' idle cost), PostgreSQL CPU {row['pg']:.2f} s, "
                  f"lock waits {row['lock']:.3f} s, WAL flush waits {row['wal']:.3f} s; server "
                  f"processes preempted {row['pre']:.2f} times a request; "
                  f"load average {row['load']:.1f}", flush=True)  # fmt: skip

    def rng(w: int, key: str, fmt: str) -> str:
        xs = [r[key] for r in rows[w]]
        return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}-{max(xs):{fmt}})"

    def med(w: int, key: str) -> float:
        return statistics.median(r[key] for r in rows[w])

    base, base_net = med(counts[0], "cpu"), med(counts[0], "net")
    print(f"\n{'workers':>7}  {'server CPU s/1k req':>22}  {'x':>5}  {'net of idle s/1k':>22}  "
          f"{'x':>5}  {'PostgreSQL CPU s/1k':>20}  {'PG net of idle':>20}  "
          f"{'lock wait s/1k':>20}  {'WAL wait s/1k':>20}  {'preempted/req':>16}")  # fmt: skip
    for w in counts:
        print(f"{w:>7}  {rng(w, 'cpu', '.2f'):>22}  {med(w, 'cpu') / base:>5.2f}  "
              f"{rng(w, 'net', '.2f'):>22}  {med(w, 'net') / base_net:>5.2f}  "
              f"{rng(w, 'pg', '.2f'):>20}  {rng(w, 'pg_net', '.2f'):>20}  "
              f"{rng(w, 'lock', '.3f'):>20}  {rng(w, 'wal', '.3f'):>20}  "
              f"{rng(w, 'pre', '.2f'):>16}")  # fmt: skip
    print(f"x: ratio to {counts[0]} worker(s). 'net of idle': minus what the processes cost with "
          f"no requests ({IDLE_SECONDS:g} s measured before each level; a fixed cost per "
          "process, not per request).")  # fmt: skip
    print("This is a PROXY, not a throughput measurement: median (range) over rounds. A ratio "
          "near 1.00 (CPU per request independent of the worker count) and lock waits that do "
          "not grow with it mean the work has no shared bottleneck in the server, so N workers "
          "on N free cores would serve ~N times the load, until PostgreSQL's own CPU (shown) "
          "or its WAL flushes become the limit.")  # fmt: skip
