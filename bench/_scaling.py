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


def cluster_cpu(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL cluster so far: its live processes, and the backends that
    have exited (the postmaster's reaped children: a pool that opens and closes connections
    under load loses no backend's CPU this way). Every database of the cluster counts."""
    try:
        raw = Path(f"/proc/{postmaster}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()
    reaped = (int(fields[13]) + int(fields[14])) / TICK
    return reaped + sum(cpu_seconds(tree_pids(postmaster)).values())


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

    def postmaster(self) -> int:
        pid = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        st = _stat(pid)
        return st[0] if st is not None else pid

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


class CpuQuota:
    """A cgroup (v1 `cpu` controller, or v2 with `cpu` enabled) capping the processes moved
    into it at `cores` CPUs in total (CFS quota): a server's CPU budget, scaled down."""

    def __init__(self, cores: float) -> None:
        v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
        period = 100_000
        if (v1 / "cpu.cfs_quota_us").exists():
            self.dir = v1 / f"scalewatch-bench-{os.getpid()}-{time.monotonic_ns()}"
            self.dir.mkdir()
            (self.dir / "cpu.cfs_period_us").write_text(str(period))
            (self.dir / "cpu.cfs_quota_us").write_text(str(int(cores * period)))
        elif "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
            self.dir = v2 / f"scalewatch-bench-{os.getpid()}-{time.monotonic_ns()}"
            self.dir.mkdir()
            (self.dir / "cpu.max").write_text(f"{int(cores * period)} {period}")
        else:
            raise SystemExit("--cpu-quota needs a cgroup cpu controller this process can write")

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            (self.dir / "cgroup.procs").write_text(str(pid))

    def throttled(self) -> float:
        """Seconds the group's processes have been held back by the quota so far."""
        for line in (self.dir / "cpu.stat").read_text().splitlines():
            k, v = line.split()
            if k == "throttled_time":
                return int(v) / 1e9
            if k == "throttled_usec":
                return int(v) / 1e6
        return 0.0

    def remove(self) -> None:
        deadline = time.monotonic() + 15  # empty once the server's processes have exited
        while True:
            try:
                self.dir.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def pinned_server(database_url: str, workers: int, cores: set[int] | None) -> Any:
    """`serve --workers N` whose processes (and their threads) may run on `cores` alone: the
    affinity this thread has when it starts the server is inherited by every process it forks."""
    from bench._common import Server

    mask = os.sched_getaffinity(0)
    if cores:
        os.sched_setaffinity(0, cores)
    try:
        return Server(database_url, extra_args=["--workers", str(workers)])
    finally:
        os.sched_setaffinity(0, mask)


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
    cores = sorted(os.sched_getaffinity(0))
    saturate = bool(getattr(args, "saturate", False))
    quota = getattr(args, "cpu_quota", None)  # cores a worker, or None: pin to whole cores
    interval = 0.0 if saturate else 1.0
    if saturate and quota is None and max(counts) > len(cores):
        raise SystemExit(f"--saturate pins one core a worker: at most {len(cores)} here")
    random.seed(1)
    if saturate:
        budget = (f"the server's processes capped at {quota:g} core a worker (cgroup CPU quota: "
                  f"N workers get N x {quota:g} cores)" if quota else
                  "server of N workers pinned to N cores")  # fmt: skip
        print(f"SATURATION, {len(cores)} cores here: {n} trainers a worker posting back to back, "
              f"{budget}, load generator and PostgreSQL unpinned (they share every core); "
              f"{args.seconds:g} s measured after {args.warmup:g} s of warm-up, "
              f"{args.rounds} round(s)")  # fmt: skip
    else:
        print(f"PROXY for --workers scaling ({os.cpu_count()} cores here: throughput cannot "
              f"scale past them): {n} trainers x 1 request/s (fixed offered load), "
              f"{args.seconds:g} s measured after {args.warmup:g} s of warm-up, "
              f"{args.rounds} round(s)")  # fmt: skip
    rows: dict[int, list[dict[str, float]]] = {w: [] for w in counts}
    for rnd in range(args.rounds):
        for workers in counts if rnd % 2 == 0 else counts[::-1]:
            db = TempDatabase("postgresql")
            pin = set(cores[:workers]) if saturate and not quota else None
            server = pinned_server(db.url, workers, pin)
            group: CpuQuota | None = None
            sampler = WaitSampler(db.libpq_url, str(db.name))
            try:
                if saturate and quota:
                    group = CpuQuota(quota * workers)
                    group.add(tree_pids(server.proc.pid))  # the fit pools it forks later follow
                postmaster = sampler.postmaster()
                target = Target(f"{workers}w", server)
                per = n * workers if saturate else n  # --saturate: the same in flight a worker

                async def measure(target: Target = target, server: Server = server,
                                  sampler: WaitSampler = sampler, postmaster: int = postmaster,
                                  group: CpuQuota | None = group, per: int = per) -> tuple:
                    await target.run_level(per, args.warmup, 0.0, interval)  # pools, caches
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
                    pre0, cl0 = preemptions(pids), cluster_cpu(postmaster)
                    thr0 = group.throttled() if group is not None else 0.0
                    sampler.start()
                    t0, own0 = time.perf_counter(), time.process_time()
                    level = await target.run_level(per, args.seconds, 0.0, interval)
                    own = time.process_time() - own0  # the load generator (and the sampler)
                    waits = sampler.stop(time.perf_counter() - t0)
                    after = tree_pids(server.proc.pid)
                    cpu = cpu_delta(cpu0, cpu_seconds(after))
                    pre = sum(v - pre0.get(p, 0) for p, v in preemptions(after).items())
                    pg = cpu_delta(pg0, cpu_seconds(sampler.backend_pids()))
                    if saturate:  # backends come and go under saturation: the whole cluster
                        pg = cluster_cpu(postmaster) - cl0
                    thr = (group.throttled() - thr0) if group is not None else 0.0
                    for tr in target.trainers:
                        tr.conn.close()
                    return (level, waits, cpu, pg, idle * args.seconds, pg_idle * args.seconds,
                            pre, own, thr)

                level, waits, cpu, pg, idle, pg_idle, pre, own, thr = asyncio.run(measure())
            finally:
                sampler.stop(1.0)
                sampler.close()
                server.stop()
                if group is not None:
                    group.remove()
                db.drop()
            k = 1000 / max(1, level.sent)
            row = {"sent": level.sent, "p50": level.p50, "p99": level.p99,
                   "errors": level.errors, "cpu": cpu * k, "pg": pg * k,
                   "net": (cpu - idle) * k, "pg_net": (pg - pg_idle) * k, "idle": idle * k,
                   "pre": pre / max(1, level.sent),
                   "lock": lock_wait(waits) * k, "wal": wal_wait(waits) * k,
                   "load": os.getloadavg()[0], "rps": level.sent / args.seconds,
                   "busy": cpu / args.seconds, "gen": own * k,
                   "throttled": thr / args.seconds}  # fmt: skip
            # What the whole pipeline could reach if it had every core here and nothing else ran.
            row["bound"] = len(cores) * 1000 / (row["cpu"] + row["pg"] + row["gen"])
            rows[workers].append(row)
            if saturate:
                where = (f"capped at {quota * workers:g} cores" if quota else
                         f"on core(s) {','.join(map(str, cores[:workers]))}")  # fmt: skip
                print(f"  round {rnd + 1}, {workers} worker(s) {where}: {row['rps']:.0f} req/s, "
                      f"server {row['busy']:.2f} cores busy, p50 {level.p50:.1f} ms, "
                      f"{level.errors} errors; per 1,000 requests: server CPU {row['cpu']:.2f} s, "
                      f"PostgreSQL {row['pg']:.2f} s, load generator {row['gen']:.2f} s "
                      f"(pipeline bound on {len(cores)} cores: {row['bound']:.0f} requests/s); "
                      f"lock waits {row['lock']:.3f} s; throttled {row['throttled']:.2f} s/s; "
                      f"load average {row['load']:.1f}", flush=True)  # fmt: skip
                continue
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
    if saturate:
        base_rps = med(counts[0], "rps")
        print(f"\n{'workers':>7}  {'requests/s':>18}  {'x':>5}  {'server cores busy':>18}  "
              f"{'server CPU s/1k':>18}  {'x':>5}  {'PostgreSQL s/1k':>18}  "
              f"{'generator s/1k':>18}  {'pipeline bound/s':>18}  {'of bound':>8}")  # fmt: skip
        for w in counts:
            print(f"{w:>7}  {rng(w, 'rps', '.0f'):>18}  {med(w, 'rps') / base_rps:>5.2f}  "
                  f"{rng(w, 'busy', '.2f'):>18}  {rng(w, 'cpu', '.2f'):>18}  "
                  f"{med(w, 'cpu') / base:>5.2f}  {rng(w, 'pg', '.2f'):>18}  "
                  f"{rng(w, 'gen', '.2f'):>18}  {rng(w, 'bound', '.0f'):>18}  "
                  f"{med(w, 'rps') / med(w, 'bound'):>8.2f}")  # fmt: skip
        print(f"x: ratio to {counts[0]} worker(s), median (range) over rounds. pipeline bound: "
              f"{len(cores)} cores / (server + PostgreSQL + load generator CPU a request), the "
              "most this machine could serve with nothing else running.")  # fmt: skip
        if quota:
            print(f"Each worker has {quota:g} core of CPU budget (cgroup quota on the server's "
                  "processes), the rest of the machine is left to PostgreSQL and the load "
                  "generator: x is requests/s scaling with the worker count at that budget, "
                  "measured; it says nothing about a worker on a whole core, nor about "
                  "PostgreSQL's own scaling past this machine.")  # fmt: skip
        else:
            print("Workers are pinned, PostgreSQL and the load generator are not: past one "
                  "worker they compete with the server for the same cores, so requests/s "
                  "cannot show N-core scaling here; constant server CPU a request and a rate "
                  "near the pipeline bound say the server adds no shared bottleneck of its "
                  "own.")  # fmt: skip
        return
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
