"""GroupCommit: concurrent callers' items applied together, each caller getting its own outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from scalewatch.server.store.group_commit import GroupCommit
from tests.support.polling import wait_for


class _Gate:
    """An `apply` whose first call blocks until released, recording every group it gets."""

    def __init__(self, outcome: Callable[[tuple[str, int]], object] = lambda it: it[1] * 10):
        self.groups: list[list[tuple[str, int]]] = []
        self.release = threading.Event()
        self.entered = threading.Event()
        self.outcome = outcome

    def __call__(self, items: list[tuple[str, int]]) -> list:
        self.groups.append(list(items))
        if len(self.groups) == 1:
            self.entered.set()
            assert self.release.wait(60)
        return [self.outcome(it) for it in items]


def _submit_in_thread(gc: GroupCommit, item: tuple[str, int], results: dict) -> threading.Thread:
    def run() -> None:
        try:
            results[item] = gc.submit(item)
        except BaseException as exc:  # noqa: BLE001 - what the caller would have raised
            results[item] = exc

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_caller_alone_is_a_group_of_one() -> None:
    gate = _Gate()
    gate.release.set()
    gc: GroupCommit = GroupCommit(gate, key=lambda it: it[0], max_items=8)
    assert gc.submit(("a", 1)) == 10
    assert gc.submit(("a", 2)) == 20
    assert gate.groups == [[("a", 1)], [("a", 2)]]
    assert (gc.groups, gc.items) == (2, 2)


def test_callers_waiting_meanwhile_are_written_together_one_item_per_key() -> None:
    gate = _Gate()
    gc: GroupCommit = GroupCommit(gate, key=lambda it: it[0], max_items=3)
    results: dict = {}
    threads = [_submit_in_thread(gc, ("a", 1), results)]
    assert gate.entered.wait(60)  # the first group is being written
    # While it is: five more, two of them for key "b" (applied in order, never side by side).
    for item in [("b", 2), ("c", 3), ("b", 4), ("d", 5), ("e", 6)]:
        threads.append(_submit_in_thread(gc, item, results))
        wait_for(lambda n=len(threads): len(gc._queue) == n - 1, timeout=60, interval=0.01)
    gate.release.set()
    for t in threads:
        t.join(60)
    assert results == {("a", 1): 10, ("b", 2): 20, ("c", 3): 30, ("b", 4): 40, ("d", 5): 50,
                       ("e", 6): 60}  # fmt: skip
    # At most three a group; the second "b" waits for the group after its first.
    assert gate.groups == [[("a", 1)], [("b", 2), ("c", 3), ("d", 5)], [("b", 4), ("e", 6)]]
    assert (gc.groups, gc.items) == (3, 6)


def test_an_items_exception_is_raised_in_its_own_caller_only() -> None:
    def outcome(it: tuple[str, int]) -> object:
        return ValueError(f"bad {it[0]}") if it[0] == "bad" else it[1]

    gate = _Gate(outcome)
    gc: GroupCommit = GroupCommit(gate, key=lambda it: it[0], max_items=8)
    results: dict = {}
    threads = [_submit_in_thread(gc, ("first", 0), results)]
    assert gate.entered.wait(60)
    for item in [("ok", 1), ("bad", 2), ("fine", 3)]:
        threads.append(_submit_in_thread(gc, item, results))
        wait_for(lambda n=len(threads): len(gc._queue) == n - 1, timeout=60, interval=0.01)
    gate.release.set()
    for t in threads:
        t.join(60)
    assert len(gate.groups) == 2
    assert results[("ok", 1)] == 1 and results[("fine", 3)] == 3
    assert isinstance(results[("bad", 2)], ValueError) and str(results[("bad", 2)]) == "bad bad"


class _Abort(BaseException):
    """Not an Exception (as KeyboardInterrupt is not): its group's callers must not hang."""


@pytest.mark.parametrize("error", [RuntimeError, _Abort])
def test_an_apply_that_raises_fails_its_group_and_the_next_group_still_runs(
    error: type[BaseException],
) -> None:
    calls: list[list] = []
    entered, release = threading.Event(), threading.Event()

    def apply(items: list) -> list:
        calls.append(list(items))
        if len(calls) == 1:
            entered.set()
            assert release.wait(60)
        if len(calls) == 2:
            raise error("database went away")
        return [it[1] for it in items]

    gc: GroupCommit = GroupCommit(apply, key=lambda it: it[0], max_items=2)
    results: dict = {}
    threads = [_submit_in_thread(gc, ("a", 1), results)]
    assert entered.wait(60)
    for item in [("b", 2), ("c", 3), ("d", 4)]:
        threads.append(_submit_in_thread(gc, item, results))
        wait_for(lambda n=len(threads): len(gc._queue) == n - 1, timeout=60, interval=0.01)
    release.set()
    for t in threads:
        t.join(60)
    assert results[("a", 1)] == 1 and results[("d", 4)] == 4
    for item in [("b", 2), ("c", 3)]:
        assert isinstance(results[item], error)
    assert calls == [[("a", 1)], [("b", 2), ("c", 3)], [("d", 4)]]
    assert gc.submit(("e", 5)) == 5  # and it is not left busy


def test_many_threads_each_get_their_own_result() -> None:
    threads = 8
    seen: list[int] = []
    lock = threading.Lock()

    def apply(items: list) -> list:
        with lock:
            seen.extend(n for _, n in items)
        return [n * 2 for _, n in items]

    gc: GroupCommit = GroupCommit(apply, key=lambda it: it[0], max_items=4)
    results: dict = {}

    def worker(k: int) -> None:
        for i in range(200):
            n = k * 1000 + i
            results[n] = gc.submit((f"key{k % 3}", n))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert results == {n: n * 2 for n in results} and len(results) == threads * 200
    assert sorted(seen) == sorted(results)  # each applied exactly once
    assert gc.items == threads * 200
