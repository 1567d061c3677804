"""Groups (recipes) in real headless Chromium against a real server: the Runs page's group
column and "by group" view, the Group page (live), Compare by groups. Seeded through the API."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from tests.dashboard.conftest import DOCS, _require_chromium
from tests.dashboard.seed import create_run, post_points, series
from tests.dashboard.test_browser import graph_data, wait_graph
from tests.support.databases import migrated_sqlite
from tests.support.live_server import LiveServer
from tests.support.polling import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

PROJECT = "recipes"
# Two recipes of three seeds: "cispo-8k" agrees with itself; "dapo-8k" sits higher, and one
# of its seeds breaks at compute 6,000 (left out of the pool, marked on the Group page).
RECIPES = {
    "cispo-8k": [0.60, 0.62, 0.61],
    "dapo-8k": [0.70, 0.71, 0.70],
}
BROKEN = "dapo-8k-s2"


def _seed(client: httpx.Client) -> dict[str, int]:
    ids = {}
    for k, (group, ceilings) in enumerate(RECIPES.items()):
        for j, a in enumerate(ceilings):
            name = f"{group}-s{j}"
            rid = create_run(client, PROJECT, name, group=group, target_compute=20000)
            c, y = series({"A": a, "B": 1.9, "C_mid": 2500.0}, n=100, c_max=10000.0,
                          seed=10 * k + j)  # fmt: skip
            if name == BROKEN:
                y = np.where(c > 6000, y - 0.10, y)
            post_points(client, rid, c, y)
            ids[name] = rid
    return ids


def _pooled(client: httpx.Client, group: str, n: int) -> dict | None:
    """The group's fit once it pools `n` seeds (every seed's points are in: it is current)."""
    fit = client.get("/api/v1/groups/fit", params={"project": PROJECT, "group": group}).json()
    return fit if (fit.get("seed_spread") or {}).get("n") == n else None


@pytest.fixture(scope="module")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict]]:
    _require_chromium()
    tmp = tmp_path_factory.mktemp("groups")
    server = LiveServer(migrated_sqlite(tmp), home=tmp / "home")
    server.start()
    try:
        with server.client() as client:
            ids = _seed(client)
            wait_for(lambda: _pooled(client, "cispo-8k", 3), timeout=120, interval=0.3)
            wait_for(lambda: _pooled(client, "dapo-8k", 2), timeout=120, interval=0.3)
        yield server, ids
    finally:
        server.stop()


def test_runs_by_group_view_opens_the_group_page(recipes, page) -> None:  # noqa: ANN001
    server, ids = recipes
    page.goto(f"{server.url}/dashboard/?project={PROJECT}")
    page.wait_for_selector("#runs-table td[data-dash-column='group'] a")
    groups = page.locator("#runs-table td[data-dash-column='group']").all_inner_texts()
    assert sorted(set(groups)) == sorted(RECIPES)
    page.get_by_text("by group").click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('view') === 'groups'")
    rows = page.locator("#groups-table tr", has=page.locator("td[data-dash-column='group'] a"))
    rows.nth(1).wait_for()
    assert rows.count() == 2 and page.locator("#runs-pane").is_hidden()
    dapo = page.locator("#groups-table tr", has=page.get_by_role("link", name="dapo-8k"))
    text = dapo.inner_text()
    assert "sd " in text and "[" in text  # the seed spread, A with its interval
    assert dapo.locator("td[data-dash-column='pooled']").inner_text().strip() == "2"
    page.screenshot(path=str(DOCS / "groups.png"), full_page=True)
    page.get_by_role("link", name="dapo-8k").click()
    page.wait_for_url(re.compile(r"/dashboard/group\?project=recipes&group=dapo-8k$"))
    wait_graph(page, "grp-graph", 7)
    traces = graph_data(page, "grp-graph")
    metas = [t["meta"] for t in traces]
    assert metas.count("seed") == 3 and {"fit", "extrapolation", "band", "break"} <= set(metas)
    assert traces[metas.index("extrapolation")]["dash"] == "dash"
    assert any("broke" in t["name"] for t in traces if t["meta"] == "seed")
    label = page.locator("#grp-headline .headline-label").inner_text()
    assert "pooled over 2 seeds" in label.lower()  # CSS upper-cases the label
    assert "seed spread of A: sd" in page.locator("#grp-headline .headline-note").inner_text()
    members = page.locator("#grp-members")
    members.get_by_text("broke at step").wait_for()
    assert members.get_by_role("link", name=BROKEN).count() == 1
    page.screenshot(path=str(DOCS / "group.png"), full_page=True)
    members.get_by_role("link", name="dapo-8k-s0").click()
    page.wait_for_url(re.compile(rf"/dashboard/run/{ids['dapo-8k-s0']}$"))
    assert page.js_errors == []


def test_group_page_is_live(recipes, page) -> None:  # noqa: ANN001
    server, ids = recipes
    page.goto(f"{server.url}/dashboard/group?project={PROJECT}&group=cispo-8k")
    wait_graph(page, "grp-graph", 6)
    before = [t["n"] for t in graph_data(page, "grp-graph") if t["meta"] == "seed"]
    with httpx.Client(base_url=server.url, timeout=30) as client:
        post_points(client, ids["cispo-8k-s1"], [10500.0], [0.6], start=1000)
    page.wait_for_function(
        """(n) => document.querySelector('#grp-graph .js-plotly-plot').data
              .filter(t => t.meta === 'seed')[1].x.length > n""",
        arg=before[1],
    )
    after = [t["n"] for t in graph_data(page, "grp-graph") if t["meta"] == "seed"]
    assert after == [before[0], before[1] + 1, before[2]]
    assert page.js_errors == []


def test_compare_two_recipes_from_the_by_group_view(recipes, page) -> None:  # noqa: ANN001
    server, _ = recipes
    page.goto(f"{server.url}/dashboard/?project={PROJECT}&view=groups")
    for name in RECIPES:
        row = page.locator("#groups-table tr", has=page.get_by_role("link", name=name))
        row.locator("input[type=checkbox]").check()
    page.locator("#runs-compare-btn").get_by_text("Compare 2 groups").wait_for()
    page.locator("#runs-compare-btn").click()
    page.wait_for_url(re.compile(r"/dashboard/compare\?project=recipes&group="))
    wait_graph(page, "cmp-graph", 8)
    metas = [t["meta"] for t in graph_data(page, "cmp-graph")]
    assert metas.count("seed") == 6 and metas.count("fit") == 2
    verdict = page.locator("#cmp-verdict")
    verdict.get_by_text(re.compile("dapo-8k has the higher ceiling")).wait_for()
    assert "winner at 20k" in verdict.inner_text()
    page.wait_for_function(
        """() => {
            const gd = document.querySelector('#cmp-scatter .js-plotly-plot');
            return gd && gd.data && gd.data.filter(t => t.meta === 'recipe').length === 2;
        }"""
    )
    seeds = [t for t in graph_data(page, "cmp-scatter") if t["meta"] == "seeds"]
    assert sorted(t["n"] for t in seeds) == [2, 3]  # the broken seed has no A of its own
    page.screenshot(path=str(DOCS / "compare-groups.png"), full_page=True)
    # The shared link restores the comparison.
    page.goto(page.url)
    page.locator("#cmp-verdict").get_by_text(re.compile("dapo-8k has the higher")).wait_for()
    assert page.js_errors == []
