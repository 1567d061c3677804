"""PipelineRL sidecar: follow an experiment directory and post its curves (no PipelineRL change).

``scalewatch pipelinerl-sidecar --exp-dir results/my_exp [--project P] [--name N]`` (or
:func:`run_sidecar`) tails, in ``<exp_dir>``:

* ``finetune/log/info_0.log`` - the trainer's ``Completed steps N: {...}`` lines (written by
  ``pipelinerl/finetune/logging_.py::log_metrics``; values rounded to 3 decimals). Each line gives
  ``stats/samples`` (cumulative trained samples = weight version), ``stats/tokens`` and
  ``rl/reward``, stamped with the line's own time. Posted at ``step=N`` as ``reward``,
  ``trained_samples``, ``trained_tokens``.
* ``streams/stats_test/0/0/0.jsonl`` - one JSON line per finished evaluation, written by the
  actor's ``publish_stats`` (``test_success_mean``, ``trainer_model_version``, ...). Posted as
  ``val_pass_rate`` at the step and compute where the trainer *reached* that weight version (the
  join key is the version, counted in samples). An evaluation of a version the trainer log has
  not reached yet waits; if there is no trainer log at all, it is stamped with the sidecar's clock.
* ``conf/exp_config.yaml`` - the GPU count: distinct ``jobs[*].gpus`` of kinds ``actor_llm``,
  ``preprocessor_llm`` and ``finetune`` (read with a tiny YAML-subset reader, no PyYAML); fallback
  ``world.*_fraction`` x ``$WORLD_SIZE``, or ``--gpus``.

Compute is GPU-hours: ``gpus x wall seconds since launch / 3600``. Launch = the mtime of
``exp_config.yaml`` (rewritten by every launch). When the sidecar sees a new launch, the time
between the last trainer line of the previous launch and the new launch is not counted; if the
sidecar was not running during a restart, that downtime is counted (use ``--gpus`` and a
fresh run name, or the in-process hook of ``PIPELINERL.md``, if that matters).

Files are followed as ``scalewatch follow`` follows them (``trainer_client.lines.LineTail``):
rotation, truncation and rewriting (a restarted experiment) lose no line, and a line too long to
be a record is skipped. Offsets are saved in the run's spool directory (``sidecar.json``) only
after the points derived from them are in the spool, so a sidecar restart resumes where it
stopped; re-sending is harmless anyway because the server upserts on (run, metric, step).
"""

from __future__ import annotations

import argparse
import ast
import bisect
import contextlib
import json
import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

from .limits import MAX_STEP
from .lines import LineTail
from .run import Run, init
from .spool import _atomic_write

__all__ = [
    "run_sidecar",
    "Sidecar",
    "add_sidecar_arguments",
    "sidecar_main",
    "read_gpu_count",
    "parse_trainer_line",
]

logger = logging.getLogger("scalewatch.pipelinerl")

TRAINER_LOG = "finetune/log/info_0.log"
TEST_STREAM = "streams/stats_test/0/0/0.jsonl"
EXP_CONFIG = "conf/exp_config.yaml"
GPU_KINDS = ("actor_llm", "preprocessor_llm", "finetune")
STATE_FILE = "sidecar.json"

_LINE = re.compile(
    r"^(?P<date>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d)(?:\.(?P<ms>\d{1,6}))?\b.*?"
    r"Completed steps (?P<step>\d+): (?P<dict>\{.*\})\s*$"
)


# --------------------------------------------------------------------------- parsing
def parse_trainer_line(line: str) -> tuple[int, dict[str, float], float | None] | None:
    """``(step, metrics, unix_time)`` of a ``Completed steps N: {...}`` log line, else None."""
    if "Completed steps" not in line:
        return None
    m = _LINE.match(line.strip())
    if m is None:
        m2 = re.search(r"Completed steps (\d+): (\{.*\})\s*$", line)
        if m2 is None:
            return None
        step, raw, when = int(m2.group(1)), m2.group(2), None
    else:
        step, raw = int(m.group("step")), m.group("dict")
        try:
            when = time.mktime(time.strptime(m.group("date"), "%m/%d/%Y %H:%M:%S"))
            if m.group("ms"):
                when += int(m.group("ms")) / 10 ** len(m.group("ms"))
        except (ValueError, OverflowError):
            when = None
    try:
        d = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(d, dict):
        return None
    metrics = {}
    for k, v in d.items():
        try:
            metrics[str(k)] = float(v)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int like 10**400
            continue
    return (step, metrics, when) if step <= MAX_STEP else None


def _scalar(v: str) -> Any:
    v = v.strip()
    if v.startswith(("'", '"')) and v.endswith(v[0]) and len(v) >= 2:
        return v[1:-1]
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def read_gpu_count(exp_dir: str | os.PathLike[str]) -> int | None:
    """GPUs used by an experiment, from ``conf/exp_config.yaml`` (None if unknown)."""
    try:
        text = (Path(exp_dir) / EXP_CONFIG).read_text("utf-8", errors="replace")
    except OSError:
        return None
    jobs: list[dict[str, Any]] = []
    in_jobs = False
    job_indent: int | None = None
    cur: dict[str, Any] | None = None
    list_key: str | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        s = raw.strip()
        if indent == 0 and not s.startswith("-"):
            in_jobs = s.startswith("jobs:") and s[5:].strip() == ""  # block style only
            cur, list_key, job_indent = None, None, None
            continue
        if not in_jobs:
            continue
        if s.startswith("-") and (job_indent is None or indent == job_indent):
            job_indent = indent
            cur, list_key = {}, None
            jobs.append(cur)
            s = s[1:].strip()
            if not s:
                continue
        if cur is None:
            continue
        mitem = re.match(r"^-\s*(-?\d+)\s*$", s)
        if mitem and list_key is not None:
            cur.setdefault(list_key, []).append(int(mitem.group(1)))
            continue
        mkv = re.match(r"^([A-Za-z_]\w*)\s*:\s*(.*)$", s)
        if not mkv:
            continue
        key, val = mkv.group(1), mkv.group(2).strip()
        if val == "":
            list_key = key
            cur[key] = []
        elif val.startswith("["):
            list_key = None
            cur[key] = [_scalar(x) for x in val.strip("[]").split(",") if x.strip()]
        else:
            list_key = None
            cur[key] = _scalar(val)
    gpus = set()
    for job in jobs:
        if job.get("kind") in GPU_KINDS:
            for g in job.get("gpus") or []:
                gpus.add((job.get("node_rank", 0), g))
    if gpus:
        return len(gpus)
    # fallback: world fractions x nodes
    world = re.search(r"^world:\s*\n((?:[ \t]+.*\n?)*)", text, re.M)
    if world:
        fr = 0.0
        for key in ("actor_fraction", "preprocessor_fraction", "finetune_fraction"):
            m = re.search(rf"^\s+{key}:\s*([\d.]+)", world.group(1), re.M)
            if m:
                fr += float(m.group(1))
        if fr > 0:
            nodes = int(os.environ.get("WORLD_SIZE", "1") or 1)
            return int(round(fr)) * max(1, nodes)
    return None


# --------------------------------------------------------------------------- tailing
def _new_lines(tail: LineTail) -> list[str]:
    """The complete lines added to the file since the last call. The follower's own tail, so
    that rotation and rewriting lose no line (:class:`~trainer_client.lines.LineTail`) and a
    line longer than ``MAX_LINE_BYTES`` is skipped instead of holding back every line after
    it; the state is saved only after the points of all of them are spooled."""
    return [raw.decode("utf-8", errors="replace") for _, raw in tail.lines() if raw is not None]


# --------------------------------------------------------------------------- sidecar
class Sidecar:
    """State machine of the sidecar; :meth:`poll_once` is one pass over the files."""

    def __init__(
        self,
        exp_dir: str | os.PathLike[str],
        project: str | None = None,
        name: str | None = None,
        url: str | None = None,
        token: str | None = None,
        gpus: int | None = None,
        home: str | os.PathLike[str] | None = None,
        join_timeout: float = 120.0,
        run: Run | None = None,
    ):
        self.exp_dir = Path(exp_dir).resolve()
        self.project = project or "pipelinerl"
        self.name = name or self.exp_dir.name
        self.gpus_override = gpus
        self.join_timeout = join_timeout
        self.run = run or init(
            self.project, self.name, url=url, token=token, home=home,
            config={"exp_dir": str(self.exp_dir), "source": "pipelinerl-sidecar"},
            compute_unit="gpu_hours", fit_metric="val_pass_rate",
        )
        self.state_path = self.run.spool.dir / STATE_FILE
        st = self._load_state()
        self.trainer = LineTail(self.exp_dir / TRAINER_LOG, st.get("trainer"))
        self.test = LineTail(self.exp_dir / TEST_STREAM, st.get("test"))
        # version -> (step, compute, time); sorted by version
        self.versions: list[list[float]] = [list(v) for v in st.get("versions", [])]
        self.pending: list[dict[str, Any]] = st.get("pending", [])
        self.seg_start: float | None = st.get("seg_start")
        self.accum_s: float = float(st.get("accum_s", 0.0))
        self.last_t: float | None = st.get("last_t")
        self.config_mtime: float | None = st.get("config_mtime")
        self.gpus: int | None = st.get("gpus")
        self.posted = 0

    # -- persistence
    def _load_state(self) -> dict[str, Any]:
        try:
            st = json.loads(self.state_path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        if st.get("exp_dir") != str(self.exp_dir):
            return {}
        return st

    def _save_state(self) -> None:
        st = {
            "exp_dir": str(self.exp_dir), "trainer": self.trainer.state(),
            "test": self.test.state(), "versions": self.versions, "pending": self.pending,
            "seg_start": self.seg_start, "accum_s": self.accum_s, "last_t": self.last_t,
            "config_mtime": self.config_mtime, "gpus": self.gpus,
        }
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.state_path, json.dumps(st).encode("utf-8"), fsync=False)
        except OSError as exc:
            logger.warning("scalewatch sidecar: cannot save %s: %s", self.state_path, exc)

    # -- compute
    def _check_launch(self) -> None:
        try:
            mtime = os.stat(self.exp_dir / EXP_CONFIG).st_mtime
        except OSError:
            return
        if self.config_mtime is None or mtime > self.config_mtime + 1e-6:
            if self.config_mtime is not None and self.seg_start is not None:
                # a new launch: count the previous one up to its last trainer line
                end = self.last_t if self.last_t is not None else self.config_mtime
                self.accum_s += max(0.0, end - self.seg_start)
                self.seg_start = mtime
                logger.info("scalewatch sidecar: experiment relaunched; continuing compute")
            self.config_mtime = mtime
            if self.gpus_override is None:
                self.gpus = read_gpu_count(self.exp_dir) or self.gpus
        if self.gpus_override is not None:
            self.gpus = self.gpus_override

    def compute_at(self, t: float) -> float:
        if self.seg_start is None:
            self.seg_start = t
        gpus = self.gpus or 1
        return gpus * (self.accum_s + max(0.0, t - self.seg_start)) / 3600.0

    # -- processing
    def _trainer_lines(self, lines: list[str]) -> None:
        for line in lines:
            parsed = parse_trainer_line(line)
            if parsed is None:
                continue
            step, m, when = parsed
            when = when if when is not None else time.time()
            if self.seg_start is None:
                launch = self.config_mtime
                self.seg_start = launch if launch is not None and launch <= when else when
            compute = self.compute_at(when)
            self.last_t = when
            out = {}
            if "rl/reward" in m:
                out["reward"] = m["rl/reward"]
            if "stats/samples" in m:
                out["trained_samples"] = m["stats/samples"]
                self._add_version(m["stats/samples"], step, compute, when)
            if "stats/tokens" in m:
                out["trained_tokens"] = m["stats/tokens"]
            if out:
                self.run.log(out, step=step, compute=compute)
                self.posted += 1

    def _add_version(self, version: float, step: int, compute: float, when: float) -> None:
        keys = [v[0] for v in self.versions]
        i = bisect.bisect_left(keys, version)
        entry = [float(version), int(step), float(compute), float(when)]
        if i < len(keys) and keys[i] == version:
            self.versions[i] = entry  # a redone step after a restart: newest wins
        else:
            self.versions.insert(i, entry)

    def _lookup(self, version: float) -> tuple[int, float] | None:
        """(step, compute) at which the trainer reached ``version``; None if not yet."""
        if version <= 0:
            return 0, 0.0
        keys = [v[0] for v in self.versions]
        i = bisect.bisect_left(keys, version)
        if i < len(keys) and keys[i] == version:
            return int(self.versions[i][1]), self.versions[i][2]
        if i == len(keys):
            return None  # the trainer log has not got there yet
        hi = self.versions[i]
        if i == 0:
            return int(hi[1]), hi[2]
        lo = self.versions[i - 1]
        f = (version - lo[0]) / (hi[0] - lo[0])
        return int(round(lo[1] + f * (hi[1] - lo[1]))), lo[2] + f * (hi[2] - lo[2])

    def _test_lines(self, lines: list[str]) -> None:
        now = time.time()
        for line in lines:
            line = line.strip().strip("\x00")
            if not line:
                continue
            try:
                d = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
                logger.warning("scalewatch sidecar: skipping an unreadable stats_test line")
                continue
            if not isinstance(d, dict) or "test_success_mean" not in d:
                continue
            try:
                value = float(d["test_success_mean"])
                version = float(d.get("trainer_model_version") or 0)
            except (TypeError, ValueError, OverflowError):  # OverflowError: 10**400
                continue
            self.pending.append({"version": version, "value": value, "seen": now})

    def _resolve_pending(self) -> None:
        keep = []
        now = time.time()
        for ev in self.pending:
            hit = self._lookup(ev["version"])
            if hit is None and now - ev["seen"] > self.join_timeout and not self._has_trainer():
                # No trainer log at all: the sidecar's clock, and as the step the last trainer
                # step seen or else the model version the evaluation names (every evaluation
                # went to step 0 and each overwrote the one before).
                step = int(self.versions[-1][1]) if self.versions else _version_step(
                    ev["version"])
                hit = (step, self.compute_at(now))
            if hit is None:
                keep.append(ev)
                continue
            step, compute = hit
            v = ev["value"]
            if v - v == 0.0:
                self.run.log({"val_pass_rate": v}, step=step, compute=compute)
                self.posted += 1
        self.pending = keep

    def _has_trainer(self) -> bool:
        return (self.exp_dir / TRAINER_LOG).exists()

    def poll_once(self) -> int:
        """Read what is new, post it, persist offsets. Returns the number of points logged."""
        before = self.posted
        self._check_launch()
        self._trainer_lines(_new_lines(self.trainer))
        self._test_lines(_new_lines(self.test))
        self._resolve_pending()
        if self.run.flush(timeout=30):  # offsets are saved only once the points are spooled
            self._save_state()
        return self.posted - before

    def close(self, timeout: float = 30.0) -> int:
        with contextlib.suppress(Exception):
            self.poll_once()
        left = self.run.finish(timeout=timeout)
        self._save_state()
        return left


def _version_step(version: float) -> int:
    """A model version (samples trained on, in PipelineRL) as a step the server takes."""
    if version != version:  # NaN: no version to go by
        return 0
    return int(min(max(version, 0.0), float(MAX_STEP)))


def run_sidecar(
    exp_dir: str | os.PathLike[str],
    project: str | None = None,
    name: str | None = None,
    url: str | None = None,
    token: str | None = None,
    poll_interval: float = 2.0,
    stop_event: threading.Event | None = None,
    gpus: int | None = None,
    home: str | os.PathLike[str] | None = None,
) -> int:
    """Follow ``exp_dir`` until ``stop_event`` is set (or KeyboardInterrupt); returns the number
    of points left unsent in the spool at exit (0 = everything acknowledged)."""
    stop_event = stop_event or threading.Event()
    sc = Sidecar(exp_dir, project=project, name=name, url=url, token=token, gpus=gpus, home=home)
    logger.info("scalewatch sidecar: following %s as %s/%s", sc.exp_dir, sc.project, sc.name)
    try:
        while not stop_event.is_set():
            try:
                sc.poll_once()
            except Exception:  # noqa: BLE001 - a bad line must not stop the sidecar
                logger.exception("scalewatch sidecar: poll failed")
            stop_event.wait(poll_interval)
    except KeyboardInterrupt:
        pass
    return sc.close()


def add_sidecar_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Arguments of ``scalewatch pipelinerl-sidecar``."""
    parser.add_argument("--exp-dir", required=True, help="PipelineRL output_dir to follow")
    parser.add_argument("--project", default=None, help="project (default: pipelinerl)")
    parser.add_argument("--name", default=None, help="run name (default: exp dir name)")
    parser.add_argument("--url", default=None, help="server URL (default $SCALEWATCH_URL)")
    parser.add_argument("--token", default=None, help="API token (default $SCALEWATCH_TOKEN)")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls")
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPU count (default: from conf/exp_config.yaml)")
    parser.add_argument("--home", default=None, help="spool root (default $SCALEWATCH_HOME)")
    return parser


def sidecar_main(args: argparse.Namespace) -> int:
    """Entry point of ``scalewatch pipelinerl-sidecar``; stops on SIGINT/SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    stop = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stop.set()

    with contextlib.suppress(ValueError):  # not in the main thread
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    left = run_sidecar(
        args.exp_dir, project=args.project, name=args.name, url=args.url, token=args.token,
        poll_interval=args.poll_interval, stop_event=stop, gpus=getattr(args, "gpus", None),
        home=getattr(args, "home", None),
    )
    return 0 if left == 0 else 1
