"""On-disk spool: every batch of points is written here before it is sent.

Layout (``$SCALEWATCH_HOME``, default ``~/.scalewatch``)::

    spool/<project>/<name>/
        run.json                          init parameters of the run (so `sync` can create it)
        <time_ns>-<pid>-<seq>-<n>.json    one batch of n points, {"v": 1, "points": [...]}
        .lock                             held (flock) by the one process currently sending
        rejected/                         batches the server refused for good (422, ...), kept
                                          for inspection with the server's answer
        sidecar.json                      PipelineRL sidecar offsets (only for sidecar runs)

The spool is keyed by project and name, not by server run id, so a run that was never
registered (server down, offline mode) can still be replayed later. A batch file is written to a
temporary name, flushed, fsync'ed (set ``SCALEWATCH_FSYNC=0`` to skip the fsync) and renamed,
so a reader only ever sees complete batches; a crash mid-write leaves a ``.tmp-*`` file that is
cleaned up later. A batch file is deleted only after the server acknowledged it. File names
sort in write order, which is also the send order, so a step redone after a restart
overwrites the older value on the server (the server upserts on (run, metric, step)).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

logger = logging.getLogger("scalewatch")

try:  # POSIX advisory locks; on other platforms every process may send (upsert keeps it safe)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["Spool", "default_home", "iter_spools"]

META = "run.json"
# The status finish() could not send (offline, or points left unsent): `scalewatch sync` sets it
# once every point is delivered; the next init() of the run removes it (the run goes on).
FINAL_STATUS = "final_status"
_seq = itertools.count()
_seq_lock = threading.Lock()


def default_home() -> Path:
    return Path(os.environ.get("SCALEWATCH_HOME") or Path.home() / ".scalewatch")


def _safe(part: str) -> str:
    s = quote(part, safe="-_.")
    if s.startswith("."):
        s = "%2E" + s[1:]
    return s or "%00"


def _fsync_enabled() -> bool:
    return os.environ.get("SCALEWATCH_FSYNC", "1").lower() not in ("0", "false", "no")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _atomic_write(path: Path, data: bytes, fsync: bool) -> None:
    tmp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{path.name}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)


class Spool:
    """The spool directory of one run (project + name)."""

    def __init__(self, home: str | os.PathLike[str] | None, project: str, name: str):
        self.home = Path(home) if home is not None else default_home()
        self.project = project
        self.name = name
        self.dir = self.home / "spool" / _safe(project) / _safe(name)
        self._lock_fd: int | None = None

    @classmethod
    def from_dir(cls, path: Path) -> Spool:
        sp = cls.__new__(cls)
        sp.home = path.parent.parent.parent
        sp.dir = path
        sp._lock_fd = None
        meta = sp.read_meta() or {}
        sp.project = meta.get("project", path.parent.name)
        sp.name = meta.get("name", path.name)
        return sp

    # -- metadata -------------------------------------------------------------------------
    def write_meta(self, meta: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(meta, sort_keys=True, default=str).encode("utf-8")
        _atomic_write(self.dir / META, data, fsync=False)

    def read_meta(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.dir / META).read_text("utf-8"))
        except (OSError, ValueError):
            return None

    # -- batches --------------------------------------------------------------------------
    def write_batch(self, points: list[dict[str, Any]]) -> Path:
        """Durably write one batch; returns its path. Raises OSError on disk trouble."""
        with _seq_lock:
            seq = next(_seq)
        name = f"{time.time_ns():020d}-{os.getpid()}-{seq:08d}-{len(points)}.json"
        data = json.dumps({"v": 1, "points": points}, separators=(",", ":")).encode("utf-8")
        path = self.dir / name
        try:
            _atomic_write(path, data, _fsync_enabled())
        except FileNotFoundError:  # directory removed under us (e.g. by `sync`): recreate
            self.dir.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, data, _fsync_enabled())
        return path

    def batches(self) -> list[Path]:
        try:
            names = [n for n in os.listdir(self.dir) if n.endswith(".json") and n[0].isdigit()]
        except FileNotFoundError:
            return []
        names.sort()
        return [self.dir / n for n in names]

    @staticmethod
    def batch_size(path: Path) -> int:
        try:
            return int(path.name[:-5].rsplit("-", 1)[1])
        except (ValueError, IndexError):
            return 0

    def pending_points(self) -> int:
        return sum(self.batch_size(p) for p in self.batches())

    @staticmethod
    def read_batch(path: Path) -> list[dict[str, Any]]:
        """Points of a batch file; raises ValueError if the file is corrupt."""
        with open(path, "rb") as f:
            obj = json.loads(f.read().decode("utf-8"))
        pts = obj.get("points") if isinstance(obj, dict) else None
        if not isinstance(pts, list):
            raise ValueError(f"not a spool batch: {path}")
        return pts

    @staticmethod
    def remove(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def reject(self, path: Path, reason: str) -> None:
        """Move a batch the server refused for good to ``rejected/`` (with the reason)."""
        rej = self.dir / "rejected"
        try:
            rej.mkdir(exist_ok=True)
            os.replace(path, rej / path.name)
            (rej / (path.name + ".reason.txt")).write_text(reason[:20000], "utf-8")
        except FileNotFoundError:
            pass
        except OSError:
            self.remove(path)

    def cleanup_tmp(self) -> None:
        """Delete temporary files left by processes that died mid-write."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        for n in names:
            if not n.startswith(".tmp-"):
                continue
            try:
                pid = int(n.split("-")[1])
            except (IndexError, ValueError):
                continue
            if pid != os.getpid() and not _pid_alive(pid):
                self.remove(self.dir / n)

    def set_final_status(self, status: str) -> None:
        """Keep the status the run ended with, for `scalewatch sync` (best effort)."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.dir / FINAL_STATUS, status.encode("utf-8"), fsync=False)
        except OSError as exc:
            logger.warning("scalewatch: cannot keep the run's final status in %s: %s",
                           self.dir, exc)

    def final_status(self) -> str | None:
        try:
            return (self.dir / FINAL_STATUS).read_text("utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def clear_final_status(self) -> None:
        self.remove(self.dir / FINAL_STATUS)

    def remove_if_done(self) -> bool:
        """Remove run.json and the directory if no batch is left. Returns True if removed."""
        if self.batches():
            return False
        try:
            left = [n for n in os.listdir(self.dir) if n not in (META, ".lock")]
        except FileNotFoundError:
            return True
        if left:  # sidecar state, rejected batches: keep the directory and its meta
            return False
        for n in (META, ".lock"):
            self.remove(self.dir / n)
        with contextlib.suppress(OSError):
            self.dir.rmdir()
            self.dir.parent.rmdir()
        return True

    # -- sender lock ----------------------------------------------------------------------
    def try_lock(self) -> bool:
        """Take the exclusive sender lock of this spool without blocking."""
        if self._lock_fd is not None:
            return True
        if fcntl is None:  # pragma: no cover
            return True
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def iter_spools(home: str | os.PathLike[str] | None = None) -> list[Spool]:
    """Every run spool under ``home`` that has a ``run.json``."""
    root = (Path(home) if home is not None else default_home()) / "spool"
    out = []
    for meta in sorted(root.glob(f"*/*/{META}")):
        out.append(Spool.from_dir(meta.parent))
    return out
