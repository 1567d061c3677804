"""The run object: ``log()`` journals and enqueues, a spool writer thread and a sender thread.

Data path of one point::

    run.log()  --journal line + deque.append-->  writer thread  --batch file (fsync)-->  spool dir
                                                                                            |
    server  <--gzip POST /api/v1/runs/{id}/points (keep-alive)--  sender thread (sender.py)
                                      acknowledged -> batch file deleted

* ``log()`` validates its arguments (:mod:`trainer_client.validation`), copies one binary
  record into the run's write-ahead journal (:mod:`trainer_client.journal`: a shared memory
  mapping of a file, so the point is in the kernel's page cache before ``log()`` returns,
  without a system call) and appends one tuple to a ``collections.deque``. It takes only the
  journal's uncontended lock, never waits for the network and formats nothing but the journal
  record. Bad argument types or values raise ``TypeError`` / ``ValueError`` at once
  (programming errors); NaN and infinite metric values are dropped with one rate-limited
  ``logging`` warning.
* The writer thread wakes every 0.2 s (``SCALEWATCH_SPOOL_INTERVAL``; at once when 1,000 points
  are queued), moves the queue into batch files of at most 1,000 points each, rotates the
  journal and wakes the sender. Memory is bounded by what arrives in 0.2 s: the queue is always
  spilled to disk, whatever the network does. A SIGKILL of the trainer loses nothing: the
  journal of the dead process is turned into batches by the next ``init()`` of the run or by
  ``scalewatch sync``. Only with ``SCALEWATCH_JOURNAL=0`` can a SIGKILL lose the points logged
  in the last interval; ``run.flush()`` (e.g. when you save a checkpoint) puts everything
  logged so far into batch files. Only if the disk itself fails do points stay in memory
  (warning); past ``worker.MAX_MEMORY_POINTS`` the oldest are dropped with an error that gives the
  count.
* The sender thread takes the spool's lock (one sender per run at a time, across processes) and
  runs :class:`~trainer_client.sender.Sender` - registration, batching, retries and what is
  dropped are described there. Nothing raises into the trainer for network or server trouble.
* ``finish(timeout=30)`` flushes; whatever the server has not acknowledged by then stays in the
  spool, and a ``RuntimeWarning`` gives the count and the path. It is replayed by the next
  ``init`` of the same project+name or by ``scalewatch sync``. ``finish`` also runs at
  interpreter exit (``atexit``, ``SCALEWATCH_EXIT_TIMEOUT`` seconds, default 10).
* After ``os.fork()`` the child starts with an empty queue, no journal and no threads; they are
  started again on its first ``log()`` (the parent keeps sending what the parent logged).

The queue, the two threads, the drain and ``flush`` are the run's :class:`~trainer_client.worker.
Worker`; this module keeps the public API, the argument checks and the ``log()`` fast path.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import logging
import os
import tempfile
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from . import journal as _journal
from .compute import DEFAULT_UNIT, ComputeMeter
from .limits import MAX_METRIC_NAME_LENGTH, MAX_METRICS_PER_POINT, MAX_STEP
from .queries import Queries
from .sender import BATCH_POINTS, SendTarget
from .spool import Spool, _pid_alive
from .validation import (
    RateLimitedWarning,
    bad_metric_name,
    check_group,
    check_name,
    check_tags,
    check_unit,
    check_value_range,
    json_config,
    to_compute,
    to_float,
    to_step,
)
from .worker import Worker

__all__ = ["Run", "init", "DEFAULT_URL", "registration_body"]

logger = logging.getLogger("scalewatch")

DEFAULT_URL = "http://127.0.0.1:8765"
MAX_NAME_SETS = 4096  # metric-name sets whose check log() remembers; cleared beyond this
MODES = ("online", "offline")

_RUNS: weakref.WeakSet[Run] = weakref.WeakSet()


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


class Run:
    """One training run. Create it with :func:`init`."""

    def __init__(
        self,
        project: str,
        name: str,
        config: Mapping[str, Any] | None = None,
        target_compute: float | None = None,
        compute_unit: str | None = None,
        url: str | None = None,
        token: str | None = None,
        mode: str | None = None,
        tags: list[str] | None = None,
        fit_metric: str | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        meter: ComputeMeter | None = None,
        group: str | None = None,
        value_range: tuple[float, float] | None = None,
    ) -> None:
        self.project = check_name("project", project)
        self.name = check_name("name", name)
        mode = mode or os.environ.get("SCALEWATCH_MODE") or "online"
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.url = (url or os.environ.get("SCALEWATCH_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("SCALEWATCH_TOKEN") or None
        self.timeout = timeout if timeout is not None else _env_float("SCALEWATCH_HTTP_TIMEOUT", 10)
        self.meter = meter
        # The unit of compute: given, else the meter's, else decided by the first log(): the
        # unit its compute carries (flops(), a ComputeMeter), or DEFAULT_UNIT for a number.
        self._unit_given = compute_unit is not None
        unit = compute_unit if compute_unit is not None else getattr(meter, "unit", None)
        if compute_unit is not None and meter is not None and not _same_unit(
                meter.unit, compute_unit):
            raise ValueError(f"meter counts {meter.unit} but compute_unit is {compute_unit!r}")
        self._meta = registration_body(
            self.project, self.name, config=config, target_compute=target_compute,
            compute_unit=unit, tags=tags, fit_metric=fit_metric, group=group,
            value_range=value_range)
        self._unit: str | None = self._meta.get("compute_unit")

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
        self.spool.clear_final_status()  # a run initialised again is not finished (any more)
        try:  # points a killed process had logged but not yet spooled
            _journal.recover_into(self.spool, _pid_alive)
        except OSError as exc:
            logger.error("scalewatch: cannot recover journals in %s: %s", self.spool.dir, exc)
        self._journal = _journal.Journal(self.spool.dir) if _journal.enabled() else None

        # What the sender thread may see and change (run id, abort); kept across a fork.
        self._target = SendTarget(spool=self.spool, meta=self._meta, url=self.url)
        self._worker = Worker(
            self.spool, self._target, self._journal, online=self.mode == "online",
            url=self.url, token=self.token, timeout=self.timeout,
            tag=f"{self.project}/{self.name}", run_json_extra={"mode": self.mode, "url": self.url})
        self._last_compute: float | None = None
        self._finished = False
        self._nonfinite = RateLimitedWarning(
            "scalewatch: dropped {count} NaN/inf metric value(s) (last: {key!r} at step {step})"
        )
        self._queries = Queries(self.url, self.token, self.timeout)
        # Metric-name sets already checked -> their journal record format (see log()).
        self._names: dict[tuple[str, ...], Any] = {}
        self._worker.start()
        _RUNS.add(self)
        atexit.register(self._atexit)

    def _after_fork_in_child(self) -> None:
        # The parent's threads do not exist here; the queue content belongs to the parent
        # (it will spool and send it). Start fresh, lazily, on the child's first log().
        self._worker.after_fork_in_child()

    # -- public API ------------------------------------------------------------------------
    @property
    def id(self) -> int | None:
        """Server id of the run, once registered (None before, and in offline mode)."""
        return self._target.run_id

    @property
    def compute_unit(self) -> str | None:
        """The unit of this run's compute; None until the first ``log()`` decides it."""
        return self._unit

    @property
    def spool_dir(self) -> str:
        return str(self.spool.dir)

    def log(self, metrics: Mapping[str, Any], step: int, compute: Any = None) -> None:
        """Queue ``metrics`` (name -> number) at ``step``. Never blocks on the network.

        The only I/O is a copy of one record into the run's memory-mapped write-ahead journal
        (no system call; none at all with ``SCALEWATCH_JOURNAL=0``), so the point survives a
        SIGKILL.

        ``compute`` is a number (in the run's ``compute_unit``) or a :class:`ComputeMeter`;
        if omitted, the run's ``meter`` is read, else the last compute passed to ``log``.
        Raises TypeError/ValueError for bad arguments and RuntimeError after ``finish()``.
        """
        if self._finished:
            raise RuntimeError(f"scalewatch run {self.project}/{self.name} is finished")
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a dict, got {type(metrics).__name__}")
        if type(step) is not int or step < 0 or step > MAX_STEP:
            step = to_step(step)
        if len(metrics) > MAX_METRICS_PER_POINT:
            raise ValueError(f"at most {MAX_METRICS_PER_POINT} metrics per log() call")
        if type(compute) is not float or compute < 0.0 or compute - compute != 0.0:
            if compute is None:
                compute = self.meter.value if self.meter is not None else self._last_compute
                if compute is None:
                    raise ValueError("compute is required (pass compute= or init(meter=...))")
            else:
                unit = getattr(compute, "unit", None)  # flops() and ComputeMeter carry one
                if unit is not None and unit != self._unit:
                    self._take_unit(unit)
                compute = to_compute(compute)
        # The fast path: the names seen before (checked then, their journal format kept) and
        # every value a finite float.  Anything else takes `_checked`, the full checks.
        keys = tuple(metrics)
        values = tuple(metrics.values())
        for v in values:
            if type(v) is not float or v - v != 0.0:  # not a float, or NaN / +-inf
                keys, values = self._checked(metrics, step)
                break
        fmt = self._names.get(keys)
        if fmt is None:
            fmt = self._learn_names(keys)
        self._last_compute = compute
        if keys:
            t = time.time()
            worker = self._worker
            jappend = worker.jappend
            # Write-ahead: in the page cache before log() returns.
            if jappend is not None and not jappend(fmt, step, compute, t, values):
                worker.jappend = None
                logger.error("scalewatch: journal unavailable; points are kept in memory and "
                             "the spool only")
            q = worker.queue
            q.append((step, compute, keys, values, t))
            if len(q) >= BATCH_POINTS and not worker.wake_writer.is_set():
                worker.wake_writer.set()
            if not worker.started:
                worker.start()

    def _checked(self, metrics: Mapping[str, Any], step: int
                 ) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """Names checked, values made floats, NaN and infinities dropped (and counted)."""
        out: dict[str, float] = {}
        for k, v in metrics.items():
            if type(k) is not str or not k or len(k) > MAX_METRIC_NAME_LENGTH or "\x00" in k:
                bad_metric_name(k)
            if type(v) is not float:
                v = to_float(k, v)
            if v - v != 0.0:  # NaN or +-inf
                self._nonfinite.hit(key=k, step=step)
                continue
            out[k] = v
        return tuple(out), tuple(out.values())

    def _take_unit(self, unit: str | None) -> None:
        """Decide the run's compute unit (the first log(), off the hot path), or refuse a
        compute value whose unit is not the run's: a run's compute has one unit."""
        if self._unit is None:
            self._unit = unit or DEFAULT_UNIT
            # A new dict, never a change in place: the sender thread may be serialising the
            # old one (registering a resumed run's leftover spool).
            self._meta = {**self._meta, "compute_unit": self._unit}
            self._target.meta = self._meta
            self._worker.meta_dirty = True  # the writer thread rewrites run.json
            return
        if unit is None or _same_unit(unit, self._unit):
            return
        why = ("init(compute_unit=...)" if self._unit_given
               else "the unit of the compute its first log() passed")
        raise ValueError(
            f"compute is in {unit}, but run {self.project}/{self.name} counts compute in "
            f"{self._unit} ({why}); log compute in one unit, or convert it to a plain number "
            "and say its unit with init(compute_unit=...)")

    def _learn_names(self, keys: tuple[str, ...]) -> Any:
        """Check a set of names not logged before and keep it, with its journal format."""
        if self._unit is None:  # the first log() passed a plain number: the default unit
            self._take_unit(None)
        for k in keys:
            bad_metric_name(k)  # not the hot path: the whole check, no inline one first
        if len(self._names) >= MAX_NAME_SETS:
            self._names.clear()  # names changing with every call: keep memory bounded
        fmt = self._journal.format(keys) if self._journal is not None and keys else ()
        self._names[keys] = fmt
        return fmt

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Block until everything logged so far is in the on-disk spool (not necessarily sent).

        Returns False if that did not happen within ``timeout`` seconds.
        """
        return self._worker.flush(timeout)

    def finish(self, timeout: float = 30.0, status: str = "finished") -> int:
        """Flush and stop. Returns the number of points left unacknowledged in the spool.

        When everything was delivered, the run is marked ``status`` ("finished", or "failed"
        when the ``with`` block raised) so dashboards stop showing it as live. At interpreter
        exit only the flush happens: a crashed trainer is not "finished".
        """
        if self._finished:
            return 0
        self._finished = True
        self._worker.close(time.monotonic() + max(0.0, timeout), time.monotonic)
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
        elif self._worker.sender_stopped() and self.spool.try_lock():
            try:
                self.spool.remove_if_done()
            finally:
                self.spool.unlock()
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        if status and not left and self.mode != "offline":
            self._set_status(status)
        elif status:  # the points go later (sync): the run's end goes with them
            self.spool.set_final_status(status)
        return left

    def _set_status(self, status: str) -> None:
        """Best effort PATCH of the run's status; never raises."""
        run_id = self._target.run_id
        if run_id is not None:
            self._queries.set_status(run_id, status)

    def fit(self, metric: str | None = None) -> dict[str, Any] | None:
        """Latest fit of this run from the server (``GET /runs/{id}/fit``), or None."""
        r = self._api_get("/fit", {"metric": metric or self._meta.get("fit_metric")})
        return r if isinstance(r, dict) else None

    def alerts(self) -> list[dict[str, Any]]:
        """Open alerts of this run, or [] on any trouble."""
        if self.mode == "offline":
            return []
        run_id = self._ensure_registered_sync()
        if run_id is None:
            return []
        r = self._queries.get("/api/v1/alerts", {"run": run_id, "state": "open"})
        if isinstance(r, dict) and isinstance(r.get("alerts"), list):
            return r["alerts"]
        return []

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.finish(status="failed" if exc_type is not None else "finished")

    def __repr__(self) -> str:
        return f"<scalewatch.Run {self.project}/{self.name} id={self.id} mode={self.mode}>"

    # -- synchronous API helpers (user thread, own connection) -----------------------------
    def _ensure_registered_sync(self) -> int | None:
        rid = self._target.run_id
        if rid is None:
            if self._unit is None:
                self._take_unit(None)
            rid = self._queries.register(self._meta)
            if rid is not None:  # never clear an id the sender thread set meanwhile
                self._target.run_id = rid
        return rid

    def _api_get(self, suffix: str, params: dict[str, Any]) -> Any:
        if self.mode == "offline":
            return None
        run_id = self._ensure_registered_sync()
        if run_id is None:
            return None
        return self._queries.get(f"/api/v1/runs/{run_id}{suffix}", params)

    def _atexit(self) -> None:
        with contextlib.suppress(Exception):
            self.finish(timeout=_env_float("SCALEWATCH_EXIT_TIMEOUT", 10.0), status="")



_P = ParamSpec("_P")
_R = TypeVar("_R")


def _parameters_of(target: Callable[_P, _R]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """Give the decorated function the parameters of ``target``, for type checkers (the
    ParamSpec) and for ``help()``/``inspect`` (the signature): declared once, on ``target``."""

    def give(forward: Callable[..., _R]) -> Callable[_P, _R]:
        returns = inspect.signature(forward).return_annotation
        forward.__signature__ = inspect.signature(target).replace(  # type: ignore[attr-defined]
            return_annotation=returns)
        return forward

    return give


@_parameters_of(Run)
def init(*args: Any, **kwargs: Any) -> Run:
    """Start (or resume: same project + name) a run. Returns at once, even if the server is down.

    ``url``/``token`` default to ``$SCALEWATCH_URL`` (else ``http://127.0.0.1:8765``) and
    ``$SCALEWATCH_TOKEN``; ``mode`` to ``$SCALEWATCH_MODE`` or ``"online"``; ``home`` (the spool
    root) to ``$SCALEWATCH_HOME`` or ``~/.scalewatch``. ``meter`` is used when ``log()`` gets no
    ``compute``. ``compute_unit`` names the unit of compute (e.g. ``"gpu_hours"``,
    ``"flops"``, ``"tokens"``); left out, it is the unit the compute carries -- ``flops()``
    values are ``"flops"``, a ``ComputeMeter`` counts ``"gpu_hours"`` -- and for plain numbers
    ``"gpu_hours"``. Compute of another unit than the run's raises ``ValueError`` in ``log()``.
    ``group`` names the recipe this run is a seed of (e.g. ``"cispo-768"``): the
    server fits the group's runs together (``GET /api/v1/groups/fit``). ``value_range`` is the
    range the fitted metric lives in (default ``(0, 1)``, a pass rate; ``(0, 100)`` for a
    percentage): the ceiling is searched in it and the fit's thresholds scale with it; it is
    set when the run is created (later: ``PATCH /api/v1/runs/{id}`` with ``fit_settings``).
    A leftover spool of the
    same run (crash, server outage) is replayed first.
    """
    return Run(*args, **kwargs)


def registration_body(
    project: str,
    name: str,
    *,
    config: Mapping[str, Any] | None = None,
    target_compute: float | None = None,
    compute_unit: str | None = None,
    tags: list[str] | None = None,
    fit_metric: str | None = None,
    group: str | None = None,
    value_range: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The body of ``POST /api/v1/runs`` for a run, checked as :func:`init` checks it (the
    CLI asks the server with it before starting; a run sends it when it registers)."""
    body: dict[str, Any] = {"project": check_name("project", project),
                            "name": check_name("name", name)}
    if compute_unit is not None:
        body["compute_unit"] = check_unit(compute_unit)
    if config is not None:
        if not isinstance(config, Mapping):
            raise TypeError("config must be a mapping")
        body["config"] = json_config(config)
    if tags is not None:
        body["tags"] = check_tags(tags)
    if target_compute is not None:
        body["target_compute"] = to_compute(target_compute)
    if fit_metric is not None:
        body["fit_metric"] = check_name("fit_metric", fit_metric, MAX_METRIC_NAME_LENGTH)
    if group is not None:  # sent with the run's creation (and each resume: moves it)
        body["group"] = check_group(group)
    if value_range is not None:  # a fit setting: taken when the server creates the run
        body["fit_settings"] = {"value_range": check_value_range(value_range)}
    return body


def _same_unit(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def _after_fork_in_child() -> None:
    for run in list(_RUNS):
        with contextlib.suppress(Exception):
            run._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
