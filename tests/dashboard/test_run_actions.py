"""Issue 36 item 5: the Run page renames a run (write scope) and deletes it (admin scope, as
the API; after a confirmation), through its Dash callbacks over HTTP with a session of each
scope (SQLite and PostgreSQL). The new name gets the API's checks."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.scopes import AUTH_COOKIE
from tests.security.conftest import Authed, authed_app


@pytest.fixture
def authed_db(database_url: str) -> Iterator[Authed]:
    yield from authed_app(database_url)


def _session(c: TestClient, token: str) -> None:
    c.cookies.clear()
    r = c.post("/login", data={"token": token, "next": "/dashboard/"}, follow_redirects=False)
    assert r.status_code == 303 and AUTH_COOKIE in c.cookies


def _said(r) -> str:  # noqa: ANN001
    assert r.status_code == 200, r.text
    return json.dumps(r.json()["response"])


def test_rename_from_the_run_page(authed_db: Authed) -> None:
    c, store = authed_db.client, authed_db.app.state.store
    rid = store.get_or_create_run("p", "old")[0].id
    store.get_or_create_run("p", "taken")
    _session(c, authed_db.tokens["read"])
    deps = c.get("/dashboard/_dash-dependencies").json()

    def rename(name: object) -> str:
        return _said(dash_call(c, "run-actions-msg", {
            "run-id.data": rid, "run-rename-name.value": name, "run-rename-btn.n_clicks": 1,
        }, changed=["run-rename-btn.n_clicks"], deps=deps))  # fmt: skip

    assert "run-rename-denied" in rename("new")  # read scope
    assert store.get_run(rid).name == "old"
    _session(c, authed_db.tokens["write"])
    said = rename("taken")
    assert "run-rename-bad" in said and "already has a run named" in said
    assert "must not be blank" in rename("  ")
    assert "run-rename-bad" in rename("x" * 201)
    said = rename("new")
    assert "run-rename-ok" in said and f"/dashboard/run/{rid}" in said  # the page reloads
    assert store.get_run(rid).name == "new"


def test_delete_from_the_run_page_needs_admin_and_a_confirmation(authed_db: Authed) -> None:
    c, store = authed_db.client, authed_db.app.state.store
    rid = store.get_or_create_run("p", "doomed")[0].id
    _session(c, authed_db.tokens["write"])
    deps = c.get("/dashboard/_dash-dependencies").json()
    asked = _said(dash_call(c, "run-delete-confirm", {
        "run-id.data": rid, "run-delete-btn.n_clicks": 1}, deps=deps))  # fmt: skip
    assert "Delete run 'doomed' of project 'p'" in asked and "true" in asked

    # the rename and the delete share their outputs: pick the callback the dialog triggers
    on_confirm = [d for d in deps if any(i["id"] == "run-delete-confirm" for i in d["inputs"])]

    def confirm() -> str:
        return _said(dash_call(c, "run-goto", {
            "run-id.data": rid, "run-delete-confirm.submit_n_clicks": 1,
        }, changed=["run-delete-confirm.submit_n_clicks"], deps=on_confirm))  # fmt: skip

    assert "run-delete-denied" in confirm() and "admin scope" in confirm()
    assert store.get_run(rid).name == "doomed"
    _session(c, authed_db.tokens["admin"])
    said = confirm()
    assert "run-delete-ok" in said and '"/dashboard/"' in said
    assert c.get(f"/api/v1/runs/{rid}", headers=authed_db.h("admin")).status_code == 404


@pytest.mark.parametrize("name", ["  ", "x" * 201, ""])  # NUL: refused before any callback
def test_a_bad_name_gets_the_apis_answer(authed_db: Authed, name: str) -> None:
    """Issue 37 item 3: the Run page's rename goes through the API's checks (`RunPatch`, via
    `services.runs.rename_run`): a name the API refuses with a 422 is refused here with the
    same message, and nothing changes."""
    c, store = authed_db.client, authed_db.app.state.store
    rid = store.get_or_create_run("p", "keep")[0].id
    api = c.patch(f"/api/v1/runs/{rid}", json={"name": name}, headers=authed_db.h("write"))
    assert api.status_code == 422, api.text
    error = api.json()["errors"][0]
    _session(c, authed_db.tokens["write"])
    said = _said(dash_call(c, "run-actions-msg", {
        "run-id.data": rid, "run-rename-name.value": name, "run-rename-btn.n_clicks": 1,
    }, changed=["run-rename-btn.n_clicks"]))  # fmt: skip
    assert "run-rename-bad" in said
    assert json.dumps(f"{error['loc']}: {error['msg']}")[1:-1] in said
    assert store.get_run(rid).name == "keep"
