"""Waiting for something that happens in another thread or process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 60.0, interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy and return that.

    Raises AssertionError after ``timeout`` seconds, so a test that waits fails where it waited.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
