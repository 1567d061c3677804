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

import contextlib
import importlib
import json
import logging
import math
import os
import re
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, cast

from trainer_client.limits import MAX_METRIC_NAME_LENGTH, MAX_STEP
from trainer_client.records import BadLines, Follower
from trainer_client.run import Run
from trainer_client.validation import metric_name_problem

logger = logging.getLogger("scalewatch.follow")

Record = tuple[int, dict[str, float]]
MAX_DEPTH = 32  # nested objects flattened into metric names ("a/b/c"): deeper is not a record
MAX_READ = 8 * 1024 * 1024  # bytes read per chunk
MAX_LINE_BYTES = MAX_READ  # a line without a newline within this many bytes is skipped
MAX_PASS_BYTES = 8 * MAX_READ  # read per pass at most (then the state is saved)
CHECK_BYTES = 256  # bytes before the offset kept to recognise the file read so far
# A rotated file compressed at once (logrotate ``compress`` without ``delaycompress``) is read
# through its decompressor: the lines written since the last pass are only there.
DECOMPRESSORS = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a log can raise: the file's own errors, and a compressed file cut short
    (still being written) or corrupt.  The decompressors are standard library modules that a
    Python built without their C library lacks: then only their files are unreadable."""
    errors: list[type[BaseException]] = [OSError, EOFError, ValueError, ImportError]
    for module, name in (("zlib", "error"), ("lzma", "LZMAError")):
        with contextlib.suppress(ImportError):
            errors.append(getattr(importlib.import_module(module), name))
    return tuple(errors)


READ_ERRORS = _read_errors()


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading its bytes, through its decompressor when it is a
    compressed rotation (ImportError when this Python lacks that decompressor)."""
    module = DECOMPRESSORS.get(Path(path).suffix)
    if module is None:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    return cast(BinaryIO, importlib.import_module(module).open(path, "rb"))


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
            if not math.isfinite(v) or not 0 < len(name) <= MAX_METRIC_NAME_LENGTH:
                continue  # NaN/inf dropped as log() drops them; over-long names skipped
            problem = metric_name_problem(name)
            if problem:
                raise BadLine(f"metric name {_short(name)} {problem}")
            yield name, v


_MISSING = object()


def _lookup(obj: Mapping[str, Any], key: str) -> Any:
    """``obj[key]``, or for a key with "/" the nested value it names (metric names are the
    nested keys joined with "/", so ``--step-key trainer/global_step`` reads
    ``{"trainer": {"global_step": 7}}`` as it names the metric); ``_MISSING`` when absent."""
    if key in obj:
        return obj[key]
    node: Any = obj
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


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
    # A byte-order mark (a file written by Windows tools or `utf-8-sig`) opens the first line:
    # json.loads refuses it, and that line was lost.
    line = line.strip().lstrip("\ufeff")
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
    step = _lookup(obj, step_key)
    if step is _MISSING:
        raise BadLine(f"no {step_key!r}")
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
    """Every record of a finished file (its last line may lack a newline), read through its
    decompressor when it is compressed (an archived train.jsonl.gz)."""
    bad = bad if bad is not None else BadLines()
    with open_log(path) as f:
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
    """One file followed line by line across appends, truncation and replacement, knowing each
    line's number. :meth:`lines` moves past a line only when its consumer asks for the next
    one: what was not consumed is read again.

    The file read so far is known by its inode and by the bytes just before the offset
    (``check``): a file truncated and written past the offset again before the next pass
    (``copytruncate`` and a busy writer, a trainer relaunched that opens its log with "w")
    keeps its inode and grows, and only those bytes tell that it is not the file read so far.
    When PATH is no longer that file, the lines written to it since the last pass are read
    first where it is now -- renamed next to PATH (logrotate ``create``: found by its inode)
    or copied there (``copytruncate``: found by those bytes), compressed or not -- then PATH
    from its start."""

    def __init__(self, path: Path, state: Mapping[str, Any] | None = None) -> None:
        self.path = path
        state = state or {}
        self.inode: int | None = state.get("inode")
        self.offset = int(state.get("offset", 0))
        line = state.get("line")
        self.line: int | None = int(line) if line is not None else None  # lines before offset
        self.skipping = bool(state.get("skipping", False))  # inside an over-long line
        # The last bytes before the offset (empty: nothing read, or a state saved before they
        # were kept).
        self.check = bytes.fromhex(str(state.get("check", "")))
        self.missing = False

    def state(self) -> dict[str, Any]:
        return {"inode": self.inode, "offset": self.offset, "line": self.line,
                "skipping": self.skipping, "check": self.check.hex()}

    def _reset(self, why: str) -> None:
        logger.info("scalewatch follow: %s %s; reading it from the start", self.path, why)
        self.offset, self.line, self.skipping, self.check = 0, 0, False, b""

    def _consume(self, data: bytes) -> None:
        """Move the offset past ``data``, the bytes at the offset."""
        self.offset += len(data)
        self.check = (self.check + data[-CHECK_BYTES:])[-CHECK_BYTES:]

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

    def _continues(self, path: str | os.PathLike[str], more: bool = False) -> bool:
        """Whether ``path`` holds the bytes read just before the offset (True when there is
        nothing to compare) and, with ``more``, at least one byte after them.  A compressed
        file is read through its decompressor (a forward seek decompresses up to it)."""
        if not self.check:
            return True
        try:
            with open_log(path) as f:
                f.seek(self.offset - len(self.check))
                return (f.read(len(self.check)) == self.check
                        and (not more or len(f.read(1)) == 1))
        except READ_ERRORS:
            return False  # gone, or a compressed file cut short or corrupt: not ours

    def _rotated(self) -> tuple[Path, int] | None:
        """(path, inode) of the file read so far, now under another name next to PATH with
        more in it than was read: renamed (its inode, and the bytes before the offset: an
        inode can be reused) or copied (those bytes). Only names that start with PATH's stem
        are looked at (train.jsonl.1, train.jsonl-20261204, train-20261204.jsonl), and
        compressed ones (train.jsonl.1.gz, .bz2, .xz: a copy compressed at once, known by the
        bytes read, decompressed)."""
        found: list[tuple[bool, bool, float, Path, int]] = []
        try:
            entries = list(os.scandir(self.path.parent))
        except OSError:
            return None
        for entry in entries:
            if entry.name == self.path.name or not entry.name.startswith(self.path.stem):
                continue
            compressed = Path(entry.name).suffix in DECOMPRESSORS
            try:
                renamed = entry.inode() == self.inode and not compressed
                if not (renamed or self.check) or not entry.is_file():
                    continue  # a copy is known only by the bytes read
                st = entry.stat()
            except OSError:
                continue
            if compressed:
                holds = self._continues(entry.path, more=True)  # its size says nothing
            else:
                holds = st.st_size > self.offset and self._continues(entry.path)
            if holds:
                found.append((renamed, not compressed, st.st_mtime, Path(entry.path),
                              entry.inode()))
        if not found:
            return None
        # The renamed file, else the newest plain copy (a compressed one may still be being
        # written next to the copy it is made from), else the newest compressed one.
        *_, path, inode = max(found)
        return path, inode

    def _newer_generations(self, read: Path, inode: int) -> list[tuple[Path, int]]:
        """(path, inode) of the rotated files next to PATH written after ``read`` (the file
        just read to its end), oldest first: by modification time, which a rename keeps and a
        copy (``copytruncate``) sets when it is made. A compressed file is left out when its
        plain twin is there (being compressed from it), and so is any name of ``read``'s."""
        try:
            after = os.stat(read).st_mtime
            entries = list(os.scandir(self.path.parent))
        except OSError:
            return []
        names = {e.name for e in entries}
        # Only a generation's name (read without checking its bytes, unlike the file read so
        # far): PATH's name or stem with a number or date (train.jsonl.1, train.jsonl-20261204,
        # train-20261204.jsonl), compressed or not; never train_eval.jsonl beside train.jsonl.
        packed = "(?:" + "|".join(re.escape(z) for z in DECOMPRESSORS) + ")?"
        generation = re.compile(
            f"(?:{re.escape(self.path.name)}[-._]\\d[-._\\d]*"
            f"|{re.escape(self.path.stem)}[-._]\\d[-._\\d]*{re.escape(self.path.suffix)}){packed}")
        found: list[tuple[float, str, Path, int]] = []
        for entry in entries:
            name = entry.name
            if not generation.fullmatch(name):
                continue
            plain = Path(name).stem if Path(name).suffix in DECOMPRESSORS else None
            if plain is not None and (plain in names or plain == read.name):
                continue
            try:
                if entry.inode() == inode or not entry.is_file():
                    continue
                mtime = entry.stat().st_mtime
            except OSError:
                continue
            if mtime > after:
                found.append((mtime, name, Path(entry.path), entry.inode()))
        return [(path, ino) for _, _, path, ino in sorted(found)]

    def lines(self) -> Iterator[tuple[int, bytes | None]]:
        """(line number, the line's bytes) of each complete new line; bytes None for a line
        longer than MAX_LINE_BYTES (skipped up to its newline once the consumer moves on)."""
        st = self._stat()
        if st is None:
            return
        if self.inode is None:
            self.inode, self.offset, self.line, self.skipping = st.st_ino, 0, 0, False
            self.check = b""
        elif st.st_ino != self.inode or st.st_size < self.offset or (
                st.st_size > self.offset and not self._continues(self.path)):
            why = ("was replaced" if st.st_ino != self.inode else
                   "was truncated" if st.st_size < self.offset else "was rewritten")
            rotated = self._rotated()
            if rotated is not None:
                logger.info("scalewatch follow: %s %s; first reading what was added to it "
                            "before, from %s", self.path, why, rotated[0])
                if not (yield from self._read(*rotated)):
                    return  # more than a pass: the next one finds it again and goes on
                # Rotated more than once since the last pass (a fast writer, a follower that
                # was stopped): the generations written after the one just read, oldest first.
                for path, inode in self._newer_generations(*rotated):
                    self._reset(f"was rotated again; reading {path.name}, written after it,")
                    self.inode = inode
                    if not (yield from self._read(path, inode)):
                        return  # the next pass finds this one by its inode and goes on
            self._reset(why)
            # PATH looked at again: taking the inode of the first look would name the file
            # just read if PATH was replaced meanwhile, and it would be read again.
            st = self._stat()
            if st is None:
                self.inode = None  # the next pass takes whatever file is there from its start
                return
            self.inode = st.st_ino
        yield from self._read(self.path, st.st_ino)

    def _read(self, path: Path, inode: int) -> Generator[tuple[int, bytes | None], None, bool]:
        """The complete lines of ``path`` past the offset, read from one open file (``inode``;
        a file replaced since it was looked at is left to the next pass); True when they
        were all read, False when the pass's budget ran out or the file could not be read."""
        try:
            f = open_log(path)  # noqa: SIM115 - closed by the with below, also on close()
        except READ_ERRORS:
            return False
        with f:
            try:
                if os.fstat(f.fileno()).st_ino != inode:
                    return False
                if self.line is None:  # a state saved before line numbers were kept
                    self.line = _count_lines(f, self.offset)
            except READ_ERRORS:
                return False
            budget = MAX_PASS_BYTES
            while budget > 0:
                try:
                    if f.tell() != self.offset:  # a compressed file seeks back by rereading
                        f.seek(self.offset)
                    data = f.read(MAX_READ)
                except READ_ERRORS:
                    return False
                if not data:
                    return True
                budget -= len(data)
                if self.skipping:  # the rest of an over-long line: drop it up to its newline
                    end = data.find(b"\n")
                    self._consume(data if end < 0 else data[: end + 1])
                    self.skipping = end < 0
                    continue
                start = 0
                while True:
                    end = data.find(b"\n", start)
                    if end < 0:
                        break
                    lineno = self.line + 1
                    yield lineno, data[start:end]
                    self._consume(data[start : end + 1])  # consumed: past its newline
                    self.line = lineno
                    start = end + 1
                if start == 0 and len(data) >= MAX_LINE_BYTES:
                    yield self.line + 1, None  # no newline in a whole chunk: an over-long line
                    self._consume(data)
                    self.line += 1
                    self.skipping = True
                elif start == 0 or len(data) < MAX_READ:
                    return True  # a partial last line: wait for the rest of it
            return False


def _count_lines(f: BinaryIO, offset: int) -> int:
    """Lines before ``offset`` in ``f``."""
    n, left = 0, offset
    f.seek(0)
    while left > 0:
        chunk = f.read(min(left, MAX_READ))
        if not chunk:
            break
        n += chunk.count(b"\n")
        left -= len(chunk)
    return n


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
