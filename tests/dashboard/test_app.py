"""The mounted dashboard in-process: routes, auth gate, login, and callbacks over HTTP."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.domain.changes import ProjectPatch
from scalewatch.server.ingest import PointRow
from scalewatch.server.refit import Refitter
from scalewatch.server.services.projects import update_project
from scalewatch.server.services.runs import update_run
from tests.conftest import make_app
from tests.dashboard.seed import CROSSING, series


def _seed(store) -> list[int]:  # noqa: ANN001
    ids = []
    for k, (name, params) in enumerate(CROSSING.items()):
        run, _ = store.get_or_create_run(
            "p", name, target_compute=20000.0, config={"lr": 0.1 * (k + 1)}, tags=["t"]
        )
        c, y = series(params, n=3000, seed=k)
        rows = [
            PointRow("val_pass_rate", i, float(ci), float(yi), None)
            for i, (ci, yi) in enumerate(zip(c, y, strict=True))
        ]
        store.ingest_points(run.id, rows)
        ids.append(run.id)
    return ids


@pytest.fixture
def client(sqlite_url: str):  # noqa: ANN201
    app = make_app(sqlite_url)
    with TestClient(app) as c:
        c.ids = _seed(app.state.store)  # type: ignore[attr-defined]
        yield c
    app.state.store.engine.dispose()


def test_pages_and_callbacks(client) -> None:  # noqa: ANN001
    assert client.get("/", follow_redirects=False).headers["location"] == "/dashboard/"
    assert client.get("/dashboard", follow_redirects=False).status_code in (307, 308)
    r = client.get("/dashboard/")
    assert r.status_code == 200 and "/dashboard/" in r.text
    # auth off: /login just goes to the dashboard
    assert client.get("/login", follow_redirects=False).status_code == 303
    deps = client.get("/dashboard/_dash-dependencies").json()
    runs = dash_call(client, "runs-table", {"runs-project.value": "p"}, deps=deps).json()
    rows = runs["response"]["runs-table"]["data"]
    assert {r["name"] for r in rows} == set(CROSSING)
    assert all(r["A"].startswith("no fit yet") for r in rows)  # the refitter is off here
    a, b = client.ids
    out = dash_call(
        client, "cmp-graph", {"cmp-ids.data": [a, b], "cmp-budget.value": "3000"}, deps=deps
    ).json()["response"]
    assert out["cmp-budget"]["value"] == 3000
    assert "downsampled" in out["cmp-note"]["children"]  # 3,000 points > 2,000 on screen
    params = out["cmp-params"]["data"]
    assert all("2,000" in p["points"] or "of 3,000" in p["points"] for p in params)
    run = dash_call(client, "run-graph", {"run-id.data": a}, deps=deps).json()["response"]
    assert run["run-cache"]["data"]["shown"] <= 2000
    assert run["run-cache"]["data"]["metric"] == "val_pass_rate"


def test_compare_route_still_matches_service(client) -> None:  # noqa: ANN001
    a, b = client.ids
    Refitter(client.app.state.store).run_once()  # /compare reads stored fits, never fits
    body = client.get("/api/v1/compare", params={"run": [a, b], "budget": 3000}).json()
    assert [r["id"] for r in body["runs"]] == [a, b]
    assert body["comparison"]["pairs"][0]["winner_at_budget"]["run"] in CROSSING


def test_auth_gate_and_login(sqlite_url: str) -> None:
    app = make_app(sqlite_url, auth=True)
    store = app.state.store
    _, read_token = store.create_token("r", "read")
    with TestClient(app) as c:
        r = c.get("/dashboard/run/1?metric=x", follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"] == "/login?next=/dashboard/run/1%3Fmetric%3Dx"
        assert c.get("/dashboard/_dash-layout").status_code == 401
        assert c.post("/dashboard/_dash-update-component", json={}).status_code == 401
        assert "Sign in" in c.get("/login").text
        bad = c.post("/login", content="token=nope&next=/dashboard/", follow_redirects=False)
        assert bad.status_code == 401 and "Unknown or revoked" in bad.text
        evil = c.post(
            "/login", content=f"token={read_token}&next=//evil.example/", follow_redirects=False
        )
        assert evil.headers["location"] == "/dashboard/"
        ok = c.post(
            "/login", content=f"token={read_token}&next=/dashboard/alerts",
            follow_redirects=False,
        )  # fmt: skip
        assert ok.status_code == 303 and ok.headers["location"] == "/dashboard/alerts"
        cookie = ok.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie
        assert c.get("/dashboard/_dash-layout").status_code == 200  # the cookie is sent now
        c.cookies.clear()
        bearer = {"Authorization": f"Bearer {read_token}"}
        assert c.get("/dashboard/_dash-layout", headers=bearer).status_code == 200
    store.engine.dispose()


def test_data_shapes_without_fits(sqlite_url: str) -> None:
    from scalewatch.dashboard import data

    app = make_app(sqlite_url)
    store = app.state.store
    run, _ = store.get_or_create_run("p", "tiny")
    store.ingest_points(
        run.id, [PointRow("reward", i, float(c), 0.3, None) for i, c in enumerate((1, 2, 3))]
    )
    d = data.run_detail(store, run.id)
    assert d["fit"]["status"] == "pending" and d["fit"]["fit_id"] is None  # queued, not fitted
    Refitter(store).run_once()
    d = data.run_detail(store, run.id)
    assert d["fit"]["status"] == "insufficient_data" and "need" in d["fit"]["message"]
    assert d["points"]["total"] == 3 and not d["points"]["downsampled"]
    assert data.new_points(store, run.id, "reward", 1)["steps"] == [2]
    assert data.parse_ids("3, 1,x,3") == [3, 1]
    assert np.isfinite(d["points"]["values"]).all()
    store.engine.dispose()


def test_run_page_says_which_metric_is_fitted_and_why(sqlite_url: str) -> None:
    from scalewatch.dashboard import data
    from scalewatch.dashboard.pages.run import _header

    app = make_app(sqlite_url)
    store = app.state.store
    run, _ = store.get_or_create_run("frameworks", "grpo", compute_unit="steps")
    store.ingest_points(run.id, [
        PointRow(m, i, float(i), 0.3, None)
        for i in range(1, 4) for m in ("critic/score/mean", "val-core/math/acc/mean@4")])

    def shown() -> str:
        header = _header(data.run_detail(store, run.id))
        return next(c.children for c in header.children if getattr(c, "id", "") ==
                    "run-fit-metric")

    assert shown() == "fits val-core/math/acc/mean@4 (recognised: verl validation accuracy)"
    update_project(store, "frameworks", ProjectPatch(fit_metric="critic/score/mean"))
    assert shown() == "fits critic/score/mean (the project's default)"
    update_run(store, run.id, {"fit_metric": "val-core/math/acc/mean@4"})
    assert shown() == "fits val-core/math/acc/mean@4 (set for this run)"
    store.engine.dispose()


def test_run_page_warns_when_a_training_reward_is_fitted_beside_a_validation_metric(
    sqlite_url: str,
) -> None:
    from scalewatch.dashboard import data
    from scalewatch.dashboard.pages.run import _header

    app = make_app(sqlite_url)
    store = app.state.store
    run, _ = store.get_or_create_run("frameworks", "custom", compute_unit="steps")
    store.ingest_points(run.id, [
        PointRow(m, i, float(i), 0.3, None)
        for i in range(1, 4) for m in ("critic/score/mean", "val/my_bench/accuracy")])

    def warning() -> str | None:
        header = _header(data.run_detail(store, run.id))
        box = next((c for c in header.children
                    if getattr(c, "id", "") == "run-fit-metric-warning"), None)
        return None if box is None else " ".join(str(getattr(p, "children", p))
                                                 for p in box.children)

    text = warning()
    assert text is not None and "critic/score/mean" in text and "val/my_bench/accuracy" in text
    update_run(store, run.id, {"fit_metric": "val/my_bench/accuracy"})
    assert warning() is None
    store.engine.dispose()
