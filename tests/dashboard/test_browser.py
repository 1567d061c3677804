"""The dashboard in real headless Chromium against a real server (Playwright, sync API)."""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.dashboard.conftest import DOCS
from tests.dashboard.seed import (
    LARGE_BUDGET,
    SMALL_BUDGET,
    create_run,
    post_points,
    series,
    wait_for_fits,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

GRAPH_TRACES = "#{} .scatterlayer .trace, #{} .glscatterlayer, #{} .gl-container canvas"


def traces(page, graph_id: str) -> int:  # noqa: ANN001
    return page.locator(f"#{graph_id} .scatterlayer .trace").count()


def wait_graph(page, graph_id: str, min_traces: int = 1) -> None:  # noqa: ANN001
    page.wait_for_function(
        """([id, n]) => {
            const g = document.getElementById(id);
            const gd = g && g.querySelector('.js-plotly-plot');
            return gd && gd.data && gd.data.length >= n;
        }""",
        arg=[graph_id, min_traces],
    )


def graph_data(page, graph_id: str) -> list[dict]:  # noqa: ANN001
    return page.evaluate(
        """(id) => Array.from(document.querySelector('#' + id + ' .js-plotly-plot').data)
            .map(t => ({name: t.name, meta: t.meta, n: t.x ? t.x.length : 0,
                        dash: t.line ? t.line.dash : null}))""",
        graph_id,
    )


def test_runs_page_lists_runs_and_opens_one(seeded, page) -> None:  # noqa: ANN001
    server, ids = seeded
    page.goto(server.url + "/")  # redirects to /dashboard/
    assert page.url.endswith("/dashboard/")
    page.wait_for_selector("#runs-table td[data-dash-column='run'] a")
    body = page.locator("#runs-table").inner_text()
    for name in ids:
        assert name in body
    assert "no fit yet" in body  # the 3-point run
    assert "GPU-hours" in page.locator("#runs-table").inner_text()
    page.screenshot(path=str(DOCS / "runs.png"), full_page=True)
    page.get_by_role("link", name="scalerl-heldout").click()
    page.wait_for_url(re.compile(rf"/dashboard/run/{ids['scalerl-heldout']}$"))
    wait_graph(page, "run-graph", 4)
    assert page.js_errors == []


def test_run_page_plots_fit_extrapolation_band_and_heldout(seeded, page) -> None:  # noqa: ANN001
    server, ids = seeded
    page.goto(f"{server.url}/dashboard/run/{ids['scalerl-heldout']}")
    wait_graph(page, "run-graph", 5)
    data = graph_data(page, "run-graph")
    metas = [t["meta"] for t in data]
    assert {"points", "heldout", "fit", "extrapolation", "band"} <= set(metas)
    assert data[metas.index("fit")]["dash"] == "solid"
    assert data[metas.index("extrapolation")]["dash"] == "dash"
    assert data[metas.index("heldout")]["n"] > 0
    assert traces(page, "run-graph") >= 5
    # warm-up shading is a layout shape
    assert page.locator("#run-graph .shapelayer path").count() >= 1
    assert "warm-up" in page.locator("#run-graph").inner_text()
    wait_graph(page, "run-history", 1)
    wait_graph(page, "run-residuals", 1)
    assert "GPU-hours" in page.locator("#run-graph").inner_text()
    page.screenshot(path=str(DOCS / "run.png"), full_page=True)
    assert page.js_errors == []


def test_run_page_names_the_priors_a_fit_used(seeded, page) -> None:  # noqa: ANN001
    server, _ = seeded
    with httpx.Client(base_url=server.url, timeout=30) as client:
        rid = create_run(client, "priors", "given-prior", target_compute=20000,
                         fit_settings={"noise_prior": [0.8, 0.05], "b_prior": [0.64, 0.2]})
        c, y = series({"A": 0.61, "B": 1.92, "C_mid": 2542.0}, n=80, c_max=8000.0, seed=11)
        post_points(client, rid, c, y)
        wait_for_fits(client, [rid])
    page.goto(f"{server.url}/dashboard/run/{rid}")
    wait_graph(page, "run-graph", 4)
    page.wait_for_function(
        """() => document.querySelector('#run-graph').innerText.includes('noise prior')""")
    text = page.locator("#run-graph").inner_text()
    assert "noise prior ρ 0.80 ± 0.05" in text and "B prior 1.90 ×/÷ 1.22" in text
    assert page.js_errors == []


def test_runs_page_sets_a_projects_fitted_metric_and_priors(seeded, page) -> None:  # noqa: ANN001
    server, _ = seeded
    with httpx.Client(base_url=server.url, timeout=30) as client:
        young = create_run(client, "panel", "young", target_compute=20000)
        post_points(client, young, [100.0, 200.0], [0.3, 0.31], metric="val/acc")
        done = create_run(client, "panel", "done", target_compute=20000)
        client.patch(f"/api/v1/runs/{done}", json={"status": "finished"}).raise_for_status()
    page.goto(f"{server.url}/dashboard/?project=panel")
    page.locator("#runs-settings summary").click()
    page.wait_for_function(
        """() => document.querySelector('#runs-settings-status').innerText.includes('finished')""")
    assert "1 finished run to learn from" in page.locator("#runs-settings-status").inner_text()
    boxes = page.locator("#runs-settings-priors input[type=checkbox]")
    assert [boxes.nth(i).is_checked() for i in range(2)] == [False, False]
    page.locator("#runs-settings-metric").click()
    page.get_by_role("option", name="val/acc").click()
    boxes.nth(1).check()  # B
    page.locator("#runs-settings-save").click()
    page.locator("#runs-settings-ok").wait_for()
    assert "fitted metric val/acc, B prior on" in page.locator("#runs-settings-ok").inner_text()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        got = client.get("/api/v1/projects/panel").json()
        assert (got["fit_metric"], got["b_prior"], got["noise_prior"]) == ("val/acc", "project",
                                                                          None)
        run = client.get(f"/api/v1/runs/{young}").json()
        assert (run["fit_metric"], run["fit_metric_reason"]) == ("val/acc", "the project's default")
    page.screenshot(path=str(DOCS / "runs-settings.png"), full_page=True)
    # The page opened anew shows what was saved; swapping the two priors is one save.
    page.goto(f"{server.url}/dashboard/?project=panel")
    page.locator("#runs-settings summary").click()
    page.wait_for_function(
        """() => document.querySelectorAll('#runs-settings-priors input:checked').length === 1""")
    assert boxes.nth(1).is_checked() and "val/acc" in page.locator("#runs-settings").inner_text()
    # The link keeps its project once the tables refresh (the dropdown used to clear it).
    page.locator("#runs-table td[data-dash-column='run'] a", has_text="young").wait_for()
    assert "project=panel" in page.url and page.locator("#runs-settings").is_visible()
    boxes.nth(1).uncheck()
    boxes.nth(0).check()
    page.locator("#runs-settings-save").click()
    page.wait_for_function(
        """() => (document.querySelector('#runs-settings-ok') || {innerText: ''}).innerText
                 .includes('noise prior on, B prior off')""")
    with httpx.Client(base_url=server.url, timeout=30) as client:
        got = client.get("/api/v1/projects/panel").json()
    assert got["noise_prior"] == "project" and got["b_prior"] is None
    page.locator("#runs-settings-save").click()
    page.locator("#runs-settings-same").wait_for()
    assert page.js_errors == []


def test_a_link_to_a_runs_metric_keeps_the_metric(seeded, page) -> None:  # noqa: ANN001
    server, _ = seeded
    with httpx.Client(base_url=server.url, timeout=30) as client:
        rid = create_run(client, "links", "two-metrics", target_compute=20000)
        c, y = series({"A": 0.61, "B": 1.92, "C_mid": 2542.0}, n=40, c_max=8000.0, seed=3)
        post_points(client, rid, c, y)
        post_points(client, rid, c, y - 0.2, metric="reward")
    page.goto(f"{server.url}/dashboard/run/{rid}?metric=reward")
    wait_graph(page, "run-graph", 1)
    page.wait_for_function(
        """() => document.querySelector('#run-graph').innerText.includes('reward')""")
    assert "reward" in page.locator("#run-metric").inner_text()
    assert "metric=reward" in page.url
    assert page.js_errors == []


def test_run_page_warns_when_the_fit_follows_a_training_reward(seeded, page) -> None:  # noqa: ANN001
    """A verl run whose validation metric no rule knows: the Run page says so in a warning box
    above the forecast, which goes once the run fits the validation metric."""
    server, _ = seeded
    with httpx.Client(base_url=server.url, timeout=30) as client:
        rid = create_run(client, "warned", "custom-eval")
        post_points(client, rid, [100.0, 200.0, 300.0], [0.2, 0.3, 0.35],
                    metric="critic/score/mean")
        post_points(client, rid, [100.0, 300.0], [0.1, 0.2], metric="val/my_bench/accuracy")
    page.goto(f"{server.url}/dashboard/run/{rid}")
    box = page.locator("#run-fit-metric-warning")
    box.wait_for()
    assert box.is_visible() and box.get_attribute("role") == "alert"
    text = box.inner_text()
    assert "critic/score/mean" in text and "val/my_bench/accuracy" in text
    assert box.evaluate("el => getComputedStyle(el).borderLeftStyle") == "solid"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.patch(f"/api/v1/runs/{rid}", json={"fit_metric": "val/my_bench/accuracy"})
    page.goto(f"{server.url}/dashboard/run/{rid}")
    page.locator("#run-fit-metric", has_text="set for this run").wait_for()
    assert page.locator("#run-fit-metric-warning").count() == 0


def test_unfitted_run_says_why(seeded, page) -> None:  # noqa: ANN001
    server, ids = seeded
    page.goto(f"{server.url}/dashboard/run/{ids['just-started']}")
    wait_graph(page, "run-graph", 1)
    text = page.locator("#run-graph").inner_text()
    assert "no fit yet" in text and "need" in text
    # ... and so does the warning box under the headline, in plain words.
    box = page.locator("#run-withheld")
    box.wait_for(state="visible")
    assert box.inner_text().startswith("No A yet") and "need" in box.inner_text()


# The page's boxes that end past the window's right edge (id or class, and where they end);
# a chart's own drawing follows its box a moment after a resize, so boxes are what is checked.
OFF_THE_RIGHT_EDGE = """() => [...document.querySelectorAll('.toolbar, .card, .grid2 > *')]
    .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1)
    .map(el => (el.id || String(el.className)) + ' ends at '
               + Math.round(el.getBoundingClientRect().right)).slice(0, 8)"""


def test_select_two_runs_compare_and_budget_flips_winner(seeded, page) -> None:  # noqa: ANN001
    server, ids = seeded
    fast, slow = ids["fast-lowceiling"], ids["slow-highceiling"]
    page.goto(server.url + "/dashboard/")
    page.wait_for_selector("#runs-table td[data-dash-column='run'] a")
    for name in ("fast-lowceiling", "slow-highceiling"):
        row = page.locator("#runs-table tr", has=page.get_by_role("link", name=name))
        row.locator("input[type=checkbox]").check()
    page.locator("#runs-compare-btn").get_by_text("Compare 2 runs").wait_for()
    page.locator("#runs-compare-btn").click()
    page.wait_for_url(re.compile(r"/dashboard/compare\?runs="))
    # Read the query decoded: once the page keeps its URL in step (replaceState), the comma is
    # percent-encoded ("runs=1%2C2"), which a regex on the raw URL read as run 1 alone.
    runs = parse_qs(urlsplit(page.url).query)["runs"][0]
    assert sorted(map(int, runs.split(","))) == sorted([fast, slow])
    wait_graph(page, "cmp-graph", 6)
    metas = [t["meta"] for t in graph_data(page, "cmp-graph")]
    assert metas.count("fit") == 2 and metas.count("extrapolation") == 2
    budget = page.locator("#cmp-budget")
    budget.fill(str(int(SMALL_BUDGET)))
    budget.press("Enter")
    verdict = page.locator("#cmp-verdict")
    page.wait_for_function(
        "(b) => new URL(location.href).searchParams.get('budget') === b", arg=str(int(SMALL_BUDGET))
    )
    verdict.get_by_text(re.compile(r"winner at 3,000 .*: fast-lowceiling")).wait_for()
    budget.fill(str(int(LARGE_BUDGET)))
    budget.press("Enter")
    verdict.get_by_text(re.compile(r"winner at 200k .*: slow-highceiling")).wait_for()
    # The URL follows the budget the render writes back, a moment after the verdict shows (the
    # clientside callback waits for that render): wait for it, as for the small budget above.
    page.wait_for_function(
        "(b) => new URL(location.href).searchParams.get('budget') === b", arg=str(int(LARGE_BUDGET))
    )
    assert "leads until" in verdict.inner_text()  # the crossover
    wait_graph(page, "cmp-scatter", 1)
    # Drawn whether or not this browser has WebGL (headless Chromium here has none: the points
    # are then SVG, never plotly's "WebGL is not supported" in place of the chart).
    page.wait_for_function(
        """() => !document.querySelector('#cmp-graph').innerText.includes('WebGL')
                 && document.querySelectorAll('#cmp-graph .scatterlayer .trace, '
                                              + '#cmp-graph .gl-container canvas').length > 0""")
    page.screenshot(path=str(DOCS / "compare.png"), full_page=True)
    # Nothing runs off the window's right edge, down to a narrow window: the
    # parameter table once widened its column until the scatter beside it sat half outside
    # the window (6 runs at 1,500 pixels).
    for width in (1020, 800):  # two columns at their narrowest; one column
        page.set_viewport_size({"width": width, "height": 900})
        # (Reading the layout lays the page out: no waiting for a render.)
        assert page.evaluate(OFF_THE_RIGHT_EDGE) == [], width
    page.set_viewport_size({"width": 1360, "height": 900})
    # the shared link restores the state
    page.goto(page.url)
    page.locator("#cmp-verdict").get_by_text(re.compile("slow-highceiling")).first.wait_for()
    assert page.locator("#cmp-budget").input_value() == str(int(LARGE_BUDGET))
    assert page.js_errors == []


def test_point_posted_during_test_appears_live(seeded, page) -> None:  # noqa: ANN001
    server, ids = seeded
    rid = ids["scout-long"]
    page.goto(f"{server.url}/dashboard/run/{rid}")
    wait_graph(page, "run-graph", 4)
    before = graph_data(page, "run-graph")[0]["n"]
    # Responses, not requests: on a busy machine the tick that brings the point may have been
    # sent before the point was posted (and before a request listener existed), its answer
    # computed after; the answer is what arrives after the post.
    requests: list[str] = []
    page.on("response", lambda r: requests.append(r.url) if "_dash-update" in r.url else None)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        post_points(client, rid, [12500.0], [0.66], start=10_000)
    # Waits on the condition only (the page polls; a busy machine may take longer than the
    # poll interval): "live" is that it arrives with no reload and no action of the user.
    page.wait_for_function(
        """(n) => document.querySelector('#run-graph .js-plotly-plot').data[0].x.length > n""",
        arg=before,
    )
    assert graph_data(page, "run-graph")[0]["n"] == before + 1
    assert requests  # it came through the page's own polling callback
    assert page.url.endswith(f"/run/{rid}")  # no reload


def test_alerts_page_lists_deliveries_and_acknowledges(seeded, page) -> None:  # noqa: ANN001
    server, _ = seeded
    page.goto(server.url + "/dashboard/alerts")
    row = page.locator("#alerts-table tr", has_text="fast-lowceiling").first
    row.wait_for(timeout=30_000)
    assert "open" in row.inner_text()
    # The message, what the alert says, is shown whole (wrapped), and the row's radio too:
    # neither cell is cut short (content wider than the cell).
    clipped = row.evaluate("""r => [...r.querySelectorAll(
        'td.dash-select-cell, td[data-dash-column="message"]')].filter(
        c => c.scrollWidth > c.clientWidth + 1).map(c => c.className)""")
    assert clipped == []
    row.locator("input[type=radio]").check()
    page.locator("#alerts-deliveries-table").wait_for(timeout=30_000)
    assert "127.0.0.1:9" in page.locator("#alerts-deliveries").inner_text()
    page.screenshot(path=str(DOCS / "alerts.png"), full_page=True)
    page.locator("#alerts-ack").click()
    page.locator("#alerts-ack-ok").wait_for()
    # (a state cell: the header row names the "acknowledged (UTC)" column too)
    page.locator("#alerts-table td[data-dash-column='state']",
                 has_text="acknowledged").first.wait_for()
    assert "raised (UTC)" in page.locator("#alerts-table").inner_text()
    assert page.js_errors == []


def test_alert_rules_are_listed_created_switched_and_deleted(seeded, page) -> None:  # noqa: ANN001
    """The Rules panel of the Alerts page: the rules in force, a new one checked as the API
    checks it (a missing parameter is refused, naming it), switched off, deleted."""
    server, _ = seeded
    with server.client() as client:  # its own project: the other tests' rules are unchanged
        client.post("/api/v1/runs", json={"project": "rules-ui", "name": "watched"},
                    ).raise_for_status()  # fmt: skip
    page.goto(server.url + "/dashboard/alerts")
    page.locator("#rules-table td[data-dash-column='kind']").first.wait_for(timeout=30_000)
    before = len(httpx.get(server.url + "/api/v1/alert-rules").json()["rules"])
    page.locator("#rules-new summary").click()
    page.locator("#rule-project").click()
    page.get_by_role("option", name="rules-ui").click()
    page.locator("#rule-watches", has_text="every run of the project").wait_for()
    page.locator("#rule-kind").click()
    page.get_by_role("option", name="asymptote_below").click()
    threshold = page.locator("input[id*='threshold']")
    threshold.wait_for()
    page.locator("#rule-create").click()
    page.locator("#rule-create-bad").wait_for()
    assert "needs parameter 'threshold'" in page.locator("#rule-create-bad").inner_text()
    assert len(httpx.get(server.url + "/api/v1/alert-rules").json()["rules"]) == before
    threshold.fill("0.55")
    page.locator("#rule-create").click()
    page.locator("#rule-create-ok").wait_for()
    rules = httpx.get(server.url + "/api/v1/alert-rules", params={"project": "rules-ui"}).json()
    assert [(r["kind"], r["params"], r["enabled"]) for r in rules["rules"]] == [
        ("asymptote_below", {"threshold": 0.55}, True)]
    rule_id = rules["rules"][0]["id"]
    row = page.locator("#rules-table tr", has_text="rules-ui")
    row.wait_for()
    assert "threshold 0.55" in row.inner_text()
    row.locator("input[type=radio]").check()
    page.locator("#rules-toggle").click()
    page.locator("#rules-ok", has_text=f"Rule {rule_id} disabled").wait_for()
    assert httpx.get(f"{server.url}/api/v1/alert-rules/{rule_id}").json()["enabled"] is False
    page.locator("#rules-table td[data-dash-column='enabled']", has_text="off").wait_for()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#rules-delete").click()
    page.locator("#rules-ok", has_text=f"Rule {rule_id} deleted").wait_for()
    assert httpx.get(f"{server.url}/api/v1/alert-rules/{rule_id}").status_code == 404
    page.locator("#rules-table tr", has_text="rules-ui").wait_for(state="detached")
    assert page.js_errors == []


def test_a_long_run_name_is_shown_whole(seeded, page) -> None:  # noqa: ANN001
    """A run name as long as real ones get (a sweep's hyper-parameters in it) wraps in the
    Runs table: the cell's ellipsis does not reach a link, which was cut off mid-name."""
    server, _ = seeded
    long = "Qwen2.5-0.5B-Instruct-GSM8K-CRPO-sp-p1-b8-gamma2.0-lam1.0-01161659"
    with server.client() as client:  # its own project: the other tests' pages are unchanged
        client.post("/api/v1/runs", json={"project": "long-names", "name": long,
                                          "group": "a-recipe-with-a-long-name-too"},
                    ).raise_for_status()  # fmt: skip
    page.goto(server.url + "/dashboard/?project=long-names")
    page.get_by_role("link", name=long).wait_for(timeout=30_000)
    # (The overflow is the link's, inside the cell's own hidden overflow: compare their edges.)
    clipped = page.evaluate("""() => [...document.querySelectorAll(
        '#runs-table td[data-dash-column="run"], #runs-table td[data-dash-column="group"]')]
        .filter(c => c.querySelector('a') && c.querySelector('a').getBoundingClientRect().right
                     > c.getBoundingClientRect().right + 1).map(c => c.innerText)""")
    assert clipped == []
    assert page.js_errors == []


def test_auth_login_and_write_scope_for_ack(tmp_path, browser) -> None:  # noqa: ANN001
    """Auth on: /dashboard/ needs a token cookie; /login sets it; ack needs write scope."""
    from tests.dashboard.seed import CROSSING, create_run, series
    from tests.support.databases import migrated_sqlite
    from tests.support.live_server import LiveServer

    server = LiveServer(migrated_sqlite(tmp_path), auth=True, home=tmp_path / "home")
    server.start()
    try:
        read_token = server.make_token("read")
        with server.client() as client:
            client.post(
                "/api/v1/alert-rules",
                json={"project": "p", "kind": "asymptote_below", "params": {"threshold": 0.6}},
            ).raise_for_status()
            rid = create_run(client, "p", "fast-lowceiling", target_compute=20000)
            c, y = series(CROSSING["fast-lowceiling"])
            post_points(client, rid, c, y)
            deadline = time.monotonic() + 60
            while not client.get("/api/v1/alerts").json().get("alerts"):
                assert time.monotonic() < deadline, "no alert raised"
                time.sleep(0.3)
        # without a token: the API says 401, the dashboard sends the browser to /login
        r = httpx.get(server.url + "/dashboard/_dash-layout")
        assert r.status_code == 401
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(server.url + "/dashboard/alerts")
        page.wait_for_url(re.compile(r"/login\?next=/dashboard/alerts"))
        page.fill("#token", "not-a-token")
        page.click("#login-submit")
        page.locator("#login-error").wait_for()
        page.fill("#token", read_token)
        page.click("#login-submit")
        page.wait_for_url(re.compile(r"/dashboard/alerts$"))
        cookie = next(c for c in context.cookies() if c["name"] == "scalewatch_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
        assert read_token not in cookie["value"]  # a session id, not the token
        row = page.locator("#alerts-table tr", has_text="fast-lowceiling").first
        row.wait_for()
        row.locator("input[type=radio]").check()
        page.locator("#alerts-ack").click()
        page.locator("#alerts-ack-denied").wait_for()
        assert "write scope" in page.locator("#alerts-ack-denied").inner_text()
        # ... nor switch a rule off or create one.
        page.locator("#rules-table tr", has_text="asymptote_below").locator(
            "input[type=radio]").check()
        page.locator("#rules-toggle").click()
        page.locator("#rules-denied").wait_for()
        page.locator("#rules-new summary").click()
        page.locator("#rule-project").click()
        page.get_by_role("option", name="p", exact=True).click()
        page.locator("#rule-create").click()
        page.locator("#rule-create-denied").wait_for()
        with server.client() as client:
            rules = client.get("/api/v1/alert-rules").json()["rules"]
            assert [r["enabled"] for r in rules] == [True]
        # A read-only session cannot switch a project's priors either.
        page.goto(server.url + "/dashboard/?project=p")
        page.locator("#runs-settings summary").click()
        page.locator("#runs-settings-priors input[type=checkbox]").nth(1).check()
        page.locator("#runs-settings-save").click()
        page.locator("#runs-settings-denied").wait_for()
        with server.client() as client:
            assert client.get("/api/v1/projects/p").json()["b_prior"] is None
        page.goto(server.url + "/dashboard/")
        page.wait_for_selector("#runs-table td[data-dash-column='run'] a")
        context.close()
    finally:
        server.stop()


def test_rename_and_delete_a_run_from_its_page(seeded, page) -> None:  # noqa: ANN001
    """Issue 36 item 5: rename on the Run page (the page reloads with the new name), then
    delete after the browser's confirmation, back on the Runs page."""
    server, _ = seeded
    with server.client() as client:  # its own project: the other tests' runs are unchanged
        rid = create_run(client, "rename-ui", "before-rename")
        create_run(client, "rename-ui", "taken")
    page.goto(f"{server.url}/dashboard/run/{rid}")
    page.locator("#run-title", has_text="before-rename").wait_for()
    page.locator("#run-actions summary").click()
    page.fill("#run-rename-name", "taken")
    page.locator("#run-rename-btn").click()
    page.locator("#run-rename-bad", has_text="already has a run named 'taken'").wait_for()
    page.fill("#run-rename-name", "after-rename")
    page.locator("#run-rename-btn").click()
    page.locator("#run-title", has_text="after-rename").wait_for()
    assert httpx.get(f"{server.url}/api/v1/runs/{rid}").json()["name"] == "after-rename"
    page.locator("#run-actions summary").click()
    dismissed: list[str] = []
    page.once("dialog", lambda d: (dismissed.append(d.message), d.dismiss()))
    page.locator("#run-delete-btn").click()
    deadline = time.monotonic() + 30
    while not dismissed:
        assert time.monotonic() < deadline, "no confirmation asked"
        page.wait_for_timeout(100)
    assert "Delete run 'after-rename'" in dismissed[0]
    assert httpx.get(f"{server.url}/api/v1/runs/{rid}").status_code == 200  # dismissed: kept
    page.once("dialog", lambda d: d.accept())
    page.locator("#run-delete-btn").click()
    page.wait_for_url(re.compile(r"/dashboard/$"))
    assert httpx.get(f"{server.url}/api/v1/runs/{rid}").status_code == 404
    assert page.js_errors == []


FITS_1400 = """(sel) => {
    const t = document.querySelector(sel);
    if (!t) { return null; }
    const box = t.closest('.dash-spreadsheet-container') || t;
    const cut = [...t.querySelectorAll('td, th')].filter(c => c.scrollWidth > c.clientWidth + 1)
        .map(c => c.innerText);
    return {wide: box.scrollWidth > box.clientWidth + 1,
            right: t.getBoundingClientRect().right, page: document.body.clientWidth, cut};
}"""


def test_parameter_and_alert_tables_fit_1400_px(seeded, browser) -> None:  # noqa: ANN001
    """Issue 36 item 7: at 1400 px the Compare parameter table and the Run page's alerts
    table show every column without a scroll bar, and no cell is cut short."""
    server, ids = seeded
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{server.url}/dashboard/compare?runs={ids['fast-lowceiling']},"
                  f"{ids['slow-highceiling']}")
        page.locator("#cmp-params td[data-dash-column='C_mid']").first.wait_for()
        got = page.evaluate(FITS_1400, "#cmp-params table")
        assert got and not got["wide"] and got["right"] <= got["page"], got
        page.goto(f"{server.url}/dashboard/run/{ids['fast-lowceiling']}")
        page.locator("#run-alerts-table td[data-dash-column='message']").first.wait_for()
        got = page.evaluate(FITS_1400, "#run-alerts-table table")
        assert got and not got["wide"] and got["cut"] == [] and got["right"] <= got["page"], got
    finally:
        context.close()
