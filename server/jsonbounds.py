"""Bounds on a JSON body's shape, checked on its bytes before any parser sees them.

A parser turns every `[]` into a list and every `{}` into a dict: 62 MB of nested brackets
(a 154 KB gzip body) became 3 GB of Python objects and 32 s of a blocked event loop before
validation could refuse it. `JsonScanner` reads the bytes (chunk by chunk, as they are inflated)
and counts what the parse would build, refusing as soon as the body nests deeper than
`limits.MAX_JSON_DEPTH` or holds more containers or values than the route can accept, so such a
body is refused after its first chunk, having cost a scan of that chunk and nothing else.

The scan works on whole chunks with bytes methods (all in C): escapes are removed, the bytes
are split on quotes to drop string contents (a metric named "loss[" must not count), and only
then are brackets counted; the depth needs a running sum, taken in numpy over the brackets
alone. It does not validate JSON (the parser does): malformed input only has to be counted
no lower than the parser would build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from scalewatch.server import limits

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
# +1 for an opening bracket, -1 for a closing one (indexed by byte value)
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


class JsonShapeError(ValueError):
    """The body is nested too deeply (400) or holds too much (413): `status` says which."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class JsonBounds:
    """What a route's body may hold: nesting depth, containers (objects and arrays) and values
    (roughly its commas: members and elements)."""

    max_depth: int = limits.MAX_JSON_DEPTH
    max_containers: int = limits.MAX_JSON_CONTAINERS
    max_values: int = limits.MAX_JSON_VALUES


class JsonScanner:
    """Feed a body's bytes in order (`feed`); raises JsonShapeError at the first chunk that
    takes the body past its bounds."""

    def __init__(self, bounds: JsonBounds = JsonBounds()) -> None:
        self.bounds = bounds
        self.depth = 0
        self.containers = 0
        self.values = 0
        self.offset = 0  # bytes seen so far, for the message
        self._in_string = False
        self._carry = b""  # a trailing backslash whose escaped byte is in the next chunk

    def feed(self, chunk: bytes) -> None:
        start = self.offset
        self.offset += len(chunk)
        if self._carry:
            chunk, self._carry = self._carry + chunk, b""
        if b"\\" in chunk:
            tail = len(chunk) - len(chunk.rstrip(b"\\"))
            if tail % 2:  # the last backslash escapes a byte not read yet
                chunk, self._carry = chunk[:-1], b"\\"
            chunk = _ESCAPE.sub(b"", chunk)  # escaped quotes no longer end a string
        if b'"' in chunk:
            parts = chunk.split(b'"')
            outside = b"".join(parts[1::2] if self._in_string else parts[0::2])
            if len(parts) % 2 == 0:  # an odd number of quotes: the string state flips
                self._in_string = not self._in_string
        elif self._in_string:
            return
        else:
            outside = chunk
        self._count(outside, start)

    def _count(self, outside: bytes, start: int) -> None:
        bounds = self.bounds
        self.values += outside.count(b",")
        if self.values > bounds.max_values:
            raise JsonShapeError(
                413, f"body holds more than {bounds.max_values} JSON values "
                f"(by byte {self.offset})",
            )
        brackets = outside.translate(None, _NOT_BRACKETS)
        if not brackets:
            return
        opens = brackets.count(b"[") + brackets.count(b"{")
        if self.depth + opens > bounds.max_depth:  # else it cannot have gone too deep
            steps = _STEP[np.frombuffer(brackets, dtype=np.uint8)]
            running = np.cumsum(steps, dtype=np.int32)  # a body is far below 2**31 bytes
            if self.depth + int(running.max()) > bounds.max_depth:
                raise JsonShapeError(
                    400, f"body is not valid JSON: nested deeper than {bounds.max_depth} levels "
                    f"(between bytes {start} and {self.offset})",
                )
        self.containers += opens
        if self.containers > bounds.max_containers:
            raise JsonShapeError(
                413, f"body holds more than {bounds.max_containers} JSON objects and arrays "
                f"(by byte {self.offset})",
            )
        self.depth += opens - (len(brackets) - opens)


def check_json_shape(data: bytes, bounds: JsonBounds = JsonBounds()) -> None:
    """JsonShapeError when the whole body `data` is past `bounds`."""
    JsonScanner(bounds).feed(data)
