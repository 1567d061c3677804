"""A server's processes, read from /proc (Linux): its children, and which is its refit process
(`server/refit_process.py`)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """The direct children of `pid` (every thread's)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out.extend(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    out, frontier = [], [pid]
    while frontier:
        frontier = [c for p in frontier for c in children(p)]
        out += frontier
    return out


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def is_refit_process(pid: int) -> bool:
    return b"scalewatch.server.refit_process" in cmdline(pid)
