"""Figures of the Group page (a recipe fitted on its seeds): each seed's points thin and in one
colour family, the pooled curve with its band and extrapolation; the headline and the words
for the seed spread that the Runs page's "by group" view shares."""

from __future__ import annotations

import html
import zlib
from typing import Any

import numpy as np
import plotly.graph_objects as go

from scalewatch.dashboard.figures.common import (
    BROKE_RED,
    PALETTE,
    a_text,
    base_layout,
    curve_traces,
    empty_figure,
    fmt,
    forecast_text,
    log_axis,
    plural,
    positive,
    vline,
)


def group_color(name: str) -> str:
    """A group's hue on every page: a stable hash of its name into the palette (crc32, not
    hash(): Python salts str hashes per process, and every worker must agree)."""
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


def _mix(color: str, other: tuple[int, int, int], t: float) -> str:
    h = color.lstrip("#")
    rgb = [int(h[i : i + 2], 16) for i in (0, 2, 4)]
    out = [round(c + (o - c) * t) for c, o in zip(rgb, other, strict=True)]
    return "#" + "".join(f"{c:02x}" for c in out)


def shades(color: str, n: int) -> list[str]:
    """`n` shades of one hue, dark to light (seeds of one recipe read as one family, each
    still told apart on hover); the hue itself is kept for the pooled curve."""
    if n <= 0:
        return []
    # Darker to lighter than the hue; the lightest still reads as a line on white.
    ts = np.linspace(-0.45, 0.35, n) if n > 1 else np.array([0.2])
    return [
        _mix(color, (0, 0, 0), -t) if t < 0 else _mix(color, (255, 255, 255), t)
        for t in ts.tolist()
    ]


def spread_text(spread: dict[str, Any] | None) -> str:
    """The seed spread of A: its posterior median sd with the 95% interval ("sd 0.008 [0.003,
    0.020]"), "one seed" when there is nothing to spread, "–" without a fit."""
    if not spread:
        return "–"
    n = int(spread.get("n") or 0)
    sd, ci = spread.get("sd"), spread.get("ci")
    if sd is None:
        return "one seed: no spread yet" if n == 1 else "–"
    if ci and None not in ci:
        return f"sd {sd:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"sd {sd:.3f}"


def pooled_over(fit: dict[str, Any] | None) -> int:
    """How many seeds the recipe's fit pooled (those with a curve and no break)."""
    return int(((fit or {}).get("seed_spread") or {}).get("n") or 0)


def group_headline(fit: dict[str, Any] | None, target: float | None, unit: str) -> dict[str, str]:
    """The Group page's headline: the recipe's ceiling A [95%] pooled over k seeds, with the
    forecast at the target and the seed spread in the note.

    Unidentified: A as a lower bound (a_text), never a bare number. Pending: says so."""
    fit = fit or {}
    k = pooled_over(fit)
    status = fit.get("status")
    if status == "pending" or not status:
        return {
            "label": "recipe ceiling A",
            "value": "pending",
            "note": "the group's pooled fit is not computed yet; it is queued",
        }
    if fit.get("B") is None:
        msg = fit.get("message") or "no fit yet"
        return {"label": "recipe ceiling A", "value": "–", "note": str(msg)}
    label = f"recipe ceiling A, pooled over {plural(k, 'seed')}"
    value = a_text(fit)
    notes = []
    if target:
        fc = forecast_text(fit)
        notes.append(f"one seed at {fmt(target)} {unit}: {fc}")
    notes.append(f"seed spread of A: {spread_text(fit.get('seed_spread'))}")
    if status != "ok" and fit.get("A") is None:
        notes.append("the ceiling is not identified yet: a lower bound")
    return {"label": label, "value": value, "note": " · ".join(notes)}


def _seed_trace(m: dict[str, Any], color: str, unit: str, metric: str) -> go.Scatter:
    c, y = positive(m.get("compute", []), m.get("values", []))
    name = html.escape(str(m["name"]))
    off = bool(m.get("off_curve"))
    broke = bool(m.get("break"))
    label = name + (" (broke)" if broke else " (off the curve)" if off else "")
    if not broke and m.get("included") is False:
        label += " (not pooled)"
    return go.Scatter(
        x=c.tolist(),
        y=y.astype("f4").tolist(),
        mode="lines+markers",
        # Thin: the recipe's curve is the subject; a seed off it is dotted so it stands out
        # without a legend lookup.
        line={"color": color, "width": 1, "dash": "dot" if off or broke else "solid"},
        marker={"color": color, "size": 3, "symbol": "x" if off or broke else "circle"},
        opacity=0.8,
        name=label,
        meta="seed",
        customdata=[m.get("id")] * int(c.size),
        legendgroup=f"seed{m.get('id')}",
        hovertemplate=f"{label}<br>%{{x:.3~s}} {unit}<br>{metric} %{{y:.4f}}<extra></extra>",
    )


def group_figure(
    members: list[dict[str, Any]],
    fit: dict[str, Any] | None,
    *,
    unit: str,
    metric: str,
    color: str,
    title: str = "",
    target: float | None = None,
) -> go.Figure:
    """A recipe: each seed thin in shades of `color`, the pooled fit (solid) over the data,
    its extrapolation (dashed) to the target with the 95% band, a break marked on its seed.

    `members`: {"id", "name", "compute", "values", "off_curve", "included", "break"}."""
    metric, title = html.escape(metric), html.escape(title)
    seeds = [m for m in members if positive(m.get("compute", []), m.get("values", []))[0].size]
    if not seeds:
        return empty_figure("no points yet", title)
    fig = go.Figure()
    cs = np.concatenate([positive(m["compute"], m["values"])[0] for m in seeds])
    for m, col in zip(seeds, shades(color, len(seeds)), strict=True):
        fig.add_trace(_seed_trace(m, col, unit, metric))
    for m in seeds:
        brk = m.get("break") or {}
        if brk.get("compute"):
            at = float(brk["compute"])
            c, y = positive(m["compute"], m["values"])
            near = int(np.argmin(np.abs(c - at)))
            fig.add_trace(go.Scatter(
                x=[at], y=[float(y[near])], mode="markers",
                marker={"color": BROKE_RED, "size": 12, "symbol": "x-thin",
                        "line": {"width": 3, "color": BROKE_RED}},
                name=f"{html.escape(str(m['name']))} broke", meta="break",
                hovertemplate=f"{html.escape(str(m['name']))} broke here "
                              f"(−{float(brk.get('drop') or 0):.3f})<extra></extra>",
            ))  # fmt: skip
    end = max(float(cs.max()), target or 0.0)
    if fit and fit.get("B") is not None:
        for tr in curve_traces(fit, color, "recipe", end, group="recipe"):
            if tr.meta in ("fit", "extrapolation"):
                tr.line.width = 3.5  # the recipe over its thin seeds
            tr.showlegend = True
            fig.add_trace(tr)
    base_layout(fig, title, f"compute ({unit}, log scale)", metric, log_x=True)
    fig.add_annotation(
        text=_caption(fit), showarrow=False, xref="paper", yref="paper", x=0, y=1.0,
        xanchor="left", yanchor="bottom", font={"size": 12, "color": "#455a64"},
    )  # fmt: skip
    # The legend under the plot: a recipe has a line per seed plus its own three, which at the
    # top wrapped into rows over the title and the caption.
    fig.update_layout(margin={"t": 80, "b": 130},
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "y": -0.2,
                              "yanchor": "top"})
    if target and target > 0:
        vline(fig, target, "target", "#78909c", 1, 0.0)
    log_axis(fig, float(cs.min()), end)
    return fig


def _caption(fit: dict[str, Any] | None) -> str:
    if not fit or fit.get("status") in (None, "pending"):
        return "group fit pending: the recipe's curve appears once its seeds are fitted jointly"
    if fit.get("B") is None:
        msg = fit.get("message") or ""
        return f"no recipe fit yet: {msg}" if msg else "no recipe fit yet"
    a = a_text(fit)
    parts = [
        f"recipe A {a}" if a.startswith(("≥", "≤")) else f"recipe A = {a}",
        f"B = {fmt(fit.get('B'))}",
        f"C_mid = {fmt(fit.get('C_mid'))}",
        f"pooled over {plural(pooled_over(fit), 'seed')}",
        f"seed spread {spread_text(fit.get('seed_spread'))}",
    ]
    return " · ".join(parts)
