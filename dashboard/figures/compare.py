"""Figures of the Compare page: runs overlaid with their fits, ceiling against efficiency."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from dashboard.figures.common import (
    GREY,
    base_layout,
    curve_traces,
    empty_figure,
    fmt,
    log_axis,
    positive,
    vline,
)


def compare_figure(
    items: list[dict[str, Any]],
    *,
    unit: str,
    metric: str,
    budget: float | None = None,
    sampled: bool = False,
) -> go.Figure:
    """Several runs overlaid: points, fits (solid), extrapolations (dashed) to the budget."""
    title = f"{metric} against compute"
    if not items:
        return empty_figure("select runs to compare", title)
    fig = go.Figure()
    end = max([budget or 0.0] + [max(i["compute"], default=0.0) for i in items])
    for it in items:
        # Plotly renders <b>, <a href> and entities in names and hover text: escape user text.
        color, label = it["color"], html.escape(it["label"])
        c, y = positive(it["compute"], it["values"])
        group = f"run{it['id']}"
        fig.add_trace(
            go.Scattergl(
                x=c, y=y.astype("f4"), mode="markers",
                marker={"color": color, "size": 4, "opacity": 0.45},
                name=label, meta="points", legendgroup=group,
                hovertemplate=f"{label}<br>%{{x:,.4g}} {unit}<br>%{{y:.4f}}<extra></extra>",
            )
        )  # fmt: skip
        if it.get("fit"):
            for tr in curve_traces(it["fit"], color, label, end, group=group):
                fig.add_trace(tr)
    base_layout(fig, title, f"compute ({unit}, log scale)", metric, log_x=True)
    if budget:
        vline(fig, budget, f"budget {fmt(budget)}", "#37474f", 1.5, 0.0)
    lows = [min((x for x in i["compute"] if x > 0), default=end) for i in items]
    if end > 0:
        log_axis(fig, min(lows + [end]), end)
    if sampled:
        fig.add_annotation(
            text="downsampled for display", showarrow=False, xref="paper", yref="paper",
            x=1, y=0, xanchor="right", yanchor="bottom", font={"size": 11, "color": "#78909c"},
        )  # fmt: skip
    return fig


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
    for r in (r for r in pts if r.get("highlight")):
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
    bs = [r["B"] for r in pts]
    pad = max((max(bs) - min(bs)) * 0.15, 0.1)
    # Room above and below the points for their labels and intervals, clear of the ticks.
    ys = [v for r in pts for v in (r.get("A_ci") or []) if v is not None]
    ys += [r.get("A") or r.get("A_lower_bound") for r in pts]
    y_pad = max((max(ys) - min(ys)) * 0.2, 0.02)
    fig.update_layout(
        xaxis={"range": [min(bs) - pad, max(bs) + pad]},
        yaxis={"range": [min(ys) - y_pad, max(ys) + y_pad]},
        legend={"orientation": "h", "y": -0.3, "x": 0, "xanchor": "left", "yanchor": "top"},
        margin={"b": 120},
    )
    fig.update_traces(cliponaxis=False, selector={"type": "scatter"})
    return fig
