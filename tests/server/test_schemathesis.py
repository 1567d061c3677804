"""Property-based fuzzing of the whole OpenAPI schema: no input may produce a 5xx."""

from __future__ import annotations

import pytest

pytest.importorskip("schemathesis")
import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.conftest import make_app  # noqa: E402

_APP = {}


def _app(url: str):
    if url not in _APP:
        app = make_app(url)
        store = app.state.store
        run, _ = store.get_or_create_run("fuzz", "seed")
        from scalewatch.server.ingest import PointRow

        store.ingest_points(
            run.id, [PointRow("reward", s, s * 1.0, 0.1, None) for s in range(30)]
        )
        _APP[url] = app
    return _APP[url]


@pytest.fixture(params=["sqlite", "postgresql"])
def fuzz_app(request, postgres, tmp_path_factory):
    from tests.support.databases import migrated_sqlite, require_postgres

    if request.param == "sqlite":
        url = migrated_sqlite(tmp_path_factory.mktemp("fuzz"), "f.db")
    else:
        require_postgres(postgres)
        url = postgres.new_database()
    return _app(url)


def test_no_input_causes_a_server_error(fuzz_app):
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)
    failures = []
    statuses: list[int] = []

    def make_check(op):  # noqa: ANN001, ANN202 - one hypothesis test per operation
        @settings(
            max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=op.as_strategy())
        def check(case):  # noqa: ANN001, ANN202
            response = case.call()
            statuses.append(response.status_code)
            if response.status_code >= 500:
                failures.append((op.label, case.body, response.status_code, response.text[:300]))

        return check

    for operation in schema.get_all_operations():
        make_check(operation.ok())()
    assert not failures, failures[:5]
    # The fuzzer really exercised the API: many calls, and both accepted and rejected inputs.
    assert len(statuses) > 100
    assert any(s < 300 for s in statuses) and any(400 <= s < 500 for s in statuses)
