"""Figures of the Compare page: runs and recipes (groups) overlaid with their fits, ceiling
against efficiency (a recipe with its A interval and its seeds' own A)."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from scalewatch.dashboard.figures.common import (
    GREY,
    PALETTE,
    base_layout,
    base_layout_dict,
    curve_trace_dicts,
    empty_figure,
    fmt,
    log_axis_dict,
    positive,
    vline_parts,
)
from scalewatch.dashboard.figures.group import shades


def compare_figure(
    items: list[dict[str, Any]],
    *,
    unit: str,
    metric: str,
    budget: float | None = None,
    sampled: bool = False,
) -> go.Figure:
    """Several runs overlaid: points, fits (solid), extrapolations (dashed) to the budget.

    A group (`kind` "group") shows its seeds' points in shades of its colour (one legend entry
    for them all) and its pooled fit as its curve. `compare_figure_dict` as a plotly Figure
    (validated)."""
    return go.Figure(compare_figure_dict(items, unit=unit, metric=metric, budget=budget,
                                         sampled=sampled))  # fmt: skip


def compare_figure_dict(
    items: list[dict[str, Any]],
    *,
    unit: str,
    metric: str,
    budget: float | None = None,
    sampled: bool = False,
) -> dict[str, Any]:
    """`compare_figure` as plotly's JSON: what the Compare page sends. Plain dicts because
    building and validating plotly objects for ten runs' forty traces took ~100 ms, more than
    everything else on the page's first load but the database."""
    title = f"{metric} against compute"
    if not items:
        return empty_figure("select runs or groups to compare", title).to_plotly_json()
    data: list[dict[str, Any]] = []
    end = max([budget or 0.0] + [max(i["compute"], default=0.0) for i in items])
    for it in items:
        # Plotly renders <b>, <a href> and entities in names and hover text: escape user text.
        color, label = it["color"], html.escape(it["label"])
        group = f"run{it['id']}"
        if it.get("kind") == "group":
            data += _seed_points(it, label, unit, group)
            if it.get("fit"):
                data += curve_trace_dicts(it["fit"], color, f"{label} (recipe)", end, group=group)
            continue
        c, y = positive(it["compute"], it["values"])
        data.append({
            "type": "scattergl", "x": c, "y": y.astype("f4"), "mode": "markers",
            "marker": {"color": color, "size": 4, "opacity": 0.45},
            "name": label, "meta": "points", "legendgroup": group,
            "hovertemplate": f"{label}<br>%{{x:,.4g}} {unit}<br>%{{y:.4f}}<extra></extra>",
        })  # fmt: skip
        if it.get("fit"):
            data += curve_trace_dicts(it["fit"], color, label, end, group=group)
    layout = base_layout_dict(title, f"compute ({unit}, log scale)", metric, log_x=True)
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    if budget:
        shape, note = vline_parts(budget, f"budget {fmt(budget)}", "#37474f", 1.5, 0.0)
        shapes.append(shape)
        notes.append(note)
    lows = [min((x for x in i["compute"] if x > 0), default=end) for i in items]
    if end > 0:
        layout["xaxis"].update(log_axis_dict(min(lows + [end]), end))
    if sampled:
        notes.append({
            "text": "downsampled for display", "showarrow": False, "xref": "paper",
            "yref": "paper", "x": 1, "y": 0, "xanchor": "right", "yanchor": "bottom",
            "font": {"size": 11, "color": "#78909c"},
        })  # fmt: skip
    if shapes:
        layout["shapes"] = shapes
    if notes:
        layout["annotations"] = notes
    return {"data": data, "layout": layout}


def _seed_points(it: dict[str, Any], label: str, unit: str, group: str) -> list[dict[str, Any]]:
    """A recipe's seeds: small markers in shades of its colour, one legend entry for all."""
    seeds = it.get("seeds") or []
    out = []
    for k, (s, col) in enumerate(zip(seeds, shades(it["color"], len(seeds)), strict=True)):
        c, y = positive(s["compute"], s["values"])
        seed = html.escape(str(s["name"]))
        out.append({
            "type": "scattergl", "x": c, "y": y.astype("f4"), "mode": "markers",
            "marker": {"color": col, "size": 3, "opacity": 0.45},
            "name": f"{label} (seeds)", "meta": "seed", "legendgroup": group,
            "showlegend": k == 0,
            "hovertemplate": f"{label}: {seed}<br>%{{x:,.4g}} {unit}<br>%{{y:.4f}}"
                             "<extra></extra>",
        })  # fmt: skip
    return out


MAX_LABELLED = 40  # other runs labelled on the ceiling chart at most (beyond: hover only)
POSITIONS = ("top center", "bottom center", "middle right", "middle left")


def ceiling_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """Ceiling (A) against efficiency (B), one marker per run; highlighted runs in colour."""
    title = "Ceiling vs efficiency"
    pts = [r for r in rows if r.get("B") is not None and (r.get("A") or r.get("A_lower_bound"))]
    if not pts:
        return empty_figure("no fitted runs yet", title)
    fig = go.Figure()
    others = [r for r in pts if not r.get("highlight")]
    if others:
        # Few enough to read: every run is labelled (positions alternate so neighbours do not
        # print over each other); many: unlabelled, the names on hover.
        labelled = len(others) <= MAX_LABELLED
        cls = go.Scatter if labelled else go.Scattergl
        fig.add_trace(
            cls(
                x=[r["B"] for r in others],
                y=[r.get("A") or r.get("A_lower_bound") for r in others],
                text=[html.escape(r["label"]) for r in others],
                mode="markers+text" if labelled else "markers",
                textposition=[POSITIONS[i % len(POSITIONS)] for i in range(len(others))],
                textfont={"size": 10, "color": "#78909c"},
                marker={"color": GREY, "size": 7, "opacity": 0.6},
                name="other runs",
                meta="others",
                hovertemplate="%{text}<br>B %{x:.3g}<br>A %{y:.3f}<extra></extra>",
            )
        )
    for r in (r for r in pts if r.get("highlight") and r.get("kind") == "group"):
        _recipe_traces(fig, r)
    for r in (r for r in pts if r.get("highlight") and r.get("kind") != "group"):
        ident = r.get("A") is not None
        err = r.get("A_ci") if ident else None
        fig.add_trace(
            go.Scatter(
                x=[r["B"]],
                y=[r["A"] if ident else r["A_lower_bound"]],
                mode="markers+text",
                text=[html.escape(r["label"])],
                textposition="top center",
                marker={
                    "color": r["color"], "size": 12,
                    "symbol": "circle" if ident else "triangle-up",
                },
                error_y=None if not err else {
                    "type": "data", "array": [err[1] - r["A"]],
                    "arrayminus": [r["A"] - err[0]], "color": r["color"],
                },
                name=html.escape(r["label"]) if ident else f"{html.escape(r['label'])} (A ≥)",
                meta="run",
            )
        )  # fmt: skip
    base_layout(fig, title, "B (efficiency: higher reaches A sooner)", "A (ceiling)", False)
    seeds = [s for r in pts for s in r.get("seeds") or []
             if s.get("B") is not None and (s.get("A") or s.get("A_lower_bound")) is not None]
    bs = [r["B"] for r in pts] + [s["B"] for s in seeds]
    pad = max((max(bs) - min(bs)) * 0.15, 0.1)
    # Room above and below the points for their labels and intervals, clear of the ticks.
    ys = [v for r in pts for v in (r.get("A_ci") or []) if v is not None]
    ys += [r.get("A") or r.get("A_lower_bound") for r in pts]
    ys += [v for s in seeds if (v := s.get("A") or s.get("A_lower_bound")) is not None]
    y_pad = max((max(ys) - min(ys)) * 0.2, 0.02)
    fig.update_layout(
        xaxis={"range": [min(bs) - pad, max(bs) + pad]},
        yaxis={"range": [min(ys) - y_pad, max(ys) + y_pad]},
        legend={"orientation": "h", "y": -0.3, "x": 0, "xanchor": "left", "yanchor": "top"},
        margin={"b": 120},
    )
    fig.update_traces(cliponaxis=False, selector={"type": "scatter"})
    return fig


def _recipe_traces(fig: go.Figure, r: dict[str, Any]) -> None:
    """A recipe on the ceiling chart: its pooled A with the 95% interval (a diamond; a
    triangle at its lower bound when A is not identified) and its seeds' own A as small
    points of the same colour (a triangle: a seed's lower bound), so the spread of the seeds
    reads against the interval of the recipe."""
    label = html.escape(r["label"])
    color = r.get("color") or PALETTE[0]
    # A seed without A or a lower bound (it broke, or has no curve yet) has no place here.
    seeds = [s for s in r.get("seeds") or []
             if s.get("B") is not None and (s.get("A") or s.get("A_lower_bound")) is not None]
    if seeds:
        fig.add_trace(
            go.Scatter(
                x=[s["B"] for s in seeds],
                y=[s["A"] if s.get("A") is not None else s.get("A_lower_bound") for s in seeds],
                mode="markers",
                marker={"color": color, "size": 7, "opacity": 0.7,
                        "symbol": ["circle" if s.get("A") is not None else "triangle-up"
                                   for s in seeds],
                        "line": {"width": 1, "color": "white"}},
                text=[html.escape(str(s["name"])) for s in seeds],
                name=f"{label}: seeds' own A", meta="seeds", legendgroup=f"recipe-{label}",
                hovertemplate=f"{label}: %{{text}}<br>B %{{x:.3g}}<br>A %{{y:.3f}}"
                              "<extra></extra>",
            )
        )  # fmt: skip
    if r.get("B") is None:
        return
    ident = r.get("A") is not None
    err = r.get("A_ci") if ident else None
    fig.add_trace(
        go.Scatter(
            x=[r["B"]], y=[r["A"] if ident else r["A_lower_bound"]],
            mode="markers+text", text=[label], textposition="top center",
            marker={"color": color, "size": 15, "symbol": "diamond" if ident else "triangle-up",
                    "line": {"width": 1.5, "color": "#263238"}},
            error_y=None if not err else {
                "type": "data", "array": [err[1] - r["A"]], "arrayminus": [r["A"] - err[0]],
                "color": color, "thickness": 2.5, "width": 8,
            },
            name=f"{label} (recipe, A [95%])" if ident else f"{label} (recipe, A ≥)",
            meta="recipe", legendgroup=f"recipe-{label}",
        )
    )  # fmt: skip
