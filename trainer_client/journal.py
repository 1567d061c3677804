"""A write-ahead journal of `log()` calls, so that even SIGKILL loses nothing.

`log()` appends one line per call to an open file with a single `os.write` (about 2 µs): once it
returns, the point is in the kernel's page cache and survives the death of the process. The
spool writer moves points from memory into batch files every 0.2 s and then rotates the journal;
a journal generation is deleted two rotations later, when everything written to it has surely
reached a batch file. At the next `init()` of the run (or `scalewatch sync`), journals left by
dead processes are turned into batches. Duplicates are harmless: the server upserts.

Lines are `repr((step, compute, {name: value}, time))`, read back with `ast.literal_eval` (which
evaluates literals only). Values were checked finite before they were written, so repr
round-trips them exactly. A torn last line (killed mid-write) is skipped.
"""

from __future__ import annotations

import ast
import contextlib
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger("scalewatch")
PREFIX = "journal-"
KEEP_GENERATIONS = 2  # retired generations kept before deletion (see the module docstring)


def enabled() -> bool:
    return os.environ.get("SCALEWATCH_JOURNAL", "1").lower() not in ("0", "false", "no")


class Journal:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.fd: int | None = None
        self._gen = 0
        self._path: Path | None = None
        self._retired: list[tuple[int, Path]] = []

    def open(self) -> int | None:
        """Start a new generation; returns its fd (None when the disk refuses)."""
        self._gen += 1
        path = self.dir / f"{PREFIX}{os.getpid()}-{self._gen:06d}.log"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            logger.error("scalewatch: cannot open journal %s: %s", path, exc)
            return None
        if self.fd is not None and self._path is not None:
            self._retired.append((self.fd, self._path))
        self.fd, self._path = fd, path
        return fd

    def rotate(self) -> int | None:
        """New generation for upcoming writes; old ones beyond KEEP_GENERATIONS are deleted.

        The previous fd stays open until its file is deleted, so a `log()` that read it just
        before the switch still writes to a valid file."""
        fd = self.open()
        while len(self._retired) > KEEP_GENERATIONS:
            old_fd, old_path = self._retired.pop(0)
            _close(old_fd)
            _unlink(old_path)
        return fd

    def close_and_remove(self) -> None:
        """Everything logged is in batch files: drop every generation of this process."""
        for fd, path in [*self._retired, (self.fd, self._path)]:
            if fd is not None:
                _close(fd)
            if path is not None:
                _unlink(path)
        self._retired.clear()
        self.fd, self._path = None, None

    def forget(self) -> None:
        """In a forked child: the parent's journal is the parent's; start with none."""
        self.fd, self._path, self._retired = None, None, []


def encode(step: int, compute: float, metrics: dict[str, float], t: float) -> bytes:
    return (repr((step, compute, metrics, t)) + "\n").encode()


def _read_dead(directory: Path, pid_alive: Any) -> tuple[list[dict[str, Any]], list[Path]]:
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(PREFIX))
    except FileNotFoundError:
        return [], []
    points: list[dict[str, Any]] = []
    files: list[Path] = []
    for name in names:
        try:
            pid = int(name[len(PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if pid == os.getpid() or pid_alive(pid):
            continue
        path = directory / name
        files.append(path)
        try:
            text = path.read_text("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                step, compute, metrics, t = ast.literal_eval(line)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue  # a torn last line
            points.append({"step": step, "compute": compute, "metrics": metrics, "time": t})
    return points, files


def recover_into(spool: Any, pid_alive: Any) -> int:
    """Turn dead processes' journals into spool batches; returns the points recovered."""
    points, files = _read_dead(spool.dir, pid_alive)
    for lo in range(0, len(points), 1000):
        spool.write_batch(points[lo : lo + 1000])  # raises OSError: journals are then kept
    for path in files:
        _unlink(path)
    if points:
        logger.warning(
            "scalewatch: recovered %d point(s) of %s/%s from the journal of a process that "
            "died before spooling them",
            len(points),
            spool.project,
            spool.name,
        )
    return len(points)


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
