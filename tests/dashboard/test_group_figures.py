"""Group (recipe) figures and rows without a browser: data in, figure or rows out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalewatch.dashboard import figures as F
from scalewatch.dashboard import group_data
from scalewatch.server.fitting import FitOptions
from scalewatch.server.fitting.group import GroupMember, fit_group
from scalewatch.server.services.groups import group_record
from tests.dashboard.seed import R0
from tests.support.curves import noisy_sigmoid
from tests.support.records import a_group

TARGET = 20000.0
NAMES = ["seed-0", "seed-1", "<b>seed</b> [2](x)", "seed-3"]


@pytest.fixture(scope="module")
def recipe() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Four seeds: two on the recipe, one that breaks at compute 6,000, one clearly higher."""
    members, seeds = [], []
    for k, a in enumerate([0.60, 0.62, 0.61, 0.70]):
        c, y = noisy_sigmoid(
            A=a, B=1.9, C_mid=2500.0, R0=R0, n=100, c_max=10000.0, seed=k, sd=0.006
        )
        if k == 2:
            y = np.where(c > 6000, y - 0.10, y)
        seeds.append(GroupMember(c, y, steps=np.arange(c.size)))
        members.append({"id": k + 1, "name": NAMES[k], "compute": list(c), "values": list(y)})
    res = fit_group(seeds, FitOptions(target_compute=TARGET))
    fit = dict(group_record(res, members, group="g", metric="val_pass_rate"))
    for m, own in zip(members, fit["members"], strict=True):
        m.update(off_curve=own["off_curve"], included=own["included"], **{"break": own["break"]})
    return members, fit


def test_group_figure_seeds_thin_in_one_family_pooled_curve_band_and_extrapolation(
    recipe: tuple,
) -> None:
    members, fit = recipe
    color = F.group_color("g")
    fig = F.group_figure(
        members,
        fit,
        unit="GPU-hours",
        metric="val_pass_rate",
        color=color,
        title="g: val_pass_rate",
        target=TARGET,
    )
    metas = [t.meta for t in fig.data]
    assert metas.count("seed") == 4
    assert {"fit", "extrapolation", "band", "break"} <= set(metas)
    seeds = [t for t in fig.data if t.meta == "seed"]
    pooled = fig.data[metas.index("fit")]
    ext = fig.data[metas.index("extrapolation")]
    assert all(t.line.width <= 1 for t in seeds) and pooled.line.width > 2
    assert pooled.line.dash == "solid" and ext.line.dash == "dash"
    assert max(ext.x) >= TARGET * 0.999  # extrapolated to the target
    band = fig.data[metas.index("band")]
    assert min(band.x) <= 100.0 * 1.001  # the band covers the data, not only the extrapolation
    # One colour family: the shades share the recipe's hue, every seed its own shade.
    assert len({t.line.color for t in seeds}) == 4
    assert set(F.shades(color, 4)) == {t.line.color for t in seeds}
    # The broken seed and the one above the recipe are marked, by style and by name.
    broke = next(t for t in seeds if "broke" in t.name)
    off = next(t for t in seeds if "off the curve" in t.name)
    assert broke.line.dash == "dot" and off.line.dash == "dot"
    assert "&lt;b&gt;seed&lt;/b&gt;" in broke.name  # user text escaped
    mark = fig.data[metas.index("break")]
    assert mark.x[0] == pytest.approx(6000.0, rel=0.02)
    text = " ".join(a.text for a in fig.layout.annotations)
    assert "pooled over 3 seeds" in text and "seed spread sd" in text and "target" in text
    assert fig.layout.xaxis.type == "log"


def test_shades_are_one_hue_dark_to_light() -> None:
    s = F.shades("#4e79a7", 5)
    assert len(s) == 5 and len(set(s)) == 5
    lum = [sum(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in s]
    assert lum == sorted(lum)
    assert F.group_color("recipe-a") == F.group_color("recipe-a")  # stable across processes
    assert F.group_color("recipe-a") in F.PALETTE


def test_headline_says_pooled_over_k_seeds_and_spread(recipe: tuple) -> None:
    _, fit = recipe
    head = F.group_headline(fit, TARGET, "GPU-hours")
    assert head["label"] == "recipe ceiling A, pooled over 3 seeds"
    assert head["value"] == F.a_text(fit) and "[" in head["value"]
    assert "one seed at 20k GPU-hours" in head["note"]
    assert "seed spread of A: sd " in head["note"]


def test_unidentified_pending_and_empty_states() -> None:
    pending = F.group_headline({"status": "pending", "fit_id": None}, TARGET, "u")
    assert pending["value"] == "pending" and "queued" in pending["note"]
    unident = {
        "status": "unidentified", "A": None, "A_lower_bound": 0.606, "B": 1.6, "C_mid": 5000.0,
        "R0": 0.3, "ci": None, "fit_range": [100.0, 8000.0], "n_points": 80,
        "target_compute": TARGET, "predicted_at_target": 0.64,
        "predicted_interval": [0.6, 0.7], "seed_spread": {"n": 2, "sd": 0.01, "ci": [0.0, 0.03]},
    }  # fmt: skip
    head = F.group_headline(unident, TARGET, "u")
    assert head["value"] == "≥ 0.606"  # a lower bound, never a bare number
    assert "[0.600, 0.700]" in head["note"] and "0.640" not in head["note"]
    row = group_data.group_row("p", a_group(name="g", n_runs=2, metric="m", fit=unident))
    assert row["A"] == "≥ 0.606" and row["predicted"] == "[0.600, 0.700]"
    assert F.spread_text({"n": 1, "sd": None}) == "one seed: no spread yet"
    assert F.spread_text(None) == "–"
    fig = F.group_figure([], None, unit="u", metric="m", color="#000000")
    assert "no points yet" in fig.layout.annotations[0].text
    pts = [{"id": 1, "name": "a", "compute": [100.0, 200.0], "values": [0.3, 0.31]}]
    fig = F.group_figure(pts, {"status": "pending"}, unit="u", metric="m", color="#4e79a7")
    assert [t.meta for t in fig.data] == ["seed"]
    assert "group fit pending" in " ".join(a.text for a in fig.layout.annotations)


def test_by_group_row_and_member_rows(recipe: tuple) -> None:
    members, fit = recipe
    summary = {
        k: fit.get(k)
        for k in (
            "status",
            "A",
            "B",
            "C_mid",
            "ci",
            "A_lower_bound",
            "target_compute",
            "predicted_at_target",
            "predicted_interval",
            "break",
            "message",
        )
    }
    g = a_group(
        name="lr=3e-4 (bs) [x]",
        n_runs=4,
        metric="val_pass_rate",
        fit={**summary, "seed_spread": fit["seed_spread"]},
    )
    row = group_data.group_row("math rl", g)
    assert row["group"] == (
        r"[lr=3e\-4 \(bs\) \[x\]]"
        "(/dashboard/group?project=math+rl&group=lr%3D3e-4+%28bs%29+%5Bx%5D)"
    )
    assert row["members"] == 4 and row["pooled"] == 3 and row["status"] == "ok"
    assert row["A"] == F.a_text(fit) and row["spread"].startswith("sd ")
    assert row["predicted"] == F.forecast_text(fit)
    pending = group_data.group_row("p", a_group(name="g", n_runs=2, metric="m", fit=None))
    assert pending["status"] == "pending" and pending["spread"] == "–"
    detail = {"members": [
        {**m, "fit": own, "run": {"status": "running", "last_compute": 10000.0}, "total": 100,
         "reason": own["reason"]}
        for m, own in zip(members, fit["members"], strict=True)
    ], "fit": fit}  # fmt: skip
    rows = group_data.member_rows(detail)
    pools = [r["pool"] for r in rows]
    assert pools.count("broke") == 1 and "off the curve" in pools and "pooled" in pools
    broke = rows[pools.index("broke")]
    assert "broke at step" in broke["reason"] and broke["offset"] == "–"
    assert broke["run"] == r"[\<b\>seed\</b\> \[2\]\(x\)](/dashboard/run/3)"
    ok = rows[pools.index("pooled")]
    assert ok["offset"].startswith(("+", "-")) and "[" in ok["offset"]


def test_compare_figure_shows_a_recipe_as_its_seeds_and_its_pooled_curve(recipe: tuple) -> None:
    members, fit = recipe
    item = {
        "kind": "group", "id": "group:g", "label": "<i>g</i>", "color": "#59a14f", "fit": fit,
        "seeds": members, "compute": [c for m in members for c in m["compute"]],
        "values": [v for m in members for v in m["values"]],
    }  # fmt: skip
    fig = F.compare_figure([item], unit="GPU-hours", metric="m", budget=TARGET)
    metas = [t.meta for t in fig.data]
    assert metas.count("seed") == 4 and {"fit", "extrapolation", "band"} <= set(metas)
    seeds = [t for t in fig.data if t.meta == "seed"]
    assert [t.showlegend for t in seeds] == [True, False, False, False]  # one legend entry
    assert {t.marker.color for t in seeds} == set(F.shades("#59a14f", 4))
    assert seeds[0].name == "&lt;i&gt;g&lt;/i&gt; (seeds)"
    assert max(fig.data[metas.index("extrapolation")].x) >= TARGET * 0.999


def test_ceiling_figure_recipe_with_interval_and_its_seeds(recipe: tuple) -> None:
    _, fit = recipe
    seeds = [{"name": m["name"], "A": m["A"], "B": m["B"], "A_lower_bound": m["A_lower_bound"]}
             for m in fit["members"] if m.get("B") is not None]  # fmt: skip
    rows = [
        {"id": 9, "label": "other", "A": 0.5, "A_ci": None, "B": 2.0, "color": "#000000",
         "highlight": False},
        {"id": "group:g", "label": "g", "kind": "group", "highlight": True, "A": fit["A"],
         "A_ci": fit["ci"]["A"], "A_lower_bound": fit["A_lower_bound"], "B": fit["B"],
         "color": "#59a14f", "seeds": seeds},
    ]  # fmt: skip
    fig = F.ceiling_figure(rows)
    by_meta = {t.meta: t for t in fig.data}
    recipe_tr, seeds_tr = by_meta["recipe"], by_meta["seeds"]
    assert recipe_tr.marker.symbol == "diamond" and recipe_tr.y[0] == fit["A"]
    lo, hi = fit["ci"]["A"]
    assert recipe_tr.error_y.array[0] == pytest.approx(hi - fit["A"])
    assert recipe_tr.error_y.arrayminus[0] == pytest.approx(fit["A"] - lo)
    # A seed whose own A is not identified sits at its lower bound, as a triangle; one with
    # neither (the seed that broke) is left out.
    placed = [s for s in seeds if (s["A"] or s["A_lower_bound"]) is not None]
    assert len(seeds_tr.x) == len(placed) == 3
    symbols = list(seeds_tr.marker.symbol)
    assert symbols.count("triangle-up") == sum(s["A"] is None for s in placed)
    # Every seed is inside the axis range (the range covers seeds, not only the recipe).
    y0, y1 = fig.layout.yaxis.range
    assert all(y0 <= v <= y1 for v in seeds_tr.y)
    unident = {**rows[1], "A": None, "A_ci": None, "A_lower_bound": 0.58}
    tr = next(t for t in F.ceiling_figure([unident]).data if t.meta == "recipe")
    assert tr.marker.symbol == "triangle-up" and tr.y[0] == 0.58 and "A ≥" in tr.name


def test_each_seed_shows_its_own_offset_not_the_shrunk_one() -> None:
    """Seeds that agree: the pooled model puts the seed spread at zero and stores an offset of
    exactly 0 for every seed, which the table showed as +0.000 for all. The table shows each
    seed's own A minus the recipe's, with its own interval moved alike."""
    recipe = {"status": "ok", "A": 0.700, "ci": {"A": [0.690, 0.710]}}
    owns = [(0.690, [0.675, 0.705]), (0.712, [0.700, 0.724]), (0.701, [0.690, 0.713])]
    detail = {"fit": recipe, "members": [
        {"id": i, "name": f"s{i}", "run": {"status": "running"}, "total": 10, "reason": "",
         "break": None, "off_curve": False, "included": True,
         "fit": {"status": "ok", "A": a, "ci": {"A": ci}, "offset": 0.0,
                 "offset_ci": [0.0, 0.0]}}
        for i, (a, ci) in enumerate(owns)
    ]}  # fmt: skip
    offsets = [r["offset"] for r in group_data.member_rows(detail)]
    assert offsets == ["-0.010 [-0.025, +0.005]", "+0.012 [+0.000, +0.024]",
                       "+0.001 [-0.010, +0.013]"]
    pending = {**detail, "fit": {"status": "pending"}}
    assert {r["offset"] for r in group_data.member_rows(pending)} == {"–"}


def _comparison(a_hi: float) -> dict:
    return {"margin": 0.02, "budget": 1e4, "pairs": [{
        "runs": ["recipe-a", "recipe-b"],
        "decision": {"rule": "different_asymptote", "higher_asymptote": "recipe-b",
                     "reason": "|dA| = 0.025 > 0.02: the higher asymptote wins"},
        "crossover": None,
        "winner_at_budget": {"run": "recipe-b", "probability": 0.8},
    }]}  # fmt: skip


def test_group_verdict_names_no_winner_while_pooled_intervals_overlap() -> None:
    """Point estimates 0.025 apart (over the 0.02 rule) but intervals overlapping by 0.03:
    the verdict says "not distinguishable yet" with both intervals, and names no winner."""
    from scalewatch.dashboard import data

    intervals = {"recipe-a": [0.680, 0.720], "recipe-b": [0.690, 0.750]}
    (line,) = data.verdict_lines(_comparison(0.72), "GPU-h", None, intervals,
                                 {"recipe-a", "recipe-b"})  # fmt: skip
    assert line["rule"].startswith("not distinguishable yet")
    assert "recipe-a A [0.680, 0.720]" in line["rule"] and "[0.690, 0.750]" in line["rule"]
    assert "recipe-b" not in line["winner"] and "no winner" in line["winner"]
    # Intervals that overlap by at most the margin: the paper's verdict and the winner stand.
    apart = {"recipe-a": [0.680, 0.705], "recipe-b": [0.690, 0.750]}
    (line,) = data.verdict_lines(_comparison(0.72), "GPU-h", None, apart,
                                 {"recipe-a", "recipe-b"})  # fmt: skip
    assert "higher ceiling" in line["rule"] and "winner at" in line["winner"]
    assert "recipe-b" in line["winner"]
    # Two plain runs keep the paper's rule on point estimates, as before.
    (line,) = data.verdict_lines(_comparison(0.72), "GPU-h", None, intervals, set())
    assert "higher ceiling" in line["rule"]


def test_group_legend_is_below_the_plot_clear_of_title_and_caption(recipe: tuple) -> None:
    """Issue 36 item 7: a recipe's legend (a line per seed, its break marks, and the recipe's
    fit, band and extrapolation) wrapped into rows above the plot, over the title and the
    caption. It sits below the plot now, under the axis title."""
    members, fit = recipe
    fig = F.group_figure(members, fit, unit="GPU-hours", metric="val_pass_rate",
                         color=F.group_color("g"), title="g: val_pass_rate", target=TARGET)
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.yanchor == "top" and legend.y < -0.1
    above = [a for a in fig.layout.annotations if a.yref == "paper" and a.y >= 1.0]
    assert above and all(a.yanchor == "bottom" for a in above)  # the caption, over the plot
    assert fig.layout.margin.b >= 120  # room for the axis title and the legend rows
