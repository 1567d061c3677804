"""The run object: non-blocking ``log()``, a spool writer thread and a sender thread.

Data path of one point::

    run.log()  --deque.append-->  writer thread  --batch file (fsync)-->  spool dir
                                                                            |
    server  <--gzip POST /api/v1/runs/{id}/points (keep-alive)--  sender thread
                                      acknowledged -> batch file deleted

* ``log()`` validates its arguments and appends one tuple to a ``collections.deque``; it takes no
  lock, does no I/O and formats nothing. Bad argument types or values raise ``TypeError`` /
  ``ValueError`` at once (programming errors); NaN and infinite metric values are dropped with
  one rate-limited ``logging`` warning.
* The writer thread wakes every 0.2 s (``SCALEWATCH_SPOOL_INTERVAL``; at once when 1,000 points
  are queued), moves the queue into batch files of at most 1,000 points each and wakes the
  sender. Memory is bounded by what arrives in 0.2 s: the queue is always spilled to disk,
  whatever the network does. A SIGKILL of the trainer can lose only points logged in that last
  interval; ``run.flush()`` (e.g. when you save a checkpoint) puts everything logged so far on
  disk, so a trainer that resumes from its checkpoint and redoes later steps loses nothing.
  Only if the disk itself fails do points stay in memory (warning); past
  ``MAX_MEMORY_POINTS`` the oldest are dropped with an error that gives the count.
* The sender thread takes the spool's lock (one sender per run at a time, across processes),
  registers the run (``POST /api/v1/runs``; create-or-get, so a restarted trainer resumes its
  run), then sends batch files in order once 1,000 points are waiting or the oldest is 1 s old,
  merging small files (at most 1,000 points per request), over one keep-alive connection.
  Network errors, 408, 429 (honouring ``Retry-After``) and 5xx are retried with exponential
  backoff and full jitter (capped at 30 s). 401/403 keep the batches in the spool and retry
  slowly (a wrong token must not destroy data; fix the token and ``scalewatch sync``). 404
  re-registers the run once. Any other 4xx (e.g. 422, 413) is permanent: a request merged from
  several spool files is re-sent file by file once (so one bad batch does not take good ones
  down with it), then the refused batch is moved to ``rejected/`` in the spool, logged once per
  status, and sending goes on - never retried.
* Nothing raises into the trainer for network or server trouble.
* ``finish(timeout=30)`` flushes; whatever the server has not acknowledged by then stays in the
  spool, and a ``RuntimeWarning`` gives the count and the path. It is replayed by the next
  ``init`` of the same project+name or by ``scalewatch sync``. ``finish`` also runs at
  interpreter exit (``atexit``, ``SCALEWATCH_EXIT_TIMEOUT`` seconds, default 10).
* After ``os.fork()`` the child starts with an empty queue and no threads; they are started
  again on its first ``log()`` (the parent keeps sending what the parent logged).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import tempfile
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import journal as _journal
from ._http import (
    Connection,
    TransportError,
    backoff_delay,
    is_retryable_status,
    parse_retry_after,
)
from .compute import ComputeMeter
from .spool import Spool, _pid_alive

__all__ = ["Run", "init", "DEFAULT_URL"]

logger = logging.getLogger("scalewatch")

DEFAULT_URL = "http://127.0.0.1:8765"
BATCH_POINTS = 1000  # points per spool file (and per request from live logging)
MAX_REQUEST_POINTS = 1000  # small spool files are merged into requests of <= 1,000 points
MAX_REQUEST_FILES = 50
FLUSH_INTERVAL = 1.0  # a request goes out when 1,000 points are spooled or the oldest is 1 s old
# The writer spools the in-memory queue this often (SIGKILL of the trainer loses at most this
# much of what was logged; call run.flush() at checkpoints to close even that window).
SPOOL_INTERVAL = max(0.01, float(os.environ.get("SCALEWATCH_SPOOL_INTERVAL", "0.2") or 0.2))
MAX_MEMORY_POINTS = 2_000_000  # only reachable if the spool disk fails
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 300.0
MODES = ("online", "offline")
# Server limits (server/limits.py), checked in log() so a bad point fails at the call site
# instead of getting a whole batch rejected later.
MAX_METRICS_PER_POINT = 100
MAX_NAME_LENGTH = 200
MAX_STEP = 2**62

_RUNS: weakref.WeakSet[Run] = weakref.WeakSet()


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class _RateLimitedWarning:
    """Log a warning at most once per ``period`` seconds, with the count since the last one."""

    def __init__(self, template: str, period: float = 60.0):
        self.template = template
        self.period = period
        self.count = 0
        self.next_at = 0.0

    def hit(self, **kw: Any) -> None:
        self.count += 1
        now = time.monotonic()
        if now >= self.next_at:
            self.next_at = now + self.period
            logger.warning(self.template.format(count=self.count, **kw))
            self.count = 0


def _check_name(label: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{label} must be a non-empty string, got {value!r}")
    return value


def _bad_name(k: Any) -> None:
    if not isinstance(k, str):
        raise TypeError(f"metric names must be strings, got {type(k).__name__}")
    if not k or len(k) > MAX_NAME_LENGTH or "\x00" in k:
        raise ValueError(f"metric names must have 1..{MAX_NAME_LENGTH} characters, got {k!r}")


def _to_float(key: str, v: Any) -> float:
    """Slow path of ``log()`` for values that are not plain floats."""
    if type(v) is int:
        return float(v)
    if isinstance(v, (str, bytes, bytearray)) or v is None:
        raise TypeError(f"metric {key!r}: value must be a real number, got {type(v).__name__}")
    try:
        return float(v)  # bool, numpy scalars, 0-d tensors, Decimal, Fraction ...
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"metric {key!r}: value must be a real number, got {type(v).__name__}"
        ) from exc


def _to_step(step: Any) -> int:
    if isinstance(step, bool):
        raise TypeError("step must be an int, got bool")
    try:
        s = step.__index__()  # int subclasses, numpy integers
    except AttributeError:
        raise TypeError(f"step must be an int, got {type(step).__name__}") from None
    if s < 0 or s > MAX_STEP:
        raise ValueError(f"step must be in [0, 2**62], got {s}")
    return s


def _to_compute(compute: Any) -> float:
    if isinstance(compute, ComputeMeter):
        c = compute.value
    elif isinstance(compute, (str, bytes, bool)):
        raise TypeError(f"compute must be a number or a ComputeMeter, got {type(compute).__name__}")
    elif callable(compute):
        c = compute()
    else:
        try:
            c = float(compute)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"compute must be a number or a ComputeMeter, got {type(compute).__name__}"
            ) from exc
    c = float(c)
    if not math.isfinite(c) or c < 0:
        raise ValueError(f"compute must be a finite number >= 0, got {c!r}")
    return c


MAX_CONFIG_BYTES = 256 * 1024


def _json_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy of ``config`` the server accepts (objects -> str, NaN/inf -> None).

    A config larger than the server's 256 KiB limit is cut down to its top-level scalars
    (with a warning) rather than letting the run registration fail.
    """

    def clean(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k).replace("\x00", ""): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple, set, frozenset)):
            return [clean(x) for x in v]
        if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
            return v.replace("\x00", "") if isinstance(v, str) else v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        try:
            f = float(v)  # numpy scalars
            return f if math.isfinite(f) else None
        except (TypeError, ValueError):
            return str(v).replace("\x00", "")

    out = clean(config)
    if len(json.dumps(out)) > MAX_CONFIG_BYTES:
        logger.warning("scalewatch: config is larger than 256 KiB; only its top-level scalars "
                       "are sent")
        out = {k: v for k, v in out.items()
               if isinstance(v, (int, float, str, bool)) or v is None}
        out = {k: (v[:1000] if isinstance(v, str) else v) for k, v in out.items()}
        out["_scalewatch_truncated"] = True
    return out


def dedupe_points(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Last write wins per (step, metric) inside one request, keeping order.

    A later point at the same step takes over the metrics it repeats; an earlier point left with
    no metric is dropped. (An upsert of the same key twice in one statement is an error on some
    databases.)
    """
    latest: dict[tuple[int, str], int] = {}
    for i, p in enumerate(points):
        for m in p["metrics"]:
            latest[(p["step"], m)] = i
    if len(latest) == sum(len(p["metrics"]) for p in points):
        return points
    out = []
    for i, p in enumerate(points):
        keep = {m: v for m, v in p["metrics"].items() if latest[(p["step"], m)] == i}
        if keep:
            out.append(p if len(keep) == len(p["metrics"]) else {**p, "metrics": keep})
    return out


class Run:
    """One training run. Create it with :func:`init`."""

    def __init__(
        self,
        project: str,
        name: str,
        config: Mapping[str, Any] | None = None,
        target_compute: float | None = None,
        compute_unit: str = "gpu_hours",
        url: str | None = None,
        token: str | None = None,
        mode: str | None = None,
        tags: list[str] | None = None,
        fit_metric: str | None = None,
        home: str | os.PathLike | None = None,
        timeout: float | None = None,
        meter: ComputeMeter | None = None,
    ):
        self.project = _check_name("project", project)
        self.name = _check_name("name", name)
        mode = mode or os.environ.get("SCALEWATCH_MODE") or "online"
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.url = (url or os.environ.get("SCALEWATCH_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("SCALEWATCH_TOKEN") or None
        self.timeout = timeout if timeout is not None else _env_float("SCALEWATCH_HTTP_TIMEOUT", 10)
        if config is not None and not isinstance(config, Mapping):
            raise TypeError("config must be a mapping")
        if tags is not None and (
            isinstance(tags, str) or not all(isinstance(t, str) for t in tags)
        ):
            raise TypeError("tags must be a list of strings")
        if target_compute is not None:
            target_compute = _to_compute(target_compute)
        self.meter = meter
        self._meta: dict[str, Any] = {
            "project": self.project,
            "name": self.name,
            "compute_unit": compute_unit,
        }
        if config is not None:
            self._meta["config"] = _json_config(config)
        if tags is not None:
            if len(tags) > 50 or any(not t or len(t) > 100 or "\x00" in t for t in tags):
                raise ValueError("tags: at most 50 non-empty strings of <= 100 characters")
            self._meta["tags"] = list(tags)
        if target_compute is not None:
            self._meta["target_compute"] = target_compute
        if fit_metric is not None:
            self._meta["fit_metric"] = _check_name("fit_metric", fit_metric)

        self.spool = Spool(home, self.project, self.name)
        meta = {**self._meta, "mode": self.mode, "url": self.url}
        try:
            self.spool.write_meta(meta)
        except OSError as exc:  # unwritable home: fall back to a temp dir, don't crash
            fallback = Path(tempfile.gettempdir()) / f"scalewatch-{os.getuid()}"
            logger.error("scalewatch: cannot write the spool under %s (%s); using %s",
                         self.spool.home, exc, fallback)
            self.spool = Spool(fallback, self.project, self.name)
            with contextlib.suppress(OSError):
                self.spool.write_meta(meta)
        self.spool.cleanup_tmp()
        try:  # points a killed process had logged but not yet spooled
            _journal.recover_into(self.spool, _pid_alive)
        except OSError as exc:
            logger.error("scalewatch: cannot recover journals in %s: %s", self.spool.dir, exc)
        self._journal = _journal.Journal(self.spool.dir) if _journal.enabled() else None

        self._run_id: int | None = None
        self._last_compute: float | None = None
        self._finished = False
        self._lost = 0
        self._nonfinite = _RateLimitedWarning(
            "scalewatch: dropped {count} NaN/inf metric value(s) (last: {key!r} at step {step})"
        )
        self._logged_status: set[Any] = set()
        self._api_lock = threading.Lock()
        self._reset_state()
        self._start_threads()
        _RUNS.add(self)
        atexit.register(self._atexit)

    # -- threads ---------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._q: deque = deque()
        self._jfd: int | None = None  # the journal generation log() appends to
        self._wake_writer = threading.Event()
        self._wake_sender = threading.Event()
        self._abort = threading.Event()
        self._writer_stop = False
        self._sender_stop = False
        self._drains = 0
        self._drain_cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._sender: threading.Thread | None = None
        self._started = False

    def _start_threads(self) -> None:
        self._started = True
        if self._journal is not None and self._jfd is None:
            self._jfd = self._journal.open()
        tag = f"{self.project}/{self.name}"
        self._writer = threading.Thread(
            target=self._writer_loop, name=f"scalewatch-spool[{tag}]", daemon=True
        )
        self._writer.start()
        if self.mode == "online":
            self._sender = threading.Thread(
                target=self._sender_loop, name=f"scalewatch-send[{tag}]", daemon=True
            )
            self._sender.start()

    def _after_fork_in_child(self) -> None:
        # The parent's threads do not exist here; the queue content belongs to the parent
        # (it will spool and send it). Start fresh, lazily, on the child's first log().
        fd, self.spool._lock_fd = self.spool._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._api_lock = threading.Lock()
        if self._journal is not None:
            self._journal.forget()
        self._reset_state()

    # -- public API ------------------------------------------------------------------------
    @property
    def id(self) -> int | None:
        """Server id of the run, once registered (None before, and in offline mode)."""
        return self._run_id

    @property
    def spool_dir(self) -> str:
        return str(self.spool.dir)

    def log(self, metrics: Mapping[str, Any], step: int, compute: Any = None) -> None:
        """Queue ``metrics`` (name -> number) at ``step``. Never blocks, never does I/O.

        ``compute`` is a number (in the run's ``compute_unit``) or a :class:`ComputeMeter`;
        if omitted, the run's ``meter`` is read, else the last compute passed to ``log``.
        Raises TypeError/ValueError for bad arguments and RuntimeError after ``finish()``.
        """
        if self._finished:
            raise RuntimeError(f"scalewatch run {self.project}/{self.name} is finished")
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a dict, got {type(metrics).__name__}")
        if type(step) is not int or step < 0 or step > MAX_STEP:
            step = _to_step(step)
        if len(metrics) > MAX_METRICS_PER_POINT:
            raise ValueError(f"at most {MAX_METRICS_PER_POINT} metrics per log() call")
        if type(compute) is not float or compute < 0.0 or compute - compute != 0.0:
            if compute is None:
                compute = self.meter.value if self.meter is not None else self._last_compute
                if compute is None:
                    raise ValueError("compute is required (pass compute= or init(meter=...))")
            else:
                compute = _to_compute(compute)
        out = {}
        for k, v in metrics.items():
            if type(k) is not str or not k or len(k) > MAX_NAME_LENGTH or "\x00" in k:
                _bad_name(k)
            if type(v) is not float:
                v = _to_float(k, v)
            if v - v != 0.0:  # NaN or +-inf
                self._nonfinite.hit(key=k, step=step)
                continue
            out[k] = v
        self._last_compute = compute
        if out:
            t = time.time()
            jfd = self._jfd
            if jfd is not None:  # write-ahead: on disk (page cache) before log() returns
                try:
                    os.write(jfd, _journal.encode(step, compute, out, t))
                except OSError as exc:
                    self._jfd = None
                    logger.error("scalewatch: journal write failed (%s); points are kept in "
                                 "memory and the spool only", exc)
            q = self._q
            q.append((step, compute, out, t))
            if len(q) >= BATCH_POINTS and not self._wake_writer.is_set():
                self._wake_writer.set()
            if not self._started:
                self._start_threads()

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Block until everything logged so far is in the on-disk spool (not necessarily sent).

        Returns False if that did not happen within ``timeout`` seconds.
        """
        if not self._started or self._writer is None or not self._writer.is_alive():
            self._drain_to_disk()
            return not self._q
        with self._drain_cond:
            target = self._drains + 2
            self._wake_writer.set()
            return self._drain_cond.wait_for(lambda: self._drains >= target, timeout)

    def finish(self, timeout: float = 30.0, status: str = "finished") -> int:
        """Flush and stop. Returns the number of points left unacknowledged in the spool.

        When everything was delivered, the run is marked ``status`` ("finished", or "failed"
        when the ``with`` block raised) so dashboards stop showing it as live. At interpreter
        exit only the flush happens: a crashed trainer is not "finished".
        """
        if self._finished:
            return 0
        self._finished = True
        deadline = time.monotonic() + max(0.0, timeout)
        writer, sender = self._writer, self._sender
        self._writer_stop = True
        self._wake_writer.set()
        if writer is not None and writer.is_alive():
            writer.join(max(0.0, deadline - time.monotonic()))
        if self._q:  # the writer could not finish in time: spool the rest from here
            self._drain_to_disk()
        if not self._q and self._journal is not None:  # everything is in batch files now
            self._jfd = None
            self._journal.close_and_remove()
        self._sender_stop = True
        self._wake_sender.set()
        if sender is not None and sender.is_alive():
            sender.join(max(0.0, deadline - time.monotonic()))
        self._abort.set()
        left = self.spool.pending_points()
        if self.mode == "offline":
            logger.info(
                "scalewatch: offline run %s/%s spooled at %s (%d points); upload with "
                "`scalewatch sync`", self.project, self.name, self.spool.dir, left,
            )
        elif left:
            warnings.warn(
                f"scalewatch: {left} point(s) of run {self.project}/{self.name} were not "
                f"acknowledged by {self.url}; they are kept in the spool at {self.spool.dir} and "
                "will be sent by the next init() of this run or by `scalewatch sync`.",
                RuntimeWarning,
                stacklevel=2,
            )
        elif sender is not None and not sender.is_alive() and self.spool.try_lock():
            try:
                self.spool.remove_if_done()
            finally:
                self.spool.unlock()
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        if status and not left and self.mode != "offline":
            self._set_status(status)
        return left

    def _set_status(self, status: str) -> None:
        """Best effort PATCH of the run's status; never raises."""
        run_id = self._run_id
        if run_id is None:
            return
        conn = Connection(self.url, self.token, timeout=min(self.timeout, 5.0))
        try:
            body = json.dumps({"status": status}).encode()
            conn.request("PATCH", f"/api/v1/runs/{run_id}", body=body,
                         headers={"Content-Type": "application/json"})
        except TransportError:
            pass
        finally:
            conn.close()

    def fit(self, metric: str | None = None) -> dict | None:
        """Latest fit of this run from the server (``GET /runs/{id}/fit``), or None."""
        r = self._api_get("/fit", {"metric": metric or self._meta.get("fit_metric")})
        return r if isinstance(r, dict) else None

    def alerts(self) -> list[dict]:
        """Open alerts of this run, or [] on any trouble."""
        if self.mode == "offline":
            return []
        run_id = self._ensure_registered_sync()
        if run_id is None:
            return []
        r = self._api_request("/api/v1/alerts", {"run": run_id, "state": "open"})
        if isinstance(r, dict) and isinstance(r.get("alerts"), list):
            return r["alerts"]
        return []

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.finish(status="failed" if exc_type is not None else "finished")

    def __repr__(self) -> str:
        return f"<scalewatch.Run {self.project}/{self.name} id={self._run_id} mode={self.mode}>"

    # -- synchronous API helpers (user thread, own connection) -----------------------------
    def _api_request(self, path: str, params: dict[str, Any]) -> Any:
        conn = Connection(self.url, self.token, timeout=min(self.timeout, 5.0))
        try:
            r = conn.get_json(path, params)
            if r.status != 200:
                return None
            return r.json()
        except (TransportError, ValueError):
            return None
        finally:
            conn.close()

    def _ensure_registered_sync(self) -> int | None:
        if self._run_id is not None:
            return self._run_id
        conn = Connection(self.url, self.token, timeout=min(self.timeout, 5.0))
        try:
            r = conn.post_json("/api/v1/runs", self._meta)
            if r.status in (200, 201):
                rid = int(r.json()["id"])
                self._run_id = rid
                return rid
        except (TransportError, ValueError, KeyError, TypeError):
            pass
        finally:
            conn.close()
        return None

    def _api_get(self, suffix: str, params: dict[str, Any]) -> Any:
        if self.mode == "offline":
            return None
        run_id = self._ensure_registered_sync()
        if run_id is None:
            return None
        return self._api_request(f"/api/v1/runs/{run_id}{suffix}", params)

    # -- writer ----------------------------------------------------------------------------
    def _writer_loop(self) -> None:
        while True:
            self._wake_writer.wait(SPOOL_INTERVAL)
            self._wake_writer.clear()
            stop = self._writer_stop
            try:
                self._drain_to_disk()
            except Exception:  # noqa: BLE001 - the thread must survive anything
                logger.exception("scalewatch: spool writer error")
            with self._drain_cond:
                self._drains += 1
                self._drain_cond.notify_all()
            if stop:
                return

    def _drain_to_disk(self) -> None:
        q = self._q
        wrote = False
        if q and self._journal is not None and self._jfd is not None:
            # New points go to a fresh generation; the ones being drained stay journaled
            # until two rotations later (Journal.rotate).
            self._jfd = self._journal.rotate()
        while q:
            batch = []
            try:
                while len(batch) < BATCH_POINTS:
                    batch.append(q.popleft())
            except IndexError:
                pass
            points = [{"step": s, "compute": c, "metrics": m, "time": t} for s, c, m, t in batch]
            try:
                self.spool.write_batch(points)
                wrote = True
            except OSError as exc:
                q.extendleft(reversed(batch))  # keep them; retry on the next wake-up
                logger.error("scalewatch: cannot write spool %s: %s", self.spool.dir, exc)
                excess = len(q) - MAX_MEMORY_POINTS
                if excess > 0:
                    for _ in range(excess):
                        q.popleft()
                    self._lost += excess
                    logger.error(
                        "scalewatch: spool unwritable and memory bound reached: dropped the %d "
                        "oldest points (%d in total)", excess, self._lost,
                    )
                break
        if wrote:
            self._wake_sender.set()

    # -- sender ----------------------------------------------------------------------------
    def _sleep(self, seconds: float) -> bool:
        """Interruptible sleep; True if the run was aborted meanwhile."""
        return self._abort.wait(seconds)

    def _log_once(self, key: Any, level: int, msg: str, *args: Any) -> None:
        if key not in self._logged_status:
            self._logged_status.add(key)
            logger.log(level, msg, *args)

    def _sender_loop(self) -> None:
        conn = Connection(self.url, self.token, timeout=self.timeout)
        try:
            Sender(self, conn).loop()
        except Exception:  # noqa: BLE001
            logger.exception("scalewatch: sender thread crashed; points stay in the spool")
        finally:
            conn.close()
            self.spool.unlock()

    def _atexit(self) -> None:
        with contextlib.suppress(Exception):
            self.finish(timeout=_env_float("SCALEWATCH_EXIT_TIMEOUT", 10.0), status="")


def _file_time(path: Any) -> float:
    try:
        return int(path.name.split("-", 1)[0]) / 1e9
    except (ValueError, IndexError):
        return 0.0


class Sender:
    """Ships a spool's batch files to the server. Used by the run thread and by ``sync``."""

    def __init__(
        self,
        run: Any,
        conn: Connection,
        max_failures: int | None = None,
    ):
        self.run = run  # a Run, or a sync stand-in with the same few attributes
        self.conn = conn
        self.spool: Spool = run.spool
        self.max_failures = max_failures  # consecutive failures before giving up (sync)
        self.attempt = 0
        self.failures = 0
        self.sent_points = 0
        self.sent_batches = 0
        self.rejected_batches = 0
        self.last_error: str | None = None
        self._reregistered = False

    def loop(self) -> None:
        """Send until the run is finished (or aborted) and the spool is empty."""
        run = self.run
        while not run._abort.is_set():
            if not self.spool.try_lock():
                if run._sender_stop or run._sleep(1.0):
                    return
                continue
            files = self.spool.batches()
            if not files:
                if run._sender_stop and (run._writer is None or not run._writer.is_alive()):
                    return
                run._wake_sender.wait(FLUSH_INTERVAL)
                run._wake_sender.clear()
                continue
            if not run._sender_stop and self.attempt == 0:
                # batch: wait for 1,000 points or until the oldest point is 1 s old
                age = time.time() - _file_time(files[0])
                if age < FLUSH_INTERVAL and sum(map(Spool.batch_size, files)) < BATCH_POINTS:
                    run._wake_sender.wait(FLUSH_INTERVAL - age)
                    run._wake_sender.clear()
                    continue
            self.step(files)
            if self.max_failures is not None and self.failures >= self.max_failures:
                return

    def _backoff(self, retry_after: float | None = None) -> None:
        delay = backoff_delay(self.attempt, BACKOFF_BASE, BACKOFF_CAP)
        if retry_after is not None:
            delay = max(delay, min(retry_after, RETRY_AFTER_CAP))
        self.attempt += 1
        self.failures += 1
        if self.max_failures is not None and self.failures >= self.max_failures:
            return
        self.run._sleep(delay)

    def register(self) -> bool:
        run = self.run
        try:
            r = self.conn.post_json("/api/v1/runs", run._meta)
        except TransportError as exc:
            self.last_error = str(exc)
            run._log_once(
                "register-net", logging.WARNING,
                "scalewatch: server %s unreachable (%s); points are spooled at %s and will be "
                "sent when it is back", run.url, exc, self.spool.dir,
            )
            self._backoff()
            return False
        if r.status in (200, 201):
            try:
                run._run_id = int(r.json()["id"])
            except (ValueError, KeyError, TypeError):
                self.last_error = f"bad run answer: {r.body[:200]!r}"
                self._backoff()
                return False
            self.attempt = 0
            self.failures = 0
            run._logged_status.discard("register-net")
            return True
        self.last_error = f"HTTP {r.status} on run registration: {r.body[:500]!r}"
        run._log_once(
            ("register", r.status), logging.ERROR,
            "scalewatch: server refused to create run %s/%s (HTTP %d: %s); points stay in %s",
            run.project, run.name, r.status, r.body[:500], self.spool.dir,
        )
        self._backoff(parse_retry_after(r.headers.get("retry-after")))
        return False

    def _read(self, files: list) -> tuple[list, list]:
        """Read up to MAX_REQUEST_POINTS points from the first files; quarantine corrupt ones."""
        used, points = [], []
        for f in files[:MAX_REQUEST_FILES]:
            if points and len(points) + Spool.batch_size(f) > MAX_REQUEST_POINTS:
                break
            try:
                pts = Spool.read_batch(f)
            except FileNotFoundError:
                continue  # sent and removed by another process
            except (OSError, ValueError) as exc:
                logger.error("scalewatch: corrupt spool batch %s (%s), moved aside", f, exc)
                self.spool.reject(f, f"corrupt: {exc}")
                continue
            used.append(f)
            points.extend(pts)
        return used, points

    def step(self, files: list) -> None:
        run = self.run
        if run._run_id is None and not self.register():
            return
        used, points = self._read(files)
        if not used:
            return
        self.send(used, dedupe_points(points))

    def send(self, used: list, points: list, split_ok: bool = True) -> None:
        run = self.run
        path = f"/api/v1/runs/{run._run_id}/points"
        try:
            r = self.conn.post_json(path, {"points": points}, compress=True)
        except (TransportError, ValueError) as exc:
            self.last_error = str(exc)
            run._log_once(
                "send-net", logging.WARNING,
                "scalewatch: sending to %s failed (%s); retrying with backoff, points stay in %s",
                run.url, exc, self.spool.dir,
            )
            self._backoff()
            return
        if 200 <= r.status < 300:
            for f in used:
                self.spool.remove(f)
            self.sent_points += sum(Spool.batch_size(f) for f in used)
            self.sent_batches += len(used)
            self.attempt = 0
            self.failures = 0
            self._reregistered = False
            run._logged_status.discard("send-net")
            return
        body = r.body[:2000].decode("utf-8", "replace")
        self.last_error = f"HTTP {r.status}: {body[:300]}"
        if is_retryable_status(r.status):
            run._log_once(
                ("retry", r.status), logging.WARNING,
                "scalewatch: server answered HTTP %d; retrying with backoff", r.status,
            )
            self._backoff(parse_retry_after(r.headers.get("retry-after")))
        elif r.status in (401, 403):
            run._log_once(
                ("auth", r.status), logging.ERROR,
                "scalewatch: server refused the token (HTTP %d); points are kept in %s - fix "
                "SCALEWATCH_TOKEN and run `scalewatch sync`", r.status, self.spool.dir,
            )
            self.attempt = max(self.attempt, 6)  # slow retries only
            self._backoff()
        elif r.status == 404 and not self._reregistered:
            self._reregistered = True  # run deleted on the server? create it again, once
            run._run_id = None
        elif split_ok and len(used) > 1:
            # A merged request was refused for good (422, 413, ...): send its files one by one
            # so that only the offending batch is dropped (a bounded, one-time split).
            for f in used:
                try:
                    pts = dedupe_points(Spool.read_batch(f))
                except (OSError, ValueError):
                    continue
                self.send([f], pts, split_ok=False)
                if self.attempt:  # a transient error meanwhile: back to the main loop
                    return
        else:
            self._reregistered = False
            for f in used:
                self.spool.reject(f, f"HTTP {r.status}\n{body}")
            self.rejected_batches += len(used)
            run._log_once(
                ("drop", r.status), logging.ERROR,
                "scalewatch: server rejected a batch of %d point(s) with HTTP %d (%s); it is "
                "dropped (kept in %s/rejected) and further such batches are dropped silently",
                len(points), r.status, body[:500], self.spool.dir,
            )


def init(
    project: str,
    name: str,
    config: Mapping[str, Any] | None = None,
    target_compute: float | None = None,
    compute_unit: str = "gpu_hours",
    url: str | None = None,
    token: str | None = None,
    mode: str | None = None,
    tags: list[str] | None = None,
    fit_metric: str | None = None,
    *,
    home: str | os.PathLike | None = None,
    timeout: float | None = None,
    meter: ComputeMeter | None = None,
) -> Run:
    """Start (or resume: same project + name) a run. Returns at once, even if the server is down.

    ``url``/``token`` default to ``$SCALEWATCH_URL`` (else ``http://127.0.0.1:8765``) and
    ``$SCALEWATCH_TOKEN``; ``mode`` to ``$SCALEWATCH_MODE`` or ``"online"``; ``home`` (the spool
    root) to ``$SCALEWATCH_HOME`` or ``~/.scalewatch``. ``meter`` is used when ``log()`` gets no
    ``compute``. A leftover spool of the same run (crash, server outage) is replayed first.
    """
    return Run(
        project, name, config=config, target_compute=target_compute, compute_unit=compute_unit,
        url=url, token=token, mode=mode, tags=tags, fit_metric=fit_metric, home=home,
        timeout=timeout, meter=meter,
    )


def _after_fork_in_child() -> None:
    for run in list(_RUNS):
        with contextlib.suppress(Exception):
            run._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
