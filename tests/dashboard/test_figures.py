"""Figure builders without a browser: data in, plotly figure out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalewatch.dashboard import figures as F
from scalewatch.server.fitting import FitOptions, fit_curve
from tests.dashboard.seed import CROSSING, series


def _fit(c, y, **opts) -> dict:  # noqa: ANN001
    res = fit_curve(np.asarray(c), np.asarray(y), FitOptions(**opts))
    return {**res.to_dict(internal=True), "metric": "val_pass_rate", "message": res.message}


def _metas(fig) -> list:  # noqa: ANN001
    return [t.meta for t in fig.data]


def test_run_figure_has_points_fit_extrapolation_band_warmup_and_heldout() -> None:
    c, y = series({"A": 0.61, "B": 1.92, "C_mid": 2542.0}, n=100, c_max=10000.0)
    fit = _fit(c, y, warmup=800.0, fit_until=6000.0, target_compute=16000.0)
    pts = {"compute": list(c), "values": list(y)}
    fig = F.run_figure(
        pts, fit, color="#4e79a7", unit="GPU-hours", metric="val_pass_rate",
        warmup=800.0, fit_until=6000.0, target=16000.0,
    )  # fmt: skip
    metas = _metas(fig)
    assert metas[:2] == ["points", "heldout"]  # fixed order: live updates extend by index
    assert {"fit", "extrapolation", "band"} <= set(metas)
    fit_tr = fig.data[metas.index("fit")]
    ext_tr = fig.data[metas.index("extrapolation")]
    assert fit_tr.line.dash == "solid" and ext_tr.line.dash == "dash"
    assert max(fit_tr.x) <= 6000.0 * 1.001 and max(ext_tr.x) >= 16000.0 * 0.999
    held = fig.data[1]
    assert held.marker.symbol == "x-thin" and min(held.x) > 6000.0
    assert len(fig.data[0].x) + len(held.x) == 100
    assert fig.layout.xaxis.type == "log"
    assert "GPU-hours" in fig.layout.xaxis.title.text
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert rects and rects[0].x1 == 800.0  # warm-up shaded
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "warm-up" in texts and "target" in texts


def test_unidentified_fit_shows_lower_bound() -> None:
    fit = {
        "status": "unidentified", "A": None, "A_lower_bound": 0.606, "B": 1.6, "C_mid": 5000.0,
        "R0": 0.3, "ci": None, "fit_range": [100.0, 8000.0], "n_points": 80,
        "target_compute": 20000.0, "predicted_at_target": 0.64,
        "internal": {"a_fit": 0.68},
    }  # fmt: skip
    assert F.a_text(fit) == "≥ 0.606"
    c, y = series(CROSSING["slow-highceiling"])
    fig = F.run_figure(
        {"compute": list(c), "values": list(y)}, fit, color="#000000", unit="GPU-hours",
        metric="m",
    )  # fmt: skip
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "A ≥ 0.606" in texts and "not identified" in texts
    assert "fit" in _metas(fig)


def test_empty_states() -> None:
    fig = F.run_figure({"compute": [], "values": []}, None, color="#000", unit="u", metric="m")
    assert "no points yet" in fig.layout.annotations[0].text
    fit = _fit([100.0, 200.0, 300.0], [0.3, 0.31, 0.32])
    fig = F.run_figure(
        {"compute": [100.0, 200.0, 300.0], "values": [0.3, 0.31, 0.32]}, fit, color="#000",
        unit="GPU-hours", metric="m",
    )  # fmt: skip
    text = " ".join(a.text for a in fig.layout.annotations)
    assert text.startswith("no fit yet:") and "need" in text
    assert _metas(fig) == ["points", "heldout"]
    assert "no fits yet" in F.history_figure([], color="#000", unit="u").layout.annotations[0].text
    assert "select runs" in F.compare_figure([], unit="u", metric="m").layout.annotations[0].text
    assert "no fitted" in F.ceiling_figure([]).layout.annotations[0].text


def test_compare_figure_overlays_runs_to_the_budget() -> None:
    items = []
    for k, (name, params) in enumerate(CROSSING.items()):
        c, y = series(params, seed=k)
        items.append(
            {"id": k + 1, "label": name, "color": F.run_color(k + 1), "compute": list(c),
             "values": list(y), "fit": _fit(c, y)}
        )  # fmt: skip
    fig = F.compare_figure(items, unit="GPU-hours", metric="m", budget=200000.0, sampled=True)
    metas = _metas(fig)
    assert metas.count("points") == 2 and metas.count("fit") == 2
    assert metas.count("extrapolation") == 2 and metas.count("band") == 2
    ext = [t for t in fig.data if t.meta == "extrapolation"]
    assert all(max(t.x) >= 200000.0 * 0.999 for t in ext)
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "budget 200k" in texts and "downsampled" in texts
    # each run keeps its colour in every trace
    for it in items:
        colors = {t.line.color for t in fig.data if t.legendgroup == f"run{it['id']}" and t.line}
        assert it["color"] in colors
    # A run that broke: its curve stops at the break, as on the Run page (the old curve's
    # extrapolation to the budget promised what the run no longer does), and the bound on its
    # new ceiling runs from there to the budget, in the run's colour.
    brk = {"compute": 4000.0, "step": 4000, "drop": 0.07, "ceiling_upper": 0.5, "regime":
           "too_few_points"}  # fmt: skip
    items[1]["fit"] = {**items[1]["fit"], "break": brk}
    fig = F.compare_figure(items, unit="GPU-hours", metric="m", budget=200000.0)
    broke = [t for t in fig.data if t.legendgroup == "run2"]
    metas = [t.meta for t in broke]
    assert "extrapolation" not in metas and "ceiling_upper" in metas
    assert max(next(t for t in broke if t.meta == "fit").x) <= 4000.0 * (1 + 1e-6)
    bound = next(t for t in broke if t.meta == "ceiling_upper")
    assert list(bound.x) == [4000.0, 200000.0] and list(bound.y) == [0.5, 0.5]
    assert bound.line.color == items[1]["color"] and "slow-highceiling" in bound.name
    assert _metas(fig).count("extrapolation") == 1  # the other run's, unchanged


def test_history_residuals_and_ceiling() -> None:
    hist = [
        {"max_compute": 2000.0, "A": None, "A_ci": None, "A_lower_bound": 0.5},
        {"max_compute": 4000.0, "A": 0.6, "A_ci": [0.58, 0.63], "A_lower_bound": None},
        {"max_compute": 8000.0, "A": 0.61, "A_ci": [0.6, 0.62], "A_lower_bound": None},
    ]
    fig = F.history_figure(hist, color="#123456", unit="GPU-hours")
    assert set(_metas(fig)) == {"A", "A_lower_bound"}
    a = fig.data[_metas(fig).index("A")]
    assert list(a.error_y.array) == [0.63 - 0.6, 0.62 - 0.61] or np.allclose(
        a.error_y.array, [0.03, 0.01]
    )
    c, y = series({"A": 0.61, "B": 1.92, "C_mid": 2542.0})
    fig = F.residuals_figure(
        {"compute": list(c), "values": list(y)}, _fit(c, y, fit_until=6000.0),
        color="#000", unit="GPU-hours", fit_until=6000.0,
    )  # fmt: skip
    assert _metas(fig) == ["residuals", "heldout"]
    rows = [
        {"id": 1, "label": "a", "A": 0.6, "A_ci": [0.58, 0.62], "B": 2.0, "color": "#f00",
         "highlight": True},
        {"id": 2, "label": "b", "A": None, "A_lower_bound": 0.55, "B": 1.5, "color": "#0f0",
         "highlight": True},
        {"id": 3, "label": "c", "A": 0.7, "B": 1.2, "color": "#00f", "highlight": False},
    ]  # fmt: skip
    fig = F.ceiling_figure(rows)
    assert _metas(fig) == ["others", "run", "run"]
    assert fig.data[2].marker.symbol == "triangle-up" and "A ≥" in fig.data[2].name


def test_colours_are_stable_and_distinct_for_neighbours() -> None:
    assert F.run_color(7) == F.run_color(7)
    assert len({F.run_color(i) for i in range(1, 11)}) == 10
    assert F.unit_label("gpu_hours") == "GPU-hours"
    assert F.log_ticks(100, 10000)[:3] == [100, 200, 500]


def test_forecast_is_never_a_bare_number_unless_identified() -> None:
    ok = {"status": "ok", "predicted_at_target": 0.6123, "predicted_interval": [0.59, 0.63]}
    assert F.forecast_text(ok) == "0.612 [0.590, 0.630]"
    unid = {"status": "unidentified", "predicted_at_target": 0.994,
            "predicted_interval": [0.49, 0.998]}
    assert F.forecast_text(unid) == "[0.490, 0.998]"  # no "0.994" on its own
    assert F.forecast_text({**unid, "predicted_interval": None}) == "–"
    broke = {**unid, "break": {"ceiling_upper": 0.5612, "regime": "too_few_points"}}
    assert F.forecast_text(broke) == "≤ 0.561 (broke)"
    assert F.forecast_text(None) == "–"


def test_run_figure_marks_a_break() -> None:
    fit = {
        "status": "unidentified", "A": None, "A_lower_bound": None, "B": 1.9, "C_mid": 2500.0,
        "R0": 0.3, "ci": None, "fit_range": [100.0, 12000.0], "n_points": 100,
        "target_compute": 20000.0, "predicted_at_target": 0.51,
        "predicted_interval": [0.49, 0.55],
        "break": {"compute": 8000.0, "step": 8000, "drop": 0.07, "ceiling_upper": 0.54,
                  "regime": "too_few_points"},
        "internal": {"a_fit": 0.61},
    }  # fmt: skip
    c, y = series(CROSSING["slow-highceiling"])
    fig = F.run_figure({"compute": list(c), "values": list(y)}, fit, color="#000000",
                       unit="GPU-hours", metric="m")
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "break −0.070" in texts and "broke at step 8000" in texts
    assert "A ≤ 0.540 (broke)" in texts
    assert "≤ 0.540 (broke)" in texts
    assert any(s.x0 == 8000.0 for s in fig.layout.shapes if s.type == "line")
    # the old curve stops at the break (no extrapolation of a curve the run left), and the
    # bound on the new ceiling runs from there
    metas = {t.meta: t for t in fig.data}
    assert "extrapolation" not in metas and max(metas["fit"].x) <= 8000.0 * (1 + 1e-6)
    assert list(metas["ceiling_upper"].y) == [0.54, 0.54]


def test_history_marks_the_ceiling_of_a_broken_run() -> None:
    # Fits after a break withhold A; the history shows the bound on the new ceiling instead of
    # going silent, on an axis that reaches down to it.
    hist = [
        {"max_compute": 4000.0, "A": 0.6, "A_ci": [0.58, 0.63], "A_lower_bound": 0.58},
        {"max_compute": 6000.0, "A": None, "A_ci": None, "A_lower_bound": None,
         "break": {"compute": 5000.0, "drop": 0.08, "ceiling_upper": 0.52}},
    ]
    fig = F.history_figure(hist, color="#123456", unit="GPU-hours")
    assert set(_metas(fig)) == {"A", "ceiling_upper"}
    broke = fig.data[_metas(fig).index("ceiling_upper")]
    assert list(broke.x) == [6000.0] and list(broke.y) == [0.52]
    assert list(broke.marker.symbol) == ["triangle-down"]
    lo, hi = fig.layout.yaxis.range
    assert lo < 0.52 and hi > 0.63
    # Only broken fits: still a chart, not "no estimate of A yet".
    only = F.history_figure(hist[1:], color="#123456", unit="GPU-hours")
    assert _metas(only) == ["ceiling_upper"]
    # and its one kind of marker is named in a legend (plotly hides a lone trace's).
    assert only.layout.showlegend is True and only.data[0].name == "A ≤ (broke)"


def test_history_draws_fits_made_afterwards_hollow() -> None:
    # Points that arrived at once get the history a live run would have had, fitted after the
    # fact (refit/backfill.py): drawn apart from what scalewatch said at the time.
    hist = [
        {"max_compute": 1000.0, "A": None, "A_lower_bound": 0.5, "backfilled": True},
        {"max_compute": 2000.0, "A": 0.61, "A_ci": [0.57, 0.66], "backfilled": True},
        {"max_compute": 3000.0, "A": 0.60, "A_ci": [0.58, 0.63], "backfilled": True},
        {"max_compute": 4000.0, "A": 0.60, "A_ci": [0.59, 0.62], "backfilled": False},
    ]
    fig = F.history_figure(hist, color="#123456", unit="GPU-hours")
    assert _metas(fig) == ["A_backfilled", "A", "A_lower_bound"]
    after, live, lb = fig.data
    assert list(after.x) == [2000.0, 3000.0] and after.marker.symbol == "circle-open"
    assert list(live.x) == [4000.0] and live.marker.symbol == "circle"
    assert list(lb.marker.symbol) == ["triangle-up-open"]
    assert "afterwards" in after.name


def test_early_runs_get_sensible_axes_and_every_run_a_label() -> None:
    # One point: the pass-rate axis hugs it instead of plotly's -0.5..1.5 padding.
    fig = F.run_figure({"compute": [100.0], "values": [0.31]}, None, color="#000",
                       unit="GPU-hours", metric="m")
    lo, hi = fig.layout.yaxis.range
    assert 0.2 < lo < 0.31 < hi < 0.4
    # A history with no estimate of A at all says so; with one, the axis spans the estimate.
    none = F.history_figure([{"max_compute": 100.0, "A": None, "A_lower_bound": None}],
                            color="#000", unit="GPU-hours")
    assert "no estimate of A yet" in " ".join(a.text for a in none.layout.annotations)
    one = F.history_figure([{"max_compute": 4000.0, "A": 0.6, "A_ci": [0.58, 0.63]}],
                           color="#000", unit="GPU-hours")
    lo, hi = one.layout.yaxis.range
    assert 0.5 < lo < 0.58 and 0.63 < hi < 0.7
    # ... and the x axis a factor of two either side of the one fit, not two decades.
    assert tuple(one.layout.xaxis.range) == pytest.approx((math.log10(2000), math.log10(8000)))
    # Other runs on the ceiling chart carry their names, and the y axis leaves them room.
    rows = [{"id": i, "label": f"run{i}", "A": 0.6 + i / 100, "B": 1.0 + i / 10,
             "color": "#f00", "highlight": i == 0} for i in range(5)]
    fig = F.ceiling_figure(rows)
    others = fig.data[_metas(fig).index("others")]
    assert others.mode == "markers+text" and list(others.text) == ["run1", "run2", "run3", "run4"]
    lo, hi = fig.layout.yaxis.range
    assert lo < 0.6 and hi > 0.64
    # A tight cluster: the labels that would print over each other are left out, never drawn
    # on top of one another, and every run keeps its name on hover.
    rows = [{"id": i, "label": f"scalerl-8b-recipe-{i}", "A": 0.6 + i / 2000, "B": 2.0 + i / 200,
             "color": "#f00", "highlight": False} for i in range(8)]
    rows.append({"id": 99, "label": "far", "A": 0.4, "B": 1.0, "color": "#f00"})
    others = F.ceiling_figure(rows).data[0]
    shown = [t for t in others.text if t]
    assert 1 <= len(shown) < 8 and "far" in shown
    assert list(others.customdata) == [r["label"] for r in rows]
    assert "%{customdata}" in others.hovertemplate
    # A long name at the chart's left or right edge goes where it is read whole (beside its
    # marker, towards the middle), never past the edge where the card cuts it off; so does a
    # highlighted run's.
    long = "qwen2.5-0.5b-instruct-gsm8k-crpo-no-branch"
    rows = [{"id": 1, "label": long, "A": 0.64, "B": 0.7, "color": "#f00"},
            {"id": 2, "label": "mid", "A": 0.6, "B": 1.6, "color": "#f00"},
            {"id": 3, "label": long + "-seed2", "A": 0.58, "B": 2.5, "color": "#f00"},
            {"id": 4, "label": long + "-x", "A": 0.7, "B": 0.71, "color": "#0f0",
             "highlight": True}]
    fig = F.ceiling_figure(rows)
    others = fig.data[_metas(fig).index("others")]
    assert list(others.text) == [long, "mid", long + "-seed2"]
    assert list(others.textposition) == ["middle right", "top center", "middle left"]
    assert fig.data[_metas(fig).index("run")].textposition == "middle right"


def test_fit_caption_names_a_noise_prior_and_where_it_came_from() -> None:
    fit = {"status": "ok", "A": 0.6, "ci": {"A": [0.58, 0.62]}, "B": 1.9, "C_mid": 2500.0,
           "R0": 0.3, "A_lower_bound": 0.58}
    assert "noise prior" not in F.fit_caption(fit, "GPU-hours")
    learned = {**fit, "prior": {"rho": {"mean": 0.8, "sd": 0.05}, "source": "project",
                                "finished_runs": 3}}
    assert "noise prior ρ 0.80 ± 0.05 from 3 finished runs" in F.fit_caption(learned, "GPU-hours")
    given = {**fit, "prior": {"rho": {"mean": 0.5, "sd": 0.1}}}
    assert F.fit_caption(given, "GPU-hours").endswith("noise prior ρ 0.50 ± 0.10")
    hindcast = {**fit, "prior": {**learned["prior"], "drift_rate": 0.012, "hindcasts": 20}}
    assert F.fit_caption(hindcast, "GPU-hours").endswith(
        "<br>noise prior ρ 0.80 ± 0.05 from 3 finished runs · "
        "drift allowance 0.012 per ln(compute) from 20 hindcasts")
    assert "drift" not in F.fit_caption(learned, "GPU-hours")
    # Without a noise prior the project's allowance gets a line of its own.
    alone = {**fit, "prior": {"drift_rate": 0.004, "hindcasts": 19}}
    assert F.fit_caption(alone, "GPU-hours").endswith(
        "<br>drift allowance 0.004 per ln(compute) from 19 hindcasts")


def test_fit_caption_says_why_a_is_withheld() -> None:
    why = ("A is not pinned down yet (its 95% interval [0.550, 0.650] is narrow, but the run is "
           "only 2.2 x past its fitted C_mid, its knee, and A is claimed from 2.5 x, at compute "
           "5,705)")
    fit = {"status": "unidentified", "A": None, "ci": {"A": [0.55, 0.65]}, "B": 2.1,
           "C_mid": 2282.0, "R0": 0.3, "A_lower_bound": 0.57, "message": why}
    caption = F.fit_caption(fit, "GPU-hours")
    head, _, said = caption.partition("asymptote not identified yet<br>")
    assert head and said
    # The whole reason, broken into lines a chart can show: a plotly annotation never wraps,
    # and one line of this length ran past the chart's right edge.
    lines = said.split("<br>")
    assert len(lines) == 2 and all(len(line) <= F.CAPTION_LINE for line in lines)
    assert " ".join(lines) == why
    ok = {**fit, "status": "ok", "A": 0.6, "message": ""}
    assert "<br>" not in F.fit_caption(ok, "GPU-hours")


def test_fit_caption_gives_a_b_prior_its_own_line() -> None:
    fit = {"status": "ok", "A": 0.6, "ci": {"A": [0.58, 0.62]}, "B": 1.9, "C_mid": 2500.0,
           "R0": 0.3, "A_lower_bound": 0.58}
    b = {"median": 1.9, "log_sd": 0.2, "dof": 4.0}
    assert F.fit_caption({**fit, "prior": {"B": b}}, "GPU-hours").endswith(
        "<br>B prior 1.90 ×/÷ 1.22")
    both = {**fit, "prior": {"rho": {"mean": 0.8, "sd": 0.05}, "source": "project",
                             "finished_runs": 3,
                             "B": {**b, "source": "project", "finished_runs": 4}}}
    assert F.fit_caption(both, "GPU-hours").endswith(
        "<br>noise prior ρ 0.80 ± 0.05 from 3 finished runs<br>B prior 1.90 ×/÷ 1.22 from 4 "
        "finished runs")
    # A third caption line gets room above the plot.
    c = np.geomspace(10, 8000, 40)
    pts = {"compute": list(c), "values": list(0.3 + 0.3 * c / (c + 2000))}
    one, two = (F.run_figure(pts, f, color="#000", unit="GPU-hours", metric="m")
                for f in ({**fit, "prior": {"B": b}}, both))
    assert two.layout.margin.t - one.layout.margin.t >= 14


def test_run_chart_title_legend_and_caption_keep_rows_of_their_own() -> None:
    """A long run name beside the legend, and a title centred in a top margin that grew with a
    three-line withheld reason, sat on each other on a narrow chart: the title, the legend and
    the caption now each have a row, and every caption line fits the chart."""
    c = np.geomspace(10, 8000, 40)
    pts = {"compute": list(c), "values": list(0.3 + 0.3 * c / (c + 2000))}
    why = "A is not pinned down yet (its 95% interval [0.278, 0.863] is wider than 0.1); " * 3
    fit = {"status": "unidentified", "A": None, "ci": {"A": [0.28, 0.86]}, "B": 1.56,
           "C_mid": 13400.0, "R0": 0.1, "A_lower_bound": 0.28, "message": why,
           "predicted_at_target": 0.4, "predicted_interval": [0.255, 0.62],
           "target_compute": 16000.0}
    fig = F.run_figure(pts, fit, color="#000", unit="GPU-hours", metric="val_pass_rate",
                       title="cispo-768-seed3-lr1e-6-bs512-a-long-name: val_pass_rate")
    caption = next(a for a in fig.layout.annotations if "B = 1.56" in a.text)
    lines = caption.text.split("<br>")
    assert len(lines) >= 4 and all(len(line) <= F.CAPTION_LINE for line in lines)
    h = fig.layout.height
    title_top = (1 - fig.layout.title.y) * h  # px from the chart's top, yanchor "top"
    legend_top = (1 - fig.layout.legend.y) * h
    assert fig.layout.title.yref == fig.layout.legend.yref == "container"
    assert fig.layout.title.yanchor == fig.layout.legend.yanchor == "top"
    # Title row (16 px font) above the legend row, the legend's row above the caption's first
    # line: the caption's lines (16 px each) end at the plot's top.
    caption_top = fig.layout.margin.t - 16 * len(lines)
    assert title_top + 22 <= legend_top and legend_top + 20 <= caption_top


def test_large_compute_reads_in_engineering_form() -> None:
    """Issue 36 item 3: FLOP counts and large GPU-hour figures are not 13-digit numbers."""
    from scalewatch.dashboard.components import column
    from scalewatch.dashboard.figures import fmt

    assert [fmt(v) for v in (1.04e9, 16_000, 250_000, 12_345, 999_999, 3.2e21, -16_000)] == [
        "1.04e9", "16k", "250k", "12.3k", "1e6", "3.2e21", "-16k"]
    assert [fmt(v) for v in (9_999, 2_500, 0.5, 512)] == ["9,999", "2,500", "0.5", "512"]
    col = column("last compute", "last_compute", "compute")
    assert col["type"] == "numeric" and col["format"] == {"specifier": ".3~s"}


def test_ceiling_chart_labels_clear_intervals_markers_and_each_other() -> None:
    """Issue 36 item 7: a highlighted run's label printed over its own interval bar (above or
    below its marker) and over a neighbour's label; now each is placed clear of every marker,
    interval and label placed before it."""
    from scalewatch.dashboard.figures.compare import (
        _label_box,
        _overlaps,
        _pixels,
        _point,
        _ranges,
        ceiling_figure,
    )

    rows = [
        {"id": 1, "label": "run-with-a-wide-interval", "highlight": True, "A": 0.60,
         "A_ci": [0.50, 0.70], "B": 1.9, "color": "#e15759"},
        {"id": 2, "label": "its-close-neighbour", "highlight": True, "A": 0.62,
         "A_ci": [0.61, 0.63], "B": 1.95, "color": "#4e79a7"},
        {"id": 3, "label": "other", "A": 0.58, "B": 2.4},
        {"id": 4, "label": "far", "A": 0.75, "B": 1.2},
    ]  # fmt: skip
    fig = ceiling_figure(rows)
    runs = [t for t in fig.data if t.meta == "run"]
    assert len(runs) == 2
    xr, yr = _ranges([r for r in rows if r.get("B")])
    boxes = []
    for trace, row in zip(runs, rows[:2], strict=True):
        x, y, text = _point(row)
        px, py = _pixels(x, y, xr, yr)
        box = _label_box(px, py, text, trace.textposition)
        (_, top), (_, bottom) = _pixels(x, row["A_ci"][1], xr, yr), _pixels(x, row["A_ci"][0],
                                                                           xr, yr)
        assert not _overlaps(box, (px - 5, top, px + 5, bottom)), trace.textposition
        boxes.append(box)
    assert not _overlaps(*boxes)


def test_break_label_sits_where_no_point_is() -> None:
    """Issue 36 item 7: the break's label was drawn at 90% of the plot's height whatever the
    points there, over the run's points when they were high at the break. Now it goes to the
    height farthest from the points it covers, on a white ground."""
    import numpy as np

    from scalewatch.dashboard.figures.run import clear_height

    c = np.geomspace(100, 10_000, 200)
    rising = 0.3 + 0.4 * (np.log10(c) - 2) / 2  # high near the end
    fit = {"status": "unidentified", "A": None, "B": 1.9, "C_mid": 2500.0, "R0": 0.3,
           "break": {"compute": 9000.0, "drop": 0.05, "regime": "too_few_points"}}
    fig = F.run_figure({"compute": list(c), "values": list(rising)}, fit, color="#000",
                       unit="GPU-hours", metric="m")  # fmt: skip
    (note,) = [a for a in fig.layout.annotations if a.text.startswith("break")]
    near = (rising[(c <= 9000) & (c >= 9000 / 4)] - rising.min()) / np.ptp(rising)
    assert note.y < near.min() - 0.1 and note.bgcolor  # below the points, not over them
    falling = rising[::-1]  # low near the end: the label goes above
    assert clear_height(c, falling, 9000.0) > 0.5
