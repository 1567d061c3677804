"""Issue 36 item 5: `PATCH /api/v1/runs/{id}` `{"name": ...}` renames a run, with the checks a
new run's name gets, and 409 when its project already has a run of that name (SQLite and
PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scalewatch.server import limits
from tests.security.conftest import Authed, authed_app


@pytest.fixture
def authed_db(database_url: str) -> Iterator[Authed]:
    yield from authed_app(database_url)


def _run(api, name: str, project: str = "p") -> int:  # noqa: ANN001
    r = api.post("/api/v1/runs", json={"project": project, "name": name})
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def test_rename_a_run(api) -> None:  # noqa: ANN001
    rid = _run(api, "old")
    r = api.patch(f"/api/v1/runs/{rid}", json={"name": "new name"})
    assert r.status_code == 200 and r.json()["name"] == "new name"
    assert api.get(f"/api/v1/runs/{rid}").json()["name"] == "new name"
    names = [x["name"] for x in api.get("/api/v1/runs", params={"project": "p"}).json()["runs"]]
    assert names == ["new name"]
    # the old name is free again: creating it makes a new run, not a resume of this one
    assert _run(api, "old") != rid
    # the same name again is no change, not a conflict with itself
    assert api.patch(f"/api/v1/runs/{rid}", json={"name": "new name"}).status_code == 200


def test_a_taken_name_is_409_and_nothing_changes(api) -> None:  # noqa: ANN001
    a, b = _run(api, "a"), _run(api, "b")
    _run(api, "a", project="other")  # another project's run of that name is no conflict
    r = api.patch(f"/api/v1/runs/{b}", json={"name": "a", "notes": "x"})
    assert r.status_code == 409 and "already has a run named 'a'" in r.json()["detail"]
    got = api.get(f"/api/v1/runs/{b}").json()
    assert got["name"] == "b" and not got.get("notes")  # no partial write
    assert api.get(f"/api/v1/runs/{a}").json()["name"] == "a"
    assert api.patch(f"/api/v1/runs/{b}", json={"name": "a2"}).status_code == 200


@pytest.mark.parametrize(
    "name", ["", "   ", "x\x00y", "x" * (limits.MAX_NAME_LENGTH + 1), None, 5],
)
def test_bad_names_are_422_as_on_create(api, name: object) -> None:  # noqa: ANN001
    rid = _run(api, "keep")
    r = api.patch(f"/api/v1/runs/{rid}", json={"name": name})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == "name"
    assert api.get(f"/api/v1/runs/{rid}").json()["name"] == "keep"


def test_renaming_a_missing_run_is_404(api) -> None:  # noqa: ANN001
    assert api.patch("/api/v1/runs/424242", json={"name": "x"}).status_code == 404


def test_rename_needs_write_scope(authed_db: Authed) -> None:
    c = authed_db.client
    rid = c.post("/api/v1/runs", json={"project": "p", "name": "r"},
                 headers=authed_db.h("write")).json()["id"]  # fmt: skip
    r = c.patch(f"/api/v1/runs/{rid}", json={"name": "s"}, headers=authed_db.h("read"))
    assert r.status_code == 403
    r = c.patch(f"/api/v1/runs/{rid}", json={"name": "s"}, headers=authed_db.h("write"))
    assert r.status_code == 200 and r.json()["name"] == "s"
