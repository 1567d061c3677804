"""Fixtures shared by the client tests."""

from __future__ import annotations

import pytest

from trainer_client import sender


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff from 0.05 s capped at 0.5 s and no fsync: fake servers answer at once."""
    monkeypatch.setattr(sender, "BACKOFF_BASE", 0.05)
    monkeypatch.setattr(sender, "BACKOFF_CAP", 0.5)
    monkeypatch.setenv("SCALEWATCH_FSYNC", "0")


@pytest.fixture
def bounded_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real backoff base with a 3 s cap (the 30 s cap is unit-tested), and no fsync."""
    monkeypatch.setattr(sender, "BACKOFF_CAP", 3.0)
    monkeypatch.setenv("SCALEWATCH_FSYNC", "0")
