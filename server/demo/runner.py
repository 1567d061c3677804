"""`scalewatch serve --demo`: simulated trainers in a thread of the server process.

They post over HTTP through the real trainer client (not into the store), so the demo
exercises the same path as a real trainer: spool, batching, auth, ingest, refit, alerts.
With auth on, the demo gives itself a write token through the store (revoking the one of the
previous start, so restarts do not pile up tokens).

Idempotent across restarts: runs are looked up by name; finished ones are skipped, unfinished
ones resume after the server's last stored step (their trajectory is deterministic, so nothing
is duplicated and nothing changes value).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import warnings
from pathlib import Path

import numpy as np

from scalewatch.server.config import Settings
from scalewatch.server.demo import api
from scalewatch.server.demo.presets import DEMO_PROJECT, PRESETS, demo_runs
from scalewatch.server.demo.realruns import post_real_runs
from scalewatch.server.demo.simulator import SimRun, drive, open_run
from scalewatch.server.store.base import TokenStore

log = logging.getLogger("scalewatch.demo")

TOKEN_NAME = "demo-trainer"
# The run whose data mix changes starts this many evaluations before the change, so a visitor
# sees its alert open within a few minutes although the demo's pace is slow.
DROP_LEAD_EVALS = 4


def demo_bursts(sims: list[SimRun], burst: float) -> list[float]:
    """Each run's burst: `burst` of its evaluations at once, but a run with a data-mix change
    up to DROP_LEAD_EVALS evaluations before it (so the alert comes early in the demo)."""
    out = []
    for sim in sims:
        b = burst
        if sim.recipe.drop is not None:
            change = int(np.searchsorted(sim.traj.eval_compute, sim.recipe.drop.at))
            b = max(b, max(0, change - DROP_LEAD_EVALS) / sim.traj.n_chunks)
        out.append(b)
    return out


def local_url(settings: Settings) -> str:
    """Where this process itself listens (a wildcard bind is reached over loopback)."""
    host = settings.host
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


class _ShutdownNoise(logging.Filter):
    """Drops the demo clients' "connection refused" retries: the in-process server refuses
    connections from the moment it starts shutting down, before the demo is stopped, and what
    was not delivered is replayed from the demo spool on the next start anyway."""

    def __init__(self, spool_root: Path) -> None:
        super().__init__()
        self.spool_root = str(spool_root)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not ("Connection refused" in msg and self.spool_root in msg)


def demo_token(store: TokenStore) -> str:
    """A fresh write token for the simulated trainers; earlier demo tokens are revoked."""
    for t in store.list_tokens():
        if t.name == TOKEN_NAME and not t.revoked:
            store.revoke_token(t.id)
    _, token = store.create_token(TOKEN_NAME, "write")
    return token


class DemoWorker:
    """The demo thread; ``stop()`` leaves unfinished runs resumable (their spool keeps what
    the stopping server no longer accepted)."""

    def __init__(self, settings: Settings, store: TokenStore | None = None) -> None:
        self.settings = settings
        self.store = store
        self.url = local_url(settings)
        self.home = Path(settings.home) / "demo"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        self.sims: list[SimRun] = []
        self.done = threading.Event()

    def start(self) -> DemoWorker:
        logging.getLogger("scalewatch").addFilter(_ShutdownNoise(self.home))
        self._thread = threading.Thread(target=self._main, name="scalewatch-demo", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # ---- the thread --------------------------------------------------------------------------
    def _claim(self) -> bool:
        """One demo per home, even with `serve --workers N` (every worker runs the lifespan)."""
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.home / "demo.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def _main(self) -> None:
        try:
            if not self._claim():
                log.info("demo: another server process runs the demo")
                return
            self._run()
        except Exception:  # noqa: BLE001 - the demo must never take the server down
            log.exception("demo failed")
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the flock
            self.done.set()

    def _run(self) -> None:
        token = demo_token(self._store()) if self.settings.auth else None
        if not api.wait_healthy(self.url, 120.0, self._stop):
            if not self._stop.is_set():
                log.error("demo: the server at %s did not become healthy", self.url)
            return
        api.ensure_alert_rules(self.url, token, DEMO_PROJECT)
        existing = api.existing_runs(self.url, token, DEMO_PROJECT)
        for live in demo_runs():
            sim = open_run(PRESETS[live.key], self.url, token, DEMO_PROJECT, live.seed,
                           name=live.name, existing=existing, home=self.home, group=live.group)
            if sim is not None:
                self.sims.append(sim)
        # The finished real runs go in on the side: the live bursts come first.
        real = threading.Thread(target=self._post_real, args=(token,),
                                name="scalewatch-demo-real", daemon=True)
        real.start()
        # print, like `serve`'s own start-up lines: uvicorn leaves app loggers unconfigured.
        if not self.sims:
            print(f"scalewatch demo: every run of project {DEMO_PROJECT!r} is finished already "
                  "(delete them to replay the demo)", flush=True)
            real.join(60.0)
            return
        print(f"scalewatch demo: {len(self.sims)} simulated runs live in project "
              f"{DEMO_PROJECT!r} (one evaluation every {1 / self.settings.demo_speed:.3g} s "
              "each, "
              f"{self.settings.demo_burst:.0%} of each budget at once)", flush=True)
        completed = drive(self.sims, self.settings.demo_speed, self._stop,
                          burst=demo_bursts(self.sims, self.settings.demo_burst))
        if completed:
            print("scalewatch demo: all simulated runs reached their target compute", flush=True)
        else:
            self._leave_resumable()
        real.join(5.0)

    def _store(self) -> TokenStore:
        if self.store is None:
            from scalewatch.server.db.engine import make_engine
            from scalewatch.server.store import SqlStore

            self.store = SqlStore(make_engine(self.settings))
        return self.store

    def _post_real(self, token: str | None) -> None:
        try:
            from scalewatch.server.demo.realruns import REAL_PROJECT

            existing = api.existing_runs(self.url, token, REAL_PROJECT)
            posted = post_real_runs(self.url, token, existing, home=self.home)
            if posted:
                log.info("demo: posted %d finished Deep-GRPO runs", len(posted))
        except Exception:  # noqa: BLE001
            log.exception("demo: posting the real runs failed")

    def _leave_resumable(self) -> None:
        # Flush without a status (the run is not finished). The server is shutting down, so
        # what it no longer accepts stays in the spool and is replayed on the next start.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            threads = [
                threading.Thread(target=s.run.finish, kwargs={"timeout": 2.0, "status": ""})
                for s in self.sims if not s.done
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(5.0)


def start_demo(settings: Settings, store: TokenStore | None = None) -> DemoWorker:
    """Start the demo thread; the returned worker has ``stop()`` like the other workers."""
    return DemoWorker(settings, store).start()
