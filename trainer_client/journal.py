"""A write-ahead journal of `log()` calls, so that even SIGKILL loses nothing.

`log()` copies one binary record into a shared, memory-mapped journal file (`MAP_SHARED`): no
system call, well under a microsecond. A store to a shared file mapping lands in the kernel's
page cache, the same place an ``os.write`` would have put it, so once `log()` returns the point
survives the death of the process (only power loss needs fsync, which the journal never
promised). The file is allocated up front (``posix_fallocate``) so that a full disk is an
``OSError`` when a segment is opened, never a ``SIGBUS`` on a store into the mapping.

The spool writer moves points from memory into batch files every 0.2 s and then rotates the
journal; a journal generation is deleted two rotations after the one that retired it, when
everything written to it has surely reached a batch file. A generation that fills up before the
writer rotates it is retired at once and a bigger one opened (from `log()`, rarely). At the next
`init()` of the run (or `scalewatch sync`), journals left by dead processes are turned into
batches. Duplicates are harmless: the server upserts.

File format: ``MAGIC``, then records, then zeros up to the allocated size. A record is
``<u8 commit = 1><u32 body length><body>``; the body is ``<u16 n>`` and n times ``<u16 len>`` +
the UTF-8 metric name, then ``<i64 step><f64 compute><f64 time>`` and n ``<f64 value>``. The
commit byte is stored after the rest of the record (a separate store, in program order, and
SIGKILL stops a process between two instructions), and records are written one at a time under
a lock: so a commit byte of 1 means the record is whole, and the first 0 ends the file. Values
were checked finite before they were written. Files without ``MAGIC`` are the line format of earlier
versions (``repr((step, compute, {name: value}, time))`` per line), still read back.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import logging
import mmap
import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger("scalewatch")
PREFIX = "journal-"
MAGIC = b"scalewatch-journal-2\n"
# Retired generations are deleted this many rotations after the one that retired them: a point
# journaled just before a rotation can reach the queue just after that drain, and is spooled by
# the next one (see Worker.drain_to_disk).
KEEP_ROTATIONS = 2
# Bytes allocated per generation: ~15k one-metric records, far more than 0.2 s of log() calls
# in any real trainer. Bigger records or bursts just open the next generation early.
SEGMENT_BYTES = 1 << 20
MAX_FORMATS = 4096  # cached per-key-set encoders; cleared beyond this (names changing per call)

_LEN = struct.Struct("<I")
_U16 = struct.Struct("<H")
_FIXED = struct.Struct("<qdd")

Point = dict[str, Any]
# Per metric-name set: the record's struct.pack_into, its size (without the commit byte), its
# body length, the encoded names.
_Format = tuple[Callable[..., None], int, int, bytes]


def enabled() -> bool:
    return os.environ.get("SCALEWATCH_JOURNAL", "1").lower() not in ("0", "false", "no")


class Journal:
    """The journal of one run in one process. `append` may be called from any thread."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._lock = threading.Lock()
        self._mm: mmap.mmap | None = None
        self._path: Path | None = None
        self._pos = 0
        self._end = 0  # _pos + a record's size past this: open the next generation
        self._gens = itertools.count(1)
        self._rotations = 0
        self._retired: list[tuple[int, Path]] = []  # (rotation count when retired, file)
        self._closed = False
        self._formats: dict[tuple[str, ...], _Format] = {}

    # -- the hot path ----------------------------------------------------------------------
    def append(self, step: int, compute: float, metrics: dict[str, float], t: float) -> bool:
        """Journal one point; False when the journal cannot take it (disk trouble)."""
        keys = tuple(metrics)
        return self.append_record(self.format(keys), step, compute, t, tuple(metrics.values()))

    def format(self, keys: tuple[str, ...]) -> _Format:
        """The record format of points with these metric names (in this order), cached: a
        caller that logs the same names again and again keeps it and skips the lookup."""
        fmt = self._formats.get(keys)
        return fmt if fmt is not None else self._format(keys)

    def append_record(self, fmt: _Format, step: int, compute: float, t: float,
                      values: tuple[float, ...]) -> bool:
        """``append`` with the names' format (``format``) and the values already in hand:
        `log()`'s path, which has both from its own checks."""
        pack_into, size, length, names = fmt
        lock = self._lock
        lock.acquire()  # one record in flight at a time (not `with`: ~0.1 us a call)
        try:
            pos = self._pos
            end = pos + 1 + size
            if end > self._end:
                if self._closed:
                    return True
                if not self._next_segment_locked(1 + size):
                    return False
                pos = self._pos
                end = pos + 1 + size
            mm = self._mm
            # Two stores in program order: the record, packed straight into the mapping (no
            # bytes object in between), then its commit byte. A kill between them (or inside
            # the first) leaves the commit byte 0, and the reader stops there.
            pack_into(mm, pos + 1, length, names, step, compute, t, *values)
            mm[pos] = 1  # type: ignore[index]  # a segment is open past the check
            self._pos = end
        finally:
            lock.release()
        return True

    def _format(self, keys: tuple[str, ...]) -> _Format:
        if len(self._formats) >= MAX_FORMATS:
            self._formats.clear()
        encoded = [k.encode("utf-8") for k in keys]
        names = _U16.pack(len(keys)) + b"".join(_U16.pack(len(b)) + b for b in encoded)
        st = struct.Struct(f"<I{len(names)}sqdd{len(keys)}d")
        fmt = (st.pack_into, st.size, st.size - _LEN.size, names)
        self._formats[keys] = fmt
        return fmt

    # -- generations -----------------------------------------------------------------------
    def open(self) -> bool:
        """Start a generation (the first, or after a fork); False when the disk refuses."""
        seg = self._new_segment(SEGMENT_BYTES)
        if seg is None:
            return False
        with self._lock:
            self._closed = False
            self._swap_locked(seg)
        return True

    def rotate(self) -> bool:
        """New generation for upcoming appends; retired ones past KEEP_ROTATIONS are deleted.

        On failure (logged) appends continue in the current generation, which is then only
        deleted by `close_and_remove`: duplicates at recovery at worst, never a loss."""
        seg = self._new_segment(SEGMENT_BYTES)
        with self._lock:
            if self._closed:
                doomed = [seg[1]] if seg is not None else []
                if seg is not None:
                    seg[0].close()
            else:
                if seg is not None:
                    self._swap_locked(seg)
                self._rotations += 1
                keep_after = self._rotations - KEEP_ROTATIONS
                doomed = [p for r, p in self._retired if r < keep_after]
                self._retired = [(r, p) for r, p in self._retired if r >= keep_after]
        for path in doomed:
            _unlink(path)
        return seg is not None

    def close_and_remove(self) -> None:
        """Everything logged is in batch files: drop every generation of this process."""
        with self._lock:
            self._closed = True
            paths = [p for _, p in self._retired]
            if self._path is not None:
                paths.append(self._path)
            if self._mm is not None:
                self._mm.close()
            self._mm, self._path, self._retired = None, None, []
            self._pos = self._end = 0
        for path in paths:
            _unlink(path)

    def forget(self) -> None:
        """In a forked child: the parent's journal is the parent's; start with none.

        The inherited mapping is dropped without a store (it is the parent's file), and the
        lock replaced (a parent thread may have held it at the fork)."""
        self._lock = threading.Lock()
        self._mm, self._path, self._retired = None, None, []
        self._pos = self._end = 0

    def _next_segment_locked(self, need: int) -> bool:
        # The current generation is full (a burst, or a record bigger than usual): retire it
        # now, counted as if retired by the next rotation, and open a bigger one if needed.
        seg = self._new_segment(max(SEGMENT_BYTES, 2 * (need + len(MAGIC))))
        if seg is None:
            return False
        self._swap_locked(seg)
        return True

    def _swap_locked(self, seg: tuple[mmap.mmap, Path]) -> None:
        if self._mm is not None and self._path is not None:
            self._mm.close()  # appends only ever go to the current generation
            self._retired.append((self._rotations, self._path))
        self._mm, self._path = seg
        self._pos, self._end = len(MAGIC), len(seg[0])

    def _new_segment(self, size: int) -> tuple[mmap.mmap, Path] | None:
        path = self.dir / f"{PREFIX}{os.getpid()}-{next(self._gens):06d}.log"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _allocate(fd, size)
                mm = mmap.mmap(fd, size)  # MAP_SHARED: stores reach the page cache
            finally:
                os.close(fd)  # the mapping keeps the file
        except (OSError, ValueError) as exc:
            logger.error("scalewatch: cannot open journal %s: %s", path, exc)
            _unlink(path)
            return None
        mm[: len(MAGIC)] = MAGIC
        return mm, path


def _allocate(fd: int, size: int) -> None:
    """Reserve the file's blocks now, so a store into the mapping can never hit a full disk."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno not in (95, 22):  # EOPNOTSUPP, EINVAL: write zeros instead
                raise
    zeros = bytes(min(size, 1 << 16))
    done = 0
    while done < size:
        done += os.pwrite(fd, zeros[: size - done], done)


def _decode(body: bytes) -> Point:
    (n,) = _U16.unpack_from(body, 0)
    off = 2
    names = []
    for _ in range(n):
        (ln,) = _U16.unpack_from(body, off)
        names.append(body[off + 2 : off + 2 + ln].decode("utf-8"))
        off += 2 + ln
    if off + _FIXED.size + 8 * n != len(body):
        raise ValueError("record length")
    step, compute, t, *values = struct.unpack_from(f"<qdd{n}d", body, off)
    metrics = dict(zip(names, values, strict=True))
    return {"step": step, "compute": compute, "metrics": metrics, "time": t}


def _binary_points(data: bytes) -> Iterator[Point]:
    off, end = len(MAGIC), len(data)
    while off + 1 + _LEN.size <= end:
        if data[off] != 1:
            return  # the zeros past the last record, or one the kill left uncommitted
        (length,) = _LEN.unpack_from(data, off + 1)
        start = off + 1 + _LEN.size
        if start + length > end:
            return
        try:
            yield _decode(data[start : start + length])
        except (struct.error, UnicodeDecodeError, ValueError):
            return
        off = start + length


def _text_points(text: str) -> Iterator[Point]:
    for line in text.splitlines():
        try:
            step, compute, metrics, t = ast.literal_eval(line)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue  # a torn last line
        yield {"step": step, "compute": compute, "metrics": metrics, "time": t}


def _read_dead(
    directory: Path, pid_alive: Callable[[int], bool]
) -> tuple[list[Point], list[Path]]:
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(PREFIX))
    except FileNotFoundError:
        return [], []
    points: list[Point] = []
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
            data = path.read_bytes()
        except OSError:
            continue
        if data.startswith(MAGIC):
            points.extend(_binary_points(data))
        else:
            points.extend(_text_points(data.decode("utf-8", errors="replace")))
    return points, files


def recover_into(spool: Any, pid_alive: Callable[[int], bool]) -> int:
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


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
