"""Items 9, 10 and 12: user text is escaped where shown, CSV cells cannot run as formulas,
raw point reads are paged, Compare is capped."""

from __future__ import annotations

import csv
import io

from scalewatch.dashboard.components import to_csv
from scalewatch.dashboard.data import compare_detail, md_text
from scalewatch.dashboard.figures import compare_figure  # noqa: F401 - the public builder exists
from scalewatch.server import limits
from tests.support.records import a_run


def test_markdown_in_names_is_inert() -> None:
    for name in ("![x](http://evil/i.png)", "[click](javascript:alert(1))", "<img src=x>"):
        cell = f"[{md_text(name)}](/dashboard/run/1)"
        # the only unescaped link syntax left is ours
        assert cell.count("](") == 1 and "\\[" in cell or "\\<" in cell


def test_run_table_link_escapes_the_name(api) -> None:
    from scalewatch.dashboard.data import run_row

    row = run_row(a_run(id=7, name="![p](http://e/x.png)", project="p"), 0)
    assert row["run"].startswith("[\\!\\[p\\]") and row["run"].endswith("(/dashboard/run/7)")


def test_plotly_labels_are_escaped() -> None:
    from scalewatch.dashboard.figures.run import run_figure

    fig = run_figure(
        {"compute": [1.0, 2.0], "values": [0.1, 0.2]},
        None,
        color="#000",
        unit="gpu_hours",
        metric="<b>m</b>",
        title="<a href='x'>r</a>",
    )
    text = fig.to_json()
    assert "<b>m</b>" not in text and "<a href" not in text


def test_csv_cells_cannot_be_formulas() -> None:
    out = to_csv(
        ["name", "v"],
        [
            ["=cmd|' /C calc'!A0", -1.5],
            ["@SUM(1+1)", 2],
            ["+1", 3],
            ["-2+3", 4],
            ["\tx", 5],
            ["\rx", 6],
            ["ok", 7],
        ],
    )
    rows = list(csv.reader(io.StringIO(out)))[1:]
    assert [r[0][0] for r in rows[:-1]] == ["'"] * 6
    assert rows[0][1] == "-1.5" and rows[-1] == ["ok", "7"]


def test_raw_point_reads_are_paged(api) -> None:
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    n = limits.MAX_POINTS_PAGE + 500
    for lo in range(0, n, 10_000):
        pts = [
            {"step": s, "compute": float(s), "metrics": {"m": 0.5}}
            for s in range(lo, min(n, lo + 10_000))
        ]
        assert api.post(f"/api/v1/runs/{rid}/points", json={"points": pts}).status_code == 200
    first = api.get(f"/api/v1/runs/{rid}/points", params={"metric": "m"}).json()
    assert len(first["points"]) == limits.MAX_POINTS_PAGE
    assert first["next_since_step"] == limits.MAX_POINTS_PAGE
    rest = api.get(
        f"/api/v1/runs/{rid}/points", params={"metric": "m", "since_step": first["next_since_step"]}
    ).json()
    assert len(rest["points"]) == 500 and rest["next_since_step"] is None


def test_dashboard_compare_is_capped_and_missing_ids_are_a_message(store) -> None:
    ids = [store.get_or_create_run("p", f"r{i}")[0].id for i in range(3)]
    too_many = compare_detail(store, ids * 10 + list(range(1000, 1000 + 30)), None, None)
    assert too_many["items"] == [] and "at most" in too_many["error"]
    missing = compare_detail(store, [ids[0], 424242], None, None)
    assert missing["items"] == [] and "424242" in missing["error"]


def test_api_compare_with_a_missing_run_is_404(api) -> None:
    rid = api.post("/api/v1/runs", json={"project": "p", "name": "r"}).json()["id"]
    r = api.get("/api/v1/compare", params={"run": [rid, 424242]})
    assert r.status_code == 404
