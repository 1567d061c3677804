"""Figures of the Compare page: runs and recipes (groups) overlaid with their fits, ceiling
against efficiency (a recipe with its A interval and its seeds' own A)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from scalewatch.dashboard.figures.common import (
    GREY,
    PALETTE,
    base_layout,
    base_layout_dict,
    curve_trace_dicts,
    empty_figure,
    fit_trace_dicts,
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
            "hovertemplate": f"{label}<br>%{{x:.3~s}} {unit}<br>%{{y:.4f}}<extra></extra>",
        })  # fmt: skip
        if it.get("fit"):
            # A run that broke: its curve up to the break, then the bound on its new ceiling,
            # in its own colour (several runs share the chart).
            data += fit_trace_dicts(it["fit"], color, label, end, group=group, bound_color=color)
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
            "hovertemplate": f"{label}: {seed}<br>%{{x:.3~s}} {unit}<br>%{{y:.4f}}"
                             "<extra></extra>",
        })  # fmt: skip
    return out


MAX_LABELLED = 40  # other runs labelled on the ceiling chart at most (beyond: hover only)
POSITIONS = ("top center", "bottom center", "middle right", "middle left")
# The ceiling chart's plotting area in pixels (its card: 420 high, about half the page wide,
# minus margins) and the size of a 10-pixel label's characters: enough to tell which labels
# would print over each other.
PLOT_PX = (520.0, 240.0)
CHAR_PX, LINE_PX, GAP_PX = 6.0, 12.0, 6.0

Box = tuple[float, float, float, float]  # (left, top, right, bottom) in pixels


def _label_box(px: float, py: float, text: str, position: str) -> Box:
    w, h = CHAR_PX * len(text), LINE_PX
    if position == "top center":
        return (px - w / 2, py - GAP_PX - h, px + w / 2, py - GAP_PX)
    if position == "bottom center":
        return (px - w / 2, py + GAP_PX, px + w / 2, py + GAP_PX + h)
    if position == "middle right":
        return (px + GAP_PX, py - h / 2, px + GAP_PX + w, py + h / 2)
    return (px - GAP_PX - w, py - h / 2, px - GAP_PX, py + h / 2)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(box: Box) -> bool:
    """Whether a label stays within the chart's width (the card cuts off what is beyond: a
    long name next to the left edge lost its first letters). Above and below the plot there
    is the title's and the axis's room."""
    return box[0] >= 0.0 and box[2] <= PLOT_PX[0]


def _pixels(x: float, y: float, x_range: tuple[float, float],
            y_range: tuple[float, float]) -> tuple[float, float]:
    (x0, x1), (y0, y1) = x_range, y_range
    return ((x - x0) / (x1 - x0 or 1.0) * PLOT_PX[0], (y1 - y) / (y1 - y0 or 1.0) * PLOT_PX[1])


def reserved_positions(
    reserved: Sequence[tuple[float, float, str]], x_range: tuple[float, float],
    y_range: tuple[float, float], markers: Sequence[tuple[float, float]] = (),
    bars: Sequence[tuple[float, float] | None] = (),
) -> list[str]:
    """Where each highlighted run's (or recipe's) label goes: the first of ``POSITIONS`` that
    stays within the chart and prints over no label placed before it, no marker (``markers``:
    every point of the chart, as (x, y)) and no interval bar (``bars``: each reserved point's
    95% interval of A, or None); when none is clear, the one over the fewest."""
    def px(x: float, y: float) -> tuple[float, float]:
        return _pixels(x, y, x_range, y_range)

    obstacles: list[Box] = []
    for x, y in [*markers, *((x, y) for x, y, _ in reserved)]:
        cx, cy = px(x, y)
        obstacles.append((cx - 7, cy - 7, cx + 7, cy + 7))  # a highlighted marker's size
    for (x, _, _), bar in zip(reserved, bars or [None] * len(reserved), strict=True):
        if bar is not None:
            (cx, top), (_, bottom) = px(x, bar[1]), px(x, bar[0])
            obstacles.append((cx - 5, top, cx + 5, bottom))  # the bar and its caps
    out = []
    for x, y, text in reserved:
        cx, cy = px(x, y)
        own = (cx - 7, cy - 7, cx + 7, cy + 7)
        inside = [p for p in POSITIONS if _inside(_label_box(cx, cy, text, p))] \
            or [POSITIONS[0]]

        def clashes(position: str, cx: float = cx, cy: float = cy, text: str = text,
                    own: Box = own) -> int:
            box = _label_box(cx, cy, text, position)
            return sum(_overlaps(box, o) for o in obstacles if o != own)

        best = min(inside, key=lambda p: (clashes(p), inside.index(p)))
        out.append(best)
        obstacles.append(_label_box(cx, cy, text, best))
    return out


def place_labels(
    points: list[tuple[float, float, str]], x_range: tuple[float, float],
    y_range: tuple[float, float], reserved: Sequence[tuple[float, float, str]] = (),
    reserved_at: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """(text, position) for each point's label: the first of ``POSITIONS`` where it prints
    over no other label and no marker and stays within the chart, else no label (its name
    stays on hover).  ``reserved``: points whose labels are always drawn (the highlighted
    runs, at ``reserved_positions``).  Labels that cannot all be read (a cluster of runs with
    the same ceiling and efficiency) are left out instead of printed over each other."""

    def pixels(x: float, y: float) -> tuple[float, float]:
        return _pixels(x, y, x_range, y_range)

    taken: list[Box] = []
    for x, y, _ in [*points, *reserved]:  # every marker
        px, py = pixels(x, y)
        taken.append((px - 4, py - 4, px + 4, py + 4))
    at = reserved_at if reserved_at is not None else reserved_positions(reserved, x_range,
                                                                        y_range)
    for (x, y, text), pos in zip(reserved, at, strict=True):
        taken.append(_label_box(*pixels(x, y), text, pos))
    out = []
    for x, y, text in points:
        px, py = pixels(x, y)
        for position in POSITIONS:
            box = _label_box(px, py, text, position)
            # (its own marker: clear by GAP_PX)
            if _inside(box) and not any(_overlaps(box, t) for t in taken):
                taken.append(box)
                out.append((text, position))
                break
        else:
            out.append(("", POSITIONS[0]))
    return out


def _point(r: dict[str, Any]) -> tuple[float, float, str]:
    """A run's marker on the ceiling chart: (B, A or its lower bound, escaped name)."""
    return float(r["B"]), float(r.get("A") or r["A_lower_bound"]), html.escape(r["label"])


def ceiling_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """Ceiling (A) against efficiency (B), one marker per run; highlighted runs in colour."""
    title = "Ceiling vs efficiency"
    pts = [r for r in rows if r.get("B") is not None and (r.get("A") or r.get("A_lower_bound"))]
    if not pts:
        return empty_figure("no fitted runs yet", title)
    fig = go.Figure()
    x_range, y_range = _ranges(pts)
    others = [r for r in pts if not r.get("highlight")]
    highlighted = [_point(r) for r in pts if r.get("highlight")]
    # Each highlighted run's and recipe's label position, by its row (see reserved_positions):
    # clear of every marker (seeds' too), of the intervals and of each other.
    markers = [(x, y) for x, y, _ in map(_point, others)] + [
        (float(sd["B"]), float(sd.get("A") or sd["A_lower_bound"]))
        for r in pts for sd in r.get("seeds") or []
        if sd.get("B") is not None and (sd.get("A") or sd.get("A_lower_bound")) is not None]
    bars = [tuple(r["A_ci"]) if r.get("A") is not None and r.get("A_ci") else None
            for r in pts if r.get("highlight")]
    label_at = dict(zip([id(r) for r in pts if r.get("highlight")],
                        reserved_positions(highlighted, x_range, y_range, markers, bars),
                        strict=True))  # fmt: skip
    if others:
        # Few enough to read: each run is labelled where its label prints over no other (a
        # run in a tight cluster keeps its name on hover only); many: all on hover.
        labelled = len(others) <= MAX_LABELLED
        cls = go.Scatter if labelled else go.Scattergl
        points = [_point(r) for r in others]
        names = [n for _, _, n in points]
        placed = place_labels(points, x_range, y_range, highlighted,
                              [label_at[id(r)] for r in pts if r.get("highlight")]) \
            if labelled \
            else [("", POSITIONS[0])] * len(others)
        fig.add_trace(
            cls(
                x=[r["B"] for r in others],
                y=[y for _, y, _ in points],
                text=[t for t, _ in placed],
                customdata=names,
                mode="markers+text" if labelled else "markers",
                textposition=[p for _, p in placed],
                textfont={"size": 10, "color": "#78909c"},
                marker={"color": GREY, "size": 7, "opacity": 0.6},
                name="other runs",
                meta="others",
                hovertemplate="%{customdata}<br>B %{x:.3g}<br>A %{y:.3f}<extra></extra>",
            )
        )
    for r in (r for r in pts if r.get("highlight") and r.get("kind") == "group"):
        _recipe_traces(fig, r, label_at[id(r)])
    for r in (r for r in pts if r.get("highlight") and r.get("kind") != "group"):
        ident = r.get("A") is not None
        err = r.get("A_ci") if ident else None
        fig.add_trace(
            go.Scatter(
                x=[r["B"]],
                y=[r["A"] if ident else r["A_lower_bound"]],
                mode="markers+text",
                text=[html.escape(r["label"])],
                textposition=label_at[id(r)],
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
    fig.update_layout(
        xaxis={"range": list(x_range)},
        yaxis={"range": list(y_range)},
        legend={"orientation": "h", "y": -0.3, "x": 0, "xanchor": "left", "yanchor": "top"},
        margin={"b": 120},
    )
    fig.update_traces(cliponaxis=False, selector={"type": "scatter"})
    return fig


def _ranges(pts: list[dict[str, Any]]) -> tuple[tuple[float, float], tuple[float, float]]:
    """The ceiling chart's axes: every run, recipe and seed, with room above and below the
    points for their labels and intervals, clear of the ticks."""
    seeds = [s for r in pts for s in r.get("seeds") or []
             if s.get("B") is not None and (s.get("A") or s.get("A_lower_bound")) is not None]
    bs = [r["B"] for r in pts] + [s["B"] for s in seeds]
    pad = max((max(bs) - min(bs)) * 0.15, 0.1)
    ys = [v for r in pts for v in (r.get("A_ci") or []) if v is not None]
    ys += [r.get("A") or r.get("A_lower_bound") for r in pts]
    ys += [v for s in seeds if (v := s.get("A") or s.get("A_lower_bound")) is not None]
    y_pad = max((max(ys) - min(ys)) * 0.2, 0.02)
    return (min(bs) - pad, max(bs) + pad), (min(ys) - y_pad, max(ys) + y_pad)


def _recipe_traces(fig: go.Figure, r: dict[str, Any], label_position: str) -> None:
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
            mode="markers+text", text=[label], textposition=label_position,
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
