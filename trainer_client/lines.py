"""JSON-lines sources (verl, prime-rl, any JSON lines): one line into a record, and a file
followed line by line, so that a bad line costs that line and nothing after it.

A *bad line* is one that cannot be a record: not UTF-8 text, not JSON, not a JSON object,
nested deeper than ``MAX_DEPTH``, a number beyond a double's range (``10**400``, ``1e400``), a
metric name the server refuses (NUL, a lone surrogate such as ``"\\udfff"``), no step or one
out of range, longer than ``MAX_LINE_BYTES``. It is skipped with a warning naming
``FILE:LINE`` and reading goes on. Blank lines, metrics with text values and a record with
no numeric metric are skipped silently; ``NaN``/``Infinity`` values are dropped (as
``log()`` drops them).

:class:`LineTail` moves its offset past a line only once the caller is done with it (the
points handed to ``log()``, which journals them, or the line skipped as bad): a follower
killed or failing in the middle of a pass re-reads from the first line not yet journaled,
never from beyond it.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trainer_client.limits import MAX_NAME_LENGTH, MAX_STEP
from trainer_client.records import BadLines, Follower
from trainer_client.run import Run
from trainer_client.validation import metric_name_problem

logger = logging.getLogger("scalewatch.follow")

Record = tuple[int, dict[str, float]]
MAX_DEPTH = 32  # nested objects flattened into metric names ("a/b/c"): deeper is not a record
MAX_READ = 8 * 1024 * 1024  # bytes read per chunk
MAX_LINE_BYTES = MAX_READ  # a line without a newline within this many bytes is skipped
MAX_PASS_BYTES = 8 * MAX_READ  # read per pass at most (then the state is saved)


class BadLine(ValueError):
    """A line that cannot be a record; the message says why."""


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _finite_float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise BadLine(f"number {_short(text)} is beyond a double's range")
    return v


def _flatten(obj: Mapping[str, Any], prefix: str = "", depth: int = 0
             ) -> Iterator[tuple[str, float]]:
    if depth > MAX_DEPTH:
        raise BadLine(f"nested deeper than {MAX_DEPTH} levels")
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, name + "/", depth + 1)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                v = float(value)
            except OverflowError:
                raise BadLine(f"{_short(name)}: number beyond a double's range") from None
            if not math.isfinite(v) or not 0 < len(name) <= MAX_NAME_LENGTH:
                continue  # NaN/inf dropped as log() drops them; over-long names skipped
            problem = metric_name_problem(name)
            if problem:
                raise BadLine(f"metric name {_short(name)} {problem}")
            yield name, v


def parse_record(raw: bytes | str, fmt: str, step_key: str = "step") -> Record | None:
    """(step, metrics) of one line; None for a line with nothing to send (blank, text only);
    raises :class:`BadLine` for a line that cannot be a record."""
    if isinstance(raw, bytes):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadLine(f"not UTF-8 text (byte {exc.start + 1})") from None
    else:
        line = raw
    line = line.strip()
    if not line:
        return None
    try:
        obj = json.loads(line, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise BadLine(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise BadLine(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # BadLine from _finite_float, or an integer of > 4300 digits
        raise BadLine(str(exc) if isinstance(exc, BadLine) else "not JSON (a number too long)"
                      ) from None
    if not isinstance(obj, dict):
        raise BadLine(f"not a JSON object (a {type(obj).__name__})")
    if step_key not in obj:
        raise BadLine(f"no {step_key!r}")
    step = obj[step_key]
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
        raise BadLine(f"step {_short(step)} is not an integer in [0, 2**62]")
    body = obj.get("data") if fmt == "verl" else obj
    if not isinstance(body, Mapping):
        raise BadLine("no 'data' object (verl's file logger writes {\"step\": N, \"data\": {...}})")
    try:
        metrics = {k: v for k, v in _flatten(body) if k != step_key}
    except RecursionError:
        raise BadLine(f"nested deeper than {MAX_DEPTH} levels") from None
    return (step, metrics) if metrics else None


def parse_line(line: str | bytes, fmt: str, step_key: str = "step") -> Record | None:
    """:func:`parse_record`, with None for a bad line too."""
    try:
        return parse_record(line, fmt, step_key)
    except BadLine:
        return None


def line_file(fmt: str, path: Path) -> Path | None:
    """The file to read: PATH itself, or in a directory prime-rl's metrics.jsonl / the newest
    .jsonl (verl writes <root>/<project>/<experiment>.jsonl); None when there is none yet."""
    if not path.is_dir():
        return path if path.exists() else None
    wanted = "metrics.jsonl" if fmt == "prime-rl" else "*.jsonl"
    found = sorted(path.rglob(wanted), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def file_records(fmt: str, path: Path, step_key: str, bad: BadLines | None = None
                 ) -> Iterator[Record]:
    """Every record of a finished file (its last line may lack a newline)."""
    bad = bad if bad is not None else BadLines()
    with open(path, "rb") as f:
        lineno = 0
        while raw := f.readline(MAX_LINE_BYTES + 1):
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:  # never more than this in memory: skip the rest
                while raw and not raw.endswith(b"\n"):
                    raw = f.readline(MAX_READ)
                bad.skip(f"{path}:{lineno}", f"longer than {MAX_LINE_BYTES} bytes")
                continue
            try:
                rec = parse_record(raw, fmt, step_key)
            except BadLine as exc:
                bad.skip(f"{path}:{lineno}", str(exc))
                continue
            if rec is not None:
                yield rec


class LineTail:
    """One file followed line by line across appends, truncation and replacement (inode +
    offset), knowing each line's number. :meth:`lines` moves past a line only when its
    consumer asks for the next one: what was not consumed is read again."""

    def __init__(self, path: Path, state: Mapping[str, Any] | None = None) -> None:
        self.path = path
        state = state or {}
        self.inode: int | None = state.get("inode")
        self.offset = int(state.get("offset", 0))
        line = state.get("line")
        self.line: int | None = int(line) if line is not None else None  # lines before offset
        self.skipping = bool(state.get("skipping", False))  # inside an over-long line
        self.missing = False

    def state(self) -> dict[str, Any]:
        return {"inode": self.inode, "offset": self.offset, "line": self.line,
                "skipping": self.skipping}

    def _reset(self, why: str) -> None:
        logger.info("scalewatch follow: %s %s; reading it from the start", self.path, why)
        self.offset, self.line, self.skipping = 0, 0, False

    def _count_lines(self) -> int:
        """Lines before the offset (a state saved before line numbers were kept)."""
        n, left = 0, self.offset
        with open(self.path, "rb") as f:
            while left > 0:
                chunk = f.read(min(left, MAX_READ))
                if not chunk:
                    break
                n += chunk.count(b"\n")
                left -= len(chunk)
        return n

    def _stat(self) -> os.stat_result | None:
        try:
            st = os.stat(self.path)
        except OSError:
            if not self.missing:
                self.missing = True
                logger.info("scalewatch follow: %s is not there; waiting for it", self.path)
            return None
        if self.missing:
            self.missing = False
            logger.info("scalewatch follow: %s is there; reading it", self.path)
        return st

    def lines(self) -> Iterator[tuple[int, bytes | None]]:
        """(line number, the line's bytes) of each complete new line; bytes None for a line
        longer than MAX_LINE_BYTES (skipped up to its newline once the consumer moves on)."""
        st = self._stat()
        if st is None:
            return
        if st.st_ino != self.inode:
            if self.inode is not None:
                self._reset("was replaced")
            self.inode, self.offset, self.line, self.skipping = st.st_ino, 0, 0, False
        elif st.st_size < self.offset:
            self._reset("was truncated")
        if self.line is None:
            self.line = self._count_lines()
        budget = MAX_PASS_BYTES
        while budget > 0 and st.st_size > self.offset:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read(MAX_READ)
            except OSError:
                return
            budget -= len(data)
            if self.skipping:  # the rest of an over-long line: drop it up to its newline
                end = data.find(b"\n")
                self.offset += len(data) if end < 0 else end + 1
                self.skipping = end < 0
                continue
            start = 0
            while True:
                end = data.find(b"\n", start)
                if end < 0:
                    break
                lineno = self.line + 1
                yield lineno, data[start:end]
                self.offset += end + 1 - start  # consumed: past its newline
                self.line = lineno
                start = end + 1
            if start == 0 and len(data) >= MAX_LINE_BYTES:
                yield self.line + 1, None  # no newline in a whole chunk: an over-long line
                self.offset += len(data)
                self.line += 1
                self.skipping = True
            elif start == 0 or len(data) < MAX_READ:
                return  # a partial last line: wait for the rest of it
            st = self._stat()
            if st is None:
                return


class LineFollower(Follower):
    """Tails one JSON-lines file into a run; :meth:`poll_once` is one pass."""

    def __init__(self, fmt: str, path: str | os.PathLike[str], run: Run, step_key: str = "step",
                 compute: str = "step") -> None:
        super().__init__(path, run, compute)
        self.fmt, self.step_key = fmt, step_key
        self.tail = LineTail(self.path, self.saved.get("tail"))

    def _tail_state(self) -> Any:
        return self.tail.state()

    def _records(self) -> Iterator[tuple[int, dict[str, float], float | None]]:
        for lineno, raw in self.tail.lines():
            self.where = f"{self.path}:{lineno}"
            if raw is None:
                self.bad.skip(self.where, f"longer than {MAX_LINE_BYTES} bytes")
                continue
            try:
                rec = parse_record(raw, self.fmt, self.step_key)
            except BadLine as exc:
                self.bad.skip(self.where, str(exc))
                continue
            if rec is not None:
                yield rec[0], rec[1], None
