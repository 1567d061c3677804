"""Shared by every figure: colours, the plot template, number formats, axes, fitted-curve traces."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from scalewatch.server.fitting import FitResult, predict, predict_band

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


def plural(n: int, noun: str) -> str:
    """ "1 alert", "2 alerts", "1,000 runs" (English plural with an s)."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def a_text(fit: dict[str, Any] | None) -> str:
    """A with its 95% interval, "≥ x" when unidentified, "≤ x (broke)" when the run broke and
    its new regime is not fitted yet, "–" without a fit."""
    if not fit:
        return "–"
    if fit.get("A") is None:
        brk = fit.get("break") or {}
        if brk.get("ceiling_upper") is not None:
            return f"≤ {brk['ceiling_upper']:.3f} (broke)"
        lb = fit.get("A_lower_bound")
        return f"≥ {lb:.3f}" if lb is not None else "–"
    ci = (fit.get("ci") or {}).get("A")
    if ci and ci[0] is not None and ci[1] is not None:
        return f"{fit['A']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{fit['A']:.3f}"


def forecast_text(fit: dict[str, Any] | None) -> str:
    """The forecast at the target as the user may read it: a number with its 95% prediction
    interval when A is identified; only the interval when it is not (a bare number would claim
    more than the fit knows); an upper bound when the run broke."""
    if not fit or fit.get("predicted_at_target") is None:
        return "–"
    brk = fit.get("break")
    if brk and brk.get("regime") != "fitted" and brk.get("ceiling_upper") is not None:
        return f"≤ {brk['ceiling_upper']:.3f} (broke)"
    pi = fit.get("predicted_interval") or [None, None]
    has_pi = pi[0] is not None and pi[1] is not None
    if fit.get("status") != "ok":
        return f"[{pi[0]:.3f}, {pi[1]:.3f}]" if has_pi else "–"
    if has_pi:
        return f"{fit['predicted_at_target']:.3f} [{pi[0]:.3f}, {pi[1]:.3f}]"
    return f"{fit['predicted_at_target']:.3f}"


def base_layout(fig: go.Figure, title: str, x_title: str, y_title: str, log_x: bool) -> None:
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


def log_axis(fig: go.Figure, lo: float, hi: float) -> None:
    ticks = log_ticks(lo, hi)
    if ticks:
        fig.update_xaxes(tickvals=ticks, ticktext=[fmt(t) for t in ticks])


def vline(fig: go.Figure, x: float, text: str, color: str, width: float, y: float) -> None:
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
    base_layout(fig, title, "", "", log_x=False)
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


def positive(compute: Sequence[float], values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(compute, dtype=float)
    y = np.asarray(values, dtype=float)
    keep = np.isfinite(c) & np.isfinite(y) & (c > 0)  # a log axis cannot show compute 0
    return c[keep], y[keep]


def curve_traces(
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
