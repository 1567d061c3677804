from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_app


@pytest.fixture
def live_app(database_url: str) -> Iterator[tuple]:
    """App with the refitter, stalled timer and webhook sender running; fast retries."""
    app = make_app(
        database_url, workers=True, refit_interval=0.05, alert_interval=0.2, webhook_backoff=0.2
    )
    with TestClient(app) as client:
        yield app, client
    app.state.store.engine.dispose()
