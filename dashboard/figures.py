"""Pure figure builders: plain data in, plotly figure out (no store, no Dash).

Conventions follow the ScaleRL paper: compute on a log x axis, the fitted curve solid over the
fit window, the extrapolation dashed with its 95% band, held-out points (beyond the fit
window) as "×", the excluded warm-up shaded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from server.fitting import FitResult, predict, predict_band

# Tableau 10: distinguishable, colour-blind friendlier than plotly's default.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
GREY = "#9aa0a6"
N_CURVE = 160

# A small template: plotly's default template adds ~7 kB to every figure sent to the browser.
TEMPLATE = go.layout.Template(
    layout={
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 13},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "xaxis": {"gridcolor": "#eceff1", "linecolor": "#b0bec5", "zeroline": False},
        "yaxis": {"gridcolor": "#eceff1", "linecolor": "#b0bec5", "zeroline": False},
        "colorway": list(PALETTE),
        "hoverlabel": {"namelength": -1},
    }
)


def run_color(run_id: int) -> str:
    """A run's colour on every page: a stable hash of its id into the palette.

    Multiplying by 7 (coprime to the palette size) permutes consecutive ids, so runs created
    one after another never share a colour and neighbours are not similar hues.
    """
    return PALETTE[(int(run_id) * 7) % len(PALETTE)]


def rgba(color: str, alpha: float) -> str:
    h = color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def unit_label(unit: str | None) -> str:
    """Display name of a compute unit: "gpu_hours" -> "GPU-hours"."""
    if not unit:
        return "compute"
    known = {"gpu_hours": "GPU-hours", "gpu_hour": "GPU-hours", "flops": "FLOPs"}
    return known.get(unit.lower(), unit.replace("_", " "))


def fmt(v: float | None, digits: int = 3) -> str:
    """Short human number: 3 significant digits, thousands separators for large values."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}" if abs(v) < 1 else f"{v:.{digits}g}".rstrip(".")


def a_text(fit: dict[str, Any] | None) -> str:
    """A with its 95% interval, "≥ x" when unidentified, "–" without a fit."""
    if not fit:
        return "–"
    if fit.get("A") is None:
        lb = fit.get("A_lower_bound")
        return f"≥ {lb:.3f}" if lb is not None else "–"
    ci = (fit.get("ci") or {}).get("A")
    if ci and ci[0] is not None and ci[1] is not None:
        return f"{fit['A']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{fit['A']:.3f}"


def _base_layout(fig: go.Figure, title: str, x_title: str, y_title: str, log_x: bool) -> None:
    fig.update_layout(
        template=TEMPLATE,
        title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 16}},
        margin={"l": 60, "r": 20, "t": 70, "b": 55},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        hovermode="closest",
        xaxis={"title": {"text": x_title}, "type": "log" if log_x else "linear"},
        yaxis={"title": {"text": y_title}},
    )


def log_ticks(lo: float, hi: float) -> list[float]:
    """Readable ticks for a log axis: 1, 2, 5 × 10^k (1 × 10^k only over many decades)."""
    if not (lo > 0 and hi > lo):
        return []
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = (1, 2, 5) if k1 - k0 <= 4 else (1,)
    ticks = [m * 10.0**k for k in range(k0, k1 + 1) for m in mantissas]
    inside = [t for t in ticks if lo / 1.05 <= t <= hi * 1.05]
    return inside if len(inside) >= 2 else ticks


def _log_axis(fig: go.Figure, lo: float, hi: float) -> None:
    ticks = log_ticks(lo, hi)
    if ticks:
        fig.update_xaxes(tickvals=ticks, ticktext=[fmt(t) for t in ticks])


def _vline(fig: go.Figure, x: float, text: str, color: str, width: float, y: float) -> None:
    """A vertical marker on a log axis (shapes take data values there, annotations log10)."""
    lx = math.log10(x)
    fig.add_shape(
        type="line",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        xref="x",
        yref="paper",
        line={"color": color, "width": width, "dash": "dot"},
    )
    fig.add_annotation(
        x=lx, y=y, xref="x", yref="paper", text=text, showarrow=False,
        yanchor="bottom" if y >= 1 else "bottom", xanchor="right" if y < 1 else "center",
        font={"size": 11, "color": "#455a64"},
    )  # fmt: skip


def empty_figure(message: str, title: str = "") -> go.Figure:
    """A blank chart that says why it is blank."""
    fig = go.Figure()
    _base_layout(fig, title, "", "", log_x=False)
    fig.update_layout(
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[
            {
                "text": message,
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "font": {"size": 15, "color": "#5f6368"},
            }
        ],
    )
    return fig


def _positive(compute: Sequence[float], values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(compute, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(c) & np.isfinite(y) & (c > 0)  # a log axis cannot show compute 0
    return c[keep], y[keep]


def _curve_traces(
    fit: dict[str, Any],
    color: str,
    name: str,
    until: float | None,
    group: str | None = None,
    show_band: bool = True,
) -> list[go.Scatter]:
    """Solid fit over the fit window, dashed extrapolation to `until`, and the 95% band."""
    res = FitResult.from_dict(fit)
    if res.params is None or not res.fit_range:
        return []
    lo, hi = res.fit_range
    if not (lo > 0 and hi > 0):
        return []
    end = max(hi, until or hi)
    traces: list[go.Scatter] = []
    grid = np.geomspace(lo, end, N_CURVE)
    if show_band:
        blo, bhi = predict_band(res, grid)
        if np.isfinite(blo).any():
            traces.append(
                go.Scatter(
                    x=np.concatenate([grid, grid[::-1]]),
                    y=np.concatenate([bhi, blo[::-1]]).astype("f4"),
                    fill="toself",
                    fillcolor=rgba(color, 0.14),
                    line={"width": 0},
                    hoverinfo="skip",
                    name=f"{name} 95% band" if group else "95% band",
                    meta="band",
                    legendgroup=group,
                    showlegend=group is None,
                )
            )
    inside = np.geomspace(lo, hi, N_CURVE // 2)
    traces.append(
        go.Scatter(
            x=inside,
            y=predict(res, inside).astype("f4"),
            mode="lines",
            line={"color": color, "width": 2.5, "dash": "solid"},
            name=f"{name} fit" if group else "fit (fit window)",
            meta="fit",
            legendgroup=group,
            showlegend=group is None,
        )
    )
    if end > hi * (1 + 1e-9):
        outside = np.geomspace(hi, end, N_CURVE // 2)
        traces.append(
            go.Scatter(
                x=outside,
                y=predict(res, outside).astype("f4"),
                mode="lines",
                line={"color": color, "width": 2.5, "dash": "dash"},
                name=f"{name} extrapolation" if group else "extrapolation",
                meta="extrapolation",
                legendgroup=group,
                showlegend=group is None,
            )
        )
    return traces


def fit_caption(fit: dict[str, Any] | None, unit: str) -> str:
    """One line under a chart title: the fitted parameters, or why there is no fit."""
    if not fit:
        return "no fit yet"
    if fit.get("status") == "insufficient_data" or fit.get("B") is None:
        msg = fit.get("message") or (fit.get("internal") or {}).get("message") or ""
        return f"no fit yet: {msg}" if msg else "no fit yet"
    a = a_text(fit)
    parts = [
        f"A {a}" if a.startswith("≥") else f"A = {a}",
        f"B = {fmt(fit.get('B'))}",
        f"C_mid = {fmt(fit.get('C_mid'))}",
    ]
    if fit.get("predicted_at_target") is not None and fit.get("target_compute"):
        pi = fit.get("predicted_interval") or [None, None]
        band = f" [{pi[0]:.3f}, {pi[1]:.3f}]" if None not in pi else ""
        parts.append(
            f"predicted {fit['predicted_at_target']:.3f}{band} at "
            f"{fmt(fit['target_compute'])} {unit}"
        )
    if fit.get("A") is None:
        parts.append("asymptote not identified yet")
    return " · ".join(parts)


def run_figure(
    points: dict[str, Any],
    fit: dict[str, Any] | None,
    *,
    color: str,
    unit: str,
    metric: str,
    title: str = "",
    warmup: float | None = None,
    fit_until: float | None = None,
    target: float | None = None,
) -> go.Figure:
    """One run: points, fit (solid), extrapolation (dashed) with band, warm-up, held-out (×).

    Trace order is fixed so live updates can extend by index: 0 = points, 1 = held-out.
    """
    c, y = _positive(points.get("compute", []), points.get("values", []))
    if c.size == 0:
        return empty_figure("no points yet", title)
    held = c > fit_until if fit_until else np.zeros(c.size, dtype=bool)
    fig = go.Figure()
    hover = f"%{{x:,.4g}} {unit}<br>{metric} %{{y:.4f}}<extra></extra>"
    # Plain lists (not typed arrays) so the browser-side figure can be extended with Patch().
    fig.add_trace(
        go.Scatter(
            x=c[~held].tolist(),
            y=y[~held].tolist(),
            mode="markers",
            marker={"color": color, "size": 6, "opacity": 0.75},
            name="points",
            meta="points",
            hovertemplate=hover,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=c[held].tolist(),
            y=y[held].tolist(),
            mode="markers",
            marker={
                "color": color,
                "size": 9,
                "symbol": "x-thin",
                "line": {"width": 2, "color": color},
            },
            name="held out (×)",
            meta="heldout",
            hovertemplate=hover,
            visible=True if held.any() else "legendonly",
            showlegend=bool(held.any()),
        )
    )
    end = max(float(c.max()), target or 0.0)
    for tr in _curve_traces(fit, color, "", end) if fit else []:
        fig.add_trace(tr)
    _base_layout(fig, title, f"compute ({unit}, log scale)", metric, log_x=True)
    caption = fit_caption(fit, unit)
    fig.add_annotation(
        text=caption,
        showarrow=False,
        xref="paper",
        yref="paper",
        x=0,
        y=1.0,
        xanchor="left",
        yanchor="bottom",
        font={"size": 12, "color": "#455a64"},
    )
    fig.update_layout(margin={"t": 90}, legend={"y": 1.09})
    lo = float(c.min())
    if warmup and warmup > lo:
        # On a log axis shapes take data values, annotations log10 values.
        fig.add_shape(
            type="rect",
            x0=lo / 1.15,
            x1=warmup,
            y0=0,
            y1=1,
            xref="x",
            yref="paper",
            fillcolor="#b0bec5",
            opacity=0.3,
            line_width=0,
            layer="below",
        )
        fig.add_annotation(
            x=math.log10(warmup), y=0.98, xref="x", yref="paper", text="warm-up (excluded)",
            showarrow=False, xanchor="right", yanchor="top",
            font={"size": 11, "color": "#546e7a"},
        )  # fmt: skip
    if fit_until and fit_until < float(c.max()):
        _vline(fig, fit_until, "end of fit window", "#b0bec5", 1, 0.0)
    if target and target > 0:
        _vline(fig, target, "target", "#78909c", 1, 0.0)
    _log_axis(fig, lo, max(float(c.max()), target or 0.0))
    return fig


def history_figure(history: list[dict[str, Any]], *, color: str, unit: str) -> go.Figure:
    """How the A estimate (with its 95% interval) moved as compute grew."""
    title = "A estimate as compute grew"
    rows = [h for h in history if h.get("max_compute")]
    if not rows:
        return empty_figure("no fits yet", title)
    ok = [h for h in rows if h.get("A") is not None]
    lb = [h for h in rows if h.get("A") is None and h.get("A_lower_bound") is not None]
    fig = go.Figure()
    if ok:
        err_hi = [(h["A_ci"][1] - h["A"]) if h.get("A_ci") else 0 for h in ok]
        err_lo = [(h["A"] - h["A_ci"][0]) if h.get("A_ci") else 0 for h in ok]
        fig.add_trace(
            go.Scatter(
                x=[h["max_compute"] for h in ok],
                y=[h["A"] for h in ok],
                mode="lines+markers",
                line={"color": color},
                error_y={"type": "data", "array": err_hi, "arrayminus": err_lo, "thickness": 1},
                name="A (95% interval)",
                meta="A",
            )
        )
    if lb:
        fig.add_trace(
            go.Scatter(
                x=[h["max_compute"] for h in lb],
                y=[h["A_lower_bound"] for h in lb],
                mode="markers",
                marker={"symbol": "triangle-up", "color": GREY, "size": 9},
                name="A ≥ (not identified)",
                meta="A_lower_bound",
            )
        )
    _base_layout(fig, title, f"compute fitted ({unit}, log scale)", "A", log_x=True)
    xs = [h["max_compute"] for h in rows]
    _log_axis(fig, min(xs), max(xs))
    return fig


def residuals_figure(
    points: dict[str, Any],
    fit: dict[str, Any] | None,
    *,
    color: str,
    unit: str,
    warmup: float | None = None,
    fit_until: float | None = None,
) -> go.Figure:
    """Observed minus fitted, over the fit window (held-out points as ×)."""
    title = "Residuals (observed − fit)"
    c, y = _positive(points.get("compute", []), points.get("values", []))
    res = FitResult.from_dict(fit) if fit else None
    if res is None or res.params is None or c.size == 0:
        return empty_figure("no fit yet", title)
    keep = c >= (warmup or 0)
    c, y = c[keep], y[keep]
    r = y - predict(res, c)
    held = c > fit_until if fit_until else np.zeros(c.size, dtype=bool)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=c[~held], y=r[~held].astype("f4"), mode="markers",
            marker={"color": color, "size": 5}, name="fit window", meta="residuals",
        )
    )  # fmt: skip
    if held.any():
        fig.add_trace(
            go.Scatter(
                x=c[held], y=r[held].astype("f4"), mode="markers",
                marker={"color": color, "size": 8, "symbol": "x-thin",
                        "line": {"width": 2, "color": color}},
                name="held out (×)", meta="heldout",
            )
        )  # fmt: skip
    fig.add_hline(y=0, line={"color": "#78909c", "width": 1})
    _base_layout(fig, title, f"compute ({unit}, log scale)", "residual", log_x=True)
    if c.size:
        _log_axis(fig, float(c.min()), float(c.max()))
    return fig


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
        color, label = it["color"], it["label"]
        c, y = _positive(it["compute"], it["values"])
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
            for tr in _curve_traces(it["fit"], color, label, end, group=group):
                fig.add_trace(tr)
    _base_layout(fig, title, f"compute ({unit}, log scale)", metric, log_x=True)
    if budget:
        _vline(fig, budget, f"budget {fmt(budget)}", "#37474f", 1.5, 0.0)
    lows = [min((x for x in i["compute"] if x > 0), default=end) for i in items]
    if end > 0:
        _log_axis(fig, min(lows + [end]), end)
    if sampled:
        fig.add_annotation(
            text="downsampled for display", showarrow=False, xref="paper", yref="paper",
            x=1, y=0, xanchor="right", yanchor="bottom", font={"size": 11, "color": "#78909c"},
        )  # fmt: skip
    return fig


def ceiling_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """Ceiling (A) against efficiency (B), one marker per run; highlighted runs in colour."""
    title = "Ceiling vs efficiency"
    pts = [r for r in rows if r.get("B") is not None and (r.get("A") or r.get("A_lower_bound"))]
    if not pts:
        return empty_figure("no fitted runs yet", title)
    fig = go.Figure()
    others = [r for r in pts if not r.get("highlight")]
    if others:
        fig.add_trace(
            go.Scattergl(
                x=[r["B"] for r in others],
                y=[r.get("A") or r.get("A_lower_bound") for r in others],
                text=[r["label"] for r in others],
                mode="markers",
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
                text=[r["label"]],
                textposition="top center",
                marker={
                    "color": r["color"], "size": 12,
                    "symbol": "circle" if ident else "triangle-up",
                },
                error_y=None if not err else {
                    "type": "data", "array": [err[1] - r["A"]],
                    "arrayminus": [r["A"] - err[0]], "color": r["color"],
                },
                name=r["label"] if ident else f"{r['label']} (A ≥)",
                meta="run",
            )
        )  # fmt: skip
    _base_layout(fig, title, "B (efficiency: higher reaches A sooner)", "A (ceiling)", False)
    bs = [r["B"] for r in pts]
    pad = max((max(bs) - min(bs)) * 0.15, 0.1)
    fig.update_layout(
        xaxis={"range": [min(bs) - pad, max(bs) + pad]},
        legend={"orientation": "h", "y": -0.3, "x": 0, "xanchor": "left", "yanchor": "top"},
        margin={"b": 120},
    )
    fig.update_traces(cliponaxis=False, selector={"type": "scatter"})
    return fig
