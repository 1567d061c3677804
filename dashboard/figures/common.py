"""Shared by every figure: colours, the plot template, number formats, axes, fitted-curve traces."""

from __future__ import annotations

import base64
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from scalewatch.server.fitting import FitResult, predict_with_band

# Tableau 10: distinguishable, colour-blind friendlier than plotly's default.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
GREY = "#9aa0a6"
BROKE_RED = "#c62828"  # a break: the run fell off the curve it was on
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
TEMPLATE_JSON: dict[str, Any] = TEMPLATE.to_plotly_json()  # for figures built as plain dicts


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


def _engineering(v: float, digits: int) -> str:
    """`digits` significant digits times a power of ten that is a multiple of three:
    16000 -> "16k", 250000 -> "250k", 1.04e9 -> "1.04e9", 3.2e21 -> "3.2e21"."""
    exp = 3 * math.floor(math.log10(abs(v)) / 3)
    mantissa = float(f"{v / 10**exp:.{digits}g}")
    if abs(mantissa) >= 1000:  # 999,999 rounds up to the next power of a thousand
        exp, mantissa = exp + 3, mantissa / 1000
    text = f"{mantissa:.{digits}g}"
    return f"{text}k" if exp == 3 else f"{text}e{exp}"


def fmt(v: float | None, digits: int = 3) -> str:
    """Short human number: 3 significant digits; up to 9,999 with thousands separators, above
    in engineering form (16k, 250k, 1.04e9), so FLOP counts stay readable."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    v = float(v)
    if abs(v) >= 10_000:
        return _engineering(v, digits)
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


def base_layout_dict(title: str, x_title: str, y_title: str, log_x: bool) -> dict[str, Any]:
    """The layout every figure starts from, as plotly's JSON (see `base_layout`)."""
    return {
        "template": TEMPLATE_JSON,
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 16}},
        "margin": {"l": 60, "r": 20, "t": 70, "b": 55},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1,
                   "xanchor": "right"},
        "hovermode": "closest",
        "xaxis": {"title": {"text": x_title}, "type": "log" if log_x else "linear"},
        "yaxis": {"title": {"text": y_title}},
    }  # fmt: skip


def base_layout(fig: go.Figure, title: str, x_title: str, y_title: str, log_x: bool) -> None:
    fig.update_layout(**base_layout_dict(title, x_title, y_title, log_x))


def log_ticks(lo: float, hi: float) -> list[float]:
    """Readable ticks for a log axis: 1, 2, 5 × 10^k (1 × 10^k only over many decades)."""
    if not (lo > 0 and hi > lo):
        return []
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = (1, 2, 5) if k1 - k0 <= 4 else (1,)
    ticks = [m * 10.0**k for k in range(k0, k1 + 1) for m in mantissas]
    inside = [t for t in ticks if lo / 1.05 <= t <= hi * 1.05]
    return inside if len(inside) >= 2 else ticks


def log_axis_dict(lo: float, hi: float) -> dict[str, Any]:
    """The x axis' tick values and labels for a log axis from `lo` to `hi` ({} if none)."""
    ticks = log_ticks(lo, hi)
    return {"tickvals": ticks, "ticktext": [fmt(t) for t in ticks]} if ticks else {}


def log_axis(fig: go.Figure, lo: float, hi: float) -> None:
    axis = log_axis_dict(lo, hi)
    if axis:
        fig.update_xaxes(**axis)


def vline_parts(
    x: float, text: str, color: str, width: float, y: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(shape, annotation) of a vertical marker on a log axis (shapes take data values there,
    annotations log10)."""
    shape = {"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "xref": "x", "yref": "paper",
             "line": {"color": color, "width": width, "dash": "dot"}}  # fmt: skip
    note = {
        "x": math.log10(x), "y": y, "xref": "x", "yref": "paper", "text": text,
        "showarrow": False, "yanchor": "bottom", "xanchor": "right" if y < 1 else "center",
        "font": {"size": 11, "color": "#455a64"},
    }  # fmt: skip
    return shape, note


def vline(fig: go.Figure, x: float, text: str, color: str, width: float, y: float) -> None:
    """A vertical marker on a log axis (`vline_parts`)."""
    shape, note = vline_parts(x, text, color, width, y)
    fig.add_shape(**shape)
    fig.add_annotation(**note)


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
    return [go.Scatter(d) for d in curve_trace_dicts(fit, color, name, until, group, show_band)]


def fit_trace_dicts(
    fit: dict[str, Any],
    color: str,
    name: str,
    end: float,
    group: str | None = None,
    bound_color: str = BROKE_RED,
) -> list[dict[str, Any]]:
    """A run's fit as `curve_trace_dicts` draws it, to ``end``; for a run that broke and whose
    new regime cannot be fitted yet, the curve it was on up to the break (extrapolating it
    would promise what the run no longer does) and the bound on its new ceiling from there to
    ``end`` (dotted, in ``bound_color``)."""
    brk = fit.get("break")
    fr = fit.get("fit_range")
    if not brk or brk.get("regime") == "fitted" or not fr or not brk.get("compute"):
        return curve_trace_dicts(fit, color, name, end, group=group)
    at = float(brk["compute"])
    traces = curve_trace_dicts({**fit, "fit_range": [fr[0], at]}, color, name, at, group=group)
    ceiling = brk.get("ceiling_upper")
    if ceiling is not None:
        label = f"new ceiling ≤ {ceiling:.3f}"
        traces.append(_drop_none({
            "type": "scatter", "x": [at, end], "y": [ceiling, ceiling], "mode": "lines",
            "line": {"color": bound_color, "width": 1.5, "dash": "dot"},
            "name": f"{name} {label}" if group else label, "meta": "ceiling_upper",
            "legendgroup": group, "showlegend": group is None,
            "hovertemplate": (f"{name}: " if name else "")
            + f"the ceiling since the break is at most {ceiling:.3f}<extra></extra>",
        }))  # fmt: skip
    return traces


_CURVES: OrderedDict[tuple[Any, ...], list[dict[str, Any]]] = OrderedDict()
_CURVES_LOCK = threading.Lock()
_CURVES_SIZE = 256  # stored fits' curves (a few kB each)


def curve_trace_dicts(
    fit: dict[str, Any],
    color: str,
    name: str,
    until: float | None,
    group: str | None = None,
    show_band: bool = True,
) -> list[dict[str, Any]]:
    """`curve_traces` as plotly's JSON (plain dicts: the Compare page sends its figure without
    building plotly objects, ~1-3 ms a trace).

    A stored fit never changes (its id and time name it), so its curves are computed once per
    process: they are the posterior median and band over every stored draw, tens of ms for ten
    runs, on every live refresh of a page."""
    ident = (fit.get("fit_id"), fit.get("fitted_at"))
    key = None
    if None not in ident:
        fr = fit.get("fit_range")
        key = (*ident, tuple(fr) if fr else None, color, name, until, group, show_band)
        with _CURVES_LOCK:
            hit = _CURVES.get(key)
            if hit is not None:
                _CURVES.move_to_end(key)
                return [dict(d) for d in hit]
    traces = _curve_trace_dicts(fit, color, name, until, group, show_band)
    if key is not None:
        with _CURVES_LOCK:
            _CURVES[key] = traces
            while len(_CURVES) > _CURVES_SIZE:
                _CURVES.popitem(last=False)
    return [dict(d) for d in traces]


def typed_arrays(fig: dict[str, Any]) -> dict[str, Any]:
    """A figure built as plain dicts, its traces' numpy arrays as plotly.js typed arrays
    (base64), as plotly's own serialiser writes a Figure's: a fifth of the JSON of number
    lists. The traces are copied, not changed."""
    def enc(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.size and v.dtype.kind == "f":
            return {"dtype": v.dtype.str.lstrip("<=|"), "bdata": base64.b64encode(
                np.ascontiguousarray(v).tobytes()).decode("ascii")}
        return v

    data = [{k: enc(v) for k, v in tr.items()} for tr in fig.get("data", [])]
    return {**fig, "data": data}


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    """A trace's keys without the None values (plotly objects leave those unset; so does this
    JSON)."""
    return {k: v for k, v in d.items() if v is not None}


def _curve_trace_dicts(
    fit: dict[str, Any],
    color: str,
    name: str,
    until: float | None,
    group: str | None,
    show_band: bool,
) -> list[dict[str, Any]]:
    res = FitResult.from_dict(fit)
    if res.params is None or not res.fit_range:
        return []
    lo, hi = res.fit_range
    if not (lo > 0 and hi > 0):
        return []
    end = max(hi, until or hi)
    traces: list[dict[str, Any]] = []
    extrapolate = end > hi * (1 + 1e-9)
    # One grid, one evaluation of the draws, for the band and both lines: the fit window's
    # half, then (extrapolating) the half beyond it, which starts where the first ends.
    inside = np.geomspace(lo, hi, N_CURVE // 2)
    grid = np.concatenate([inside, np.geomspace(hi, end, N_CURVE // 2)[1:]]) if extrapolate \
        else inside
    centre, blo, bhi = predict_with_band(res, grid)
    if show_band and np.isfinite(blo).any():
        traces.append(_drop_none({
            "type": "scatter",
            "x": np.concatenate([grid, grid[::-1]]),
            "y": np.concatenate([bhi, blo[::-1]]).astype("f4"),
            "fill": "toself",
            "fillcolor": rgba(color, 0.14),
            "line": {"width": 0},
            "hoverinfo": "skip",
            "name": f"{name} 95% band" if group else "95% band",
            "meta": "band",
            "legendgroup": group,
            "showlegend": group is None,
        }))  # fmt: skip
    y_in, y_out = centre[: inside.size], centre[inside.size - 1 :]

    def line(x: Any, y: Any, dash: str, meta: str, label: str) -> dict[str, Any]:
        return _drop_none({
            "type": "scatter",
            "x": x,
            "y": y.astype("f4"),
            "mode": "lines",
            "line": {"color": color, "width": 2.5, "dash": dash},
            "name": f"{name} {meta}" if group else label,
            "meta": meta,
            "legendgroup": group,
            "showlegend": group is None,
        })  # fmt: skip

    traces.append(line(inside, y_in, "solid", "fit", "fit (fit window)"))
    if extrapolate:
        traces.append(line(grid[inside.size - 1 :], y_out, "dash", "extrapolation",
                           "extrapolation"))
    return traces
