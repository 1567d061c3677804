"""The shapes a dashboard callback's inputs may take, as small checkable specs.

`callback_guard` checks every `_dash-update-component` request against these before Dash runs
a callback: a value of the wrong type, a list longer than its cap, an id outside the database's
32-bit range, a number that is not finite or text that cannot be stored is refused with a 400
naming the component and property, so callbacks only ever see values they were written for.
The specs are plain data (the fuzz test turns each into a generator of valid values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_SAFE_INT = 2**53  # the largest integer a browser's JSON reads exactly


class Refused(ValueError):
    """A callback input that does not have its declared shape; the message says where."""


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class Spec:
    def check(self, value: Any, where: str) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Int(Spec):
    lo: int
    hi: int

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refused(f"{where}: expected an integer, got {_kind(value)}")
        if not self.lo <= value <= self.hi:
            raise Refused(f"{where}: {value} is outside [{self.lo}, {self.hi}]")


@dataclass(frozen=True)
class Num(Spec):
    """A finite number (JSON's Infinity and NaN are refused) within [lo, hi]."""

    lo: float
    hi: float

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Refused(f"{where}: expected a number, got {_kind(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise Refused(f"{where}: {value} is not a finite number")
        if not self.lo <= value <= self.hi:
            raise Refused(f"{where}: {value:g} is outside [{self.lo:g}, {self.hi:g}]")


@dataclass(frozen=True)
class Text(Spec):
    """Text of at most `max_len` characters that can be stored and sent back: valid UTF-8 (no
    lone surrogates) and no NUL; `choices`, when given, are the only values allowed, and
    `prefix`, when given, is how the text must start."""

    max_len: int
    choices: tuple[str, ...] = ()
    prefix: str = ""

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, str):
            raise Refused(f"{where}: expected text, got {_kind(value)}")
        if len(value) > self.max_len:
            raise Refused(f"{where}: text longer than {self.max_len} characters")
        if "\x00" in value:
            raise Refused(f"{where}: text must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(f"{where}: text is not valid UTF-8") from None
        if self.choices and value not in self.choices:
            raise Refused(f"{where}: {value[:40]!r} is not one of {', '.join(self.choices)}")
        if not value.startswith(self.prefix):
            raise Refused(f"{where}: {value[:40]!r} does not start with {self.prefix!r}")


@dataclass(frozen=True)
class Bool(Spec):
    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, bool):
            raise Refused(f"{where}: expected true or false, got {_kind(value)}")


@dataclass(frozen=True)
class Maybe(Spec):
    """`inner`, or null (a component before its first value)."""

    inner: Spec

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            self.inner.check(value, where)


@dataclass(frozen=True)
class Either(Spec):
    options: tuple[Spec, ...]

    def check(self, value: Any, where: str) -> None:
        problems = []
        for option in self.options:
            try:
                option.check(value, where)
                return
            except Refused as exc:
                problems.append(str(exc).removeprefix(f"{where}: "))
        raise Refused(f"{where}: {'; or '.join(problems)}")


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec
    max_items: int

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise Refused(f"{where}: expected a list, got {_kind(value)}")
        if len(value) > self.max_items:
            raise Refused(f"{where}: {len(value)} items, at most {self.max_items} allowed")
        for i, item in enumerate(value):
            self.item.check(item, f"{where}[{i}]")


@dataclass(frozen=True)
class Record(Spec):
    """An object with these fields (`required` must be present); other keys are refused, or
    with `extra` checked by it (a table row's columns, a column's display options)."""

    fields: dict[str, Spec]
    required: frozenset[str] = field(default_factory=frozenset)
    extra: Spec | None = None
    max_key: int = 200  # characters of a key `extra` checks

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise Refused(f"{where}: expected an object, got {_kind(value)}")
        if missing := sorted(self.required - value.keys()):
            raise Refused(f"{where}: missing {', '.join(missing)}")
        unknown = sorted(str(k) for k in value.keys() - self.fields.keys())
        if unknown and self.extra is None:
            raise Refused(f"{where}: unknown key {unknown[0][:40]!r}")
        for key in unknown:
            Text(self.max_key).check(key, f"{where} key")
            if self.extra is not None:
                self.extra.check(value[key], f"{where}.{key}"[:200])
        for key, spec in self.fields.items():
            if key in value:
                spec.check(value[key], f"{where}.{key}")


@dataclass(frozen=True)
class Json(Spec):
    """Any JSON the server itself sent to the page and gets back as state (a change token, a
    table's rows): bounded in items per container, depth and text length, numbers finite."""

    max_items: int
    max_depth: int = 4
    max_text: int = 4096

    def check(self, value: Any, where: str, depth: int = 0) -> None:
        if depth > self.max_depth:
            raise Refused(f"{where}: nested deeper than {self.max_depth}")
        if isinstance(value, list | dict):
            if len(value) > self.max_items:
                raise Refused(f"{where}: {len(value)} items, at most {self.max_items} allowed")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    Text(self.max_text).check(key, f"{where} key")
                self.check(item, f"{where}[{key!r}]"[:200], depth + 1)
        elif isinstance(value, str):
            Text(self.max_text).check(value, where)
        elif isinstance(value, float) and not math.isfinite(value):
            raise Refused(f"{where}: {value} is not a finite number")
        elif isinstance(value, int) and not isinstance(value, bool) \
                and abs(value) > MAX_SAFE_INT:
            # echoed back to the page, it could not be encoded (nor read by the browser)
            raise Refused(f"{where}: integer beyond ±2^53")
