"""Groups in the mounted dashboard, in-process: the Runs page's group column and "by group"
view and the Group page, through their Dash callbacks over HTTP (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from scalewatch.dashboard.callback_client import dash_call
from scalewatch.server.ingest import PointRow
from scalewatch.server.refit import Refitter
from tests.conftest import make_app
from tests.dashboard.seed import series

RECIPE = "lr=3e-4 <b>(x)</b>"  # user text: markdown and HTML characters in a group's name
SEEDS = {"seed-0": 0.60, "seed-1": 0.62, "seed-2": 0.61}
OTHER = {"b-0": 0.70, "b-1": 0.71}  # a second recipe, clearly higher


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    app = make_app(database_url)
    store = app.state.store
    with TestClient(app) as c:
        ids = {}
        seeds = [(n, a, RECIPE) for n, a in SEEDS.items()]
        seeds += [(n, a, "recipe-b") for n, a in OTHER.items()]
        for k, (name, a, group) in enumerate(seeds):
            run, _ = store.get_or_create_run("p", name, target_compute=20000.0, group=group)
            c_, y = series({"A": a, "B": 1.9, "C_mid": 2500.0}, seed=k)
            rows = [
                PointRow("val_pass_rate", i, float(ci), float(yi), None)
                for i, (ci, yi) in enumerate(zip(c_, y, strict=True))
            ]
            store.ingest_points(run.id, rows)
            ids[name] = run.id
        run, _ = store.get_or_create_run("p", "lone", target_compute=20000.0)
        ids["lone"] = run.id
        c.ids = ids  # type: ignore[attr-defined]
        c.deps = c.get("/dashboard/_dash-dependencies").json()  # type: ignore[attr-defined]
        yield c
    store.engine.dispose()


def _group_page(c: TestClient) -> dict:
    key = {"project": "p", "group": RECIPE, "metric": None}
    return dash_call(c, "grp-graph", {"grp-key.data": key}, deps=c.deps).json()["response"]  # type: ignore[attr-defined]


def test_group_page_pending_then_pooled_fit(client: TestClient) -> None:
    out = _group_page(client)  # no group fit yet: the page says so, and the read queued one
    head = str(out["grp-header"]["children"])
    assert "'pending'" in head and "not computed yet" in head
    seeds = [t for t in out["grp-graph"]["figure"]["data"] if t.get("meta") == "seed"]
    assert len(seeds) == 3 and all(len(t["x"]) == 80 for t in seeds)
    Refitter(client.app.state.store).run_once()  # type: ignore[attr-defined]
    out = _group_page(client)
    metas = [t.get("meta") for t in out["grp-graph"]["figure"]["data"]]
    assert metas.count("seed") == 3 and {"fit", "extrapolation", "band"} <= set(metas)
    head = str(out["grp-header"]["children"])
    assert "pooled over 3 seeds" in head and "seed spread of A" in head
    rows = out["grp-members"]["data"]
    assert [r["name"] for r in rows] == list(SEEDS)
    assert all(r["pool"] == "pooled" and r["A"].count("[") == 1 for r in rows)
    assert all(r["offset"][0] in "+-" for r in rows)
    # The next tick finds nothing new and sends nothing.
    token = out["grp-token"]["data"]
    key = {"project": "p", "group": RECIPE, "metric": None}
    r = dash_call(
        client, "grp-graph", {"grp-key.data": key, "grp-token.data": token,
                              "grp-tick.n_intervals": 1},
        changed=["grp-tick.n_intervals"], deps=client.deps,  # type: ignore[attr-defined]
    )  # fmt: skip
    assert r.status_code == 204


def test_unknown_group_says_so(client: TestClient) -> None:
    key = {"project": "p", "group": "nope", "metric": None}
    out = dash_call(client, "grp-graph", {"grp-key.data": key}, deps=client.deps).json()  # type: ignore[attr-defined]
    assert "no group 'nope'" in str(out["response"]["grp-header"]["children"])


def test_runs_table_group_column_and_by_group_view(client: TestClient) -> None:
    Refitter(client.app.state.store).run_once()  # type: ignore[attr-defined]
    deps = client.deps  # type: ignore[attr-defined]
    out = dash_call(client, "runs-table", {"runs-project.value": "p"}, deps=deps).json()
    runs = out["response"]["runs-table"]
    assert "group" in [c["id"] for c in runs["columns"]]
    by_name = {r["name"]: r for r in runs["data"]}
    link = by_name["seed-0"]["group"]
    assert link.startswith(r"[lr=3e\-4 \<b\>\(x\)\</b\>](/dashboard/group?project=p&group=")
    assert "%3Cb%3E" in link and by_name["lone"]["group"] == ""
    out = dash_call(
        client, "runs-table", {"runs-project.value": "p", "runs-view.value": "groups"}, deps=deps
    ).json()["response"]
    assert "runs-table" not in out  # only the table on screen is read
    row, other = sorted(out["groups-table"]["data"], key=lambda r: r["name"] != RECIPE)
    assert other["name"] == "recipe-b" and other["members"] == 2
    assert row["name"] == RECIPE and row["members"] == 3 and row["status"] == "ok"
    assert row["pooled"] == 3 and row["A"].count("[") == 1 and row["spread"].startswith("sd ")
    assert row["predicted"].count("[") == 1
    assert out["runs-count"]["children"] == "2 groups"
    every = dash_call(client, "runs-table", {"runs-view.value": "groups"}, deps=deps).json()
    table = every["response"]["groups-table"]  # all projects: a project column says whose
    assert "project" in [c["id"] for c in table["columns"]]
    assert {(r["project"], r["name"]) for r in table["data"]} == {("p", RECIPE), ("p", "recipe-b")}
    sel = dash_call(
        client, "runs-compare-link",
        {"groups-table.selected_row_ids": [row["id"]], "runs-view.value": "groups"}, deps=deps,
    ).json()["response"]  # fmt: skip
    assert sel["runs-compare-btn"]["children"] == "Open group"
    assert sel["runs-compare-link"]["href"].startswith("/dashboard/group?project=p&group=lr")


def test_compare_groups_verdict_params_and_ceiling(client: TestClient) -> None:
    Refitter(client.app.state.store).run_once()  # type: ignore[attr-defined]
    deps, lone = client.deps, client.ids["lone"]  # type: ignore[attr-defined]
    values = {"cmp-ids.data": [], "cmp-project.data": "p",
              "cmp-groups.value": [RECIPE, "recipe-b"], "cmp-budget.value": "20000"}
    out = dash_call(client, "cmp-graph", values, deps=deps).json()["response"]
    metas = [t.get("meta") for t in out["cmp-graph"]["figure"]["data"]]
    assert metas.count("seed") == 5 and metas.count("fit") == 2 and "band" in metas
    params = {p["id"]: p for p in out["cmp-params"]["data"]}
    assert params[f"group:{RECIPE}"]["points"] == "3 seeds, 240 points"
    assert params["group:recipe-b"]["run"].startswith("[recipe\\-b](/dashboard/group?")
    verdict = str(out["cmp-verdict"]["children"])
    assert "recipe-b has the higher ceiling" in verdict and "winner at 20k" in verdict
    # The next tick sends the page's change token back (groups nest it five deep): the
    # callback check lets it through, and with nothing new nothing is sent.
    tick = dash_call(client, "cmp-graph", {**values, "cmp-budget.value": 20000,
                                           "cmp-token.data": out["cmp-token"]["data"],
                                           "cmp-tick.n_intervals": 1},
                     changed=["cmp-tick.n_intervals"], deps=deps)  # fmt: skip
    assert tick.status_code == 204, tick.text
    # The same verdict as the REST API's (one service).
    api = client.get("/api/v1/compare", params={"project": "p", "group": [RECIPE, "recipe-b"],
                                                "budget": 20000}).json()
    pair = api["comparison"]["pairs"][0]
    assert pair["decision"]["higher_asymptote"] == "recipe-b"
    assert pair["winner_at_budget"]["run"] in verdict
    scatter = dash_call(
        client, "cmp-scatter", {"cmp-ids.data": [lone], "cmp-project.data": "p",
                                "cmp-groups.value": [RECIPE, "recipe-b"]}, deps=deps,
    ).json()["response"]["cmp-scatter"]["figure"]  # fmt: skip
    traces = scatter["data"]
    recipes = [t for t in traces if t.get("meta") == "recipe"]
    seeds = [t for t in traces if t.get("meta") == "seeds"]
    assert len(recipes) == 2 and all(t["error_y"]["array"] for t in recipes)
    assert sorted(len(t["x"]) for t in seeds) == [2, 3]
    # A group's seeds are drawn as the recipe's, not again as grey "other runs".
    others = next((t for t in traces if t.get("meta") == "others"), {"text": []})
    assert not set(others["text"]) & set(SEEDS)
