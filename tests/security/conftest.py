"""Fixtures of the security tests: in-process apps with auth on, tokens of every scope."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_app


class Authed:
    def __init__(self, app: Any, client: TestClient, tokens: dict[str, str]) -> None:
        self.app = app
        self.client = client
        self.tokens = tokens

    def h(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}


def authed_app(url: str, **extra: object) -> Iterator[Authed]:
    app = make_app(url, auth=True, **extra)
    store = app.state.store
    tokens = {s: store.create_token(f"t-{s}", s)[1] for s in ("read", "write", "admin")}
    with TestClient(app) as client:
        yield Authed(app, client, tokens)
    app.state.store.engine.dispose()


@pytest.fixture
def authed(sqlite_url: str) -> Iterator[Authed]:
    """Auth on, SQLite, no background workers."""
    yield from authed_app(sqlite_url)


@pytest.fixture
def authed_db(database_url: str) -> Iterator[Authed]:
    """Auth on, on SQLite and on PostgreSQL."""
    yield from authed_app(database_url)
