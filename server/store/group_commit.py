"""Group commit: the items of concurrent callers written together, in one transaction.

A request's ingest costs the server ~2.3 ms of CPU whatever its size (20 or 100 steps of three
metrics: 2.2-2.6 ms), nearly all of it per statement and per round trip, not per row. Under load
many requests wait for the store at once; written as one group, they share those statements.

Leader and followers, no thread of its own: a caller that finds no group being written becomes
the leader, takes what is queued (at most one item per key: two batches of one run must be
applied in order, not side by side) and applies the group; every caller of the group gets its
own outcome, and leadership passes to the first caller still queued. Alone, a caller is a group
of one, written exactly as it would have been without this module.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

# What `apply` returns for each item, in order: its result, or the exception its caller raises.
Outcomes = list[Any]


def together_else_each(
    items: Sequence[T],
    write_together: Callable[[Sequence[T]], Sequence[Any]],
    write_one: Callable[[T], Any],
) -> list[Any]:
    """An `apply` for writes: several items with `write_together` (one transaction; it returns
    each item's outcome, None for one it left to be written on its own), a lone item or a left
    one with `write_one`. If `write_together` raises, its transaction wrote nothing: every
    item is written on its own, so one item's failure is never another's."""
    outcomes: Sequence[Any] = [None] * len(items)
    if len(items) > 1:
        try:
            outcomes = write_together(items)
        except Exception:
            log.warning("a group of %d writes failed; writing each on its own", len(items),
                        exc_info=True)
            outcomes = [None] * len(items)
    return [_one(write_one, item) if o is None else o
            for o, item in zip(outcomes, items, strict=True)]


def _one(write_one: Callable[[T], Any], item: T) -> Any:
    try:
        return write_one(item)
    except Exception as exc:  # raised in the item's own caller
        return exc


class _Slot(Generic[T]):
    __slots__ = ("item", "key", "woken", "lead", "outcome")

    def __init__(self, item: T, key: Hashable) -> None:
        self.item = item
        self.key = key
        self.woken = threading.Event()
        self.lead = False  # woken to lead the next group, not with an outcome
        self.outcome: object = None


class GroupCommit(Generic[T, R]):
    """`submit(item)` from any number of threads; `apply(items)` runs in one of them at a time
    and returns one outcome per item (a result, or an exception to raise in its caller)."""

    def __init__(
        self,
        apply: Callable[[list[T]], Outcomes],
        key: Callable[[T], Hashable],
        max_items: int,
    ) -> None:
        self._apply = apply
        self._key = key
        self._max_items = max_items
        self._lock = threading.Lock()
        self._queue: list[_Slot[T]] = []
        self._busy = False  # a leader is taking or writing a group
        self.groups = 0  # groups written and items in them (for /metrics and the benches)
        self.items = 0

    def submit(self, item: T) -> R:
        slot: _Slot[T] = _Slot(item, self._key(item))
        with self._lock:
            self._queue.append(slot)
            lead = not self._busy
            self._busy = True
        if not lead:
            slot.woken.wait()
            if not slot.lead:
                return self._result(slot)
        self._lead()
        return self._result(slot)

    def _lead(self) -> None:
        """Write one group (the leader's own item is the queue's first), then hand over."""
        group = self._take()
        try:
            try:
                outcomes = self._apply([s.item for s in group])
                if len(outcomes) != len(group):
                    raise RuntimeError(f"{len(outcomes)} outcomes for {len(group)} items")
            except BaseException as exc:  # every caller of the group sees what went wrong
                # (BaseException too: a caller left without an outcome would wait forever)
                outcomes = [exc] * len(group)
            for s, outcome in zip(group, outcomes, strict=True):
                s.outcome = outcome
            for s in group[1:]:
                s.woken.set()
        finally:
            with self._lock:
                self.groups += 1
                self.items += len(group)
                if self._queue:
                    head = self._queue[0]
                    head.lead = True
                    head.woken.set()
                else:
                    self._busy = False

    def _take(self) -> list[_Slot[T]]:
        with self._lock:
            group: list[_Slot[T]] = []
            keys: set[Hashable] = set()
            rest: list[_Slot[T]] = []
            for s in self._queue:
                if len(group) < self._max_items and s.key not in keys:
                    keys.add(s.key)
                    group.append(s)
                else:
                    rest.append(s)
            self._queue = rest
            return group

    @staticmethod
    def _result(slot: _Slot[T]) -> R:
        if isinstance(slot.outcome, BaseException):
            raise slot.outcome
        return slot.outcome  # type: ignore[return-value]
