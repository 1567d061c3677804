"""Figures of the Run page: points with fit and extrapolation, the A estimate over time,
residuals; and the caption under them."""

from __future__ import annotations

import html
import math
import textwrap
from typing import Any

import numpy as np
import plotly.graph_objects as go

from scalewatch.dashboard.figures.common import (
    BROKE_RED,
    GREY,
    a_text,
    base_layout,
    empty_figure,
    fit_trace_dicts,
    fmt,
    forecast_text,
    log_axis,
    positive,
    vline,
    vline_parts,
)
from scalewatch.server.fitting import FitResult, predict


def fit_caption(fit: dict[str, Any] | None, unit: str) -> str:
    """The line under a chart title: the fitted parameters, or why there is no fit (and a
    second line naming the opt-in prior the fit used)."""
    if not fit:
        return "no fit yet"
    if fit.get("status") == "insufficient_data" or fit.get("B") is None:
        msg = fit.get("message") or ""  # every record carries it (services/fits.py)
        return wrap_caption(f"no fit yet: {msg}") if msg else "no fit yet"
    a = a_text(fit)
    parts = [
        f"A {a}" if a.startswith(("≥", "≤")) else f"A = {a}",
        f"B = {fmt(fit.get('B'))}",
        f"C_mid = {fmt(fit.get('C_mid'))}",
    ]
    if fit.get("predicted_at_target") is not None and fit.get("target_compute"):
        parts.append(f"predicted {forecast_text(fit)} at {fmt(fit['target_compute'])} {unit}")
    brk = fit.get("break")
    if brk:
        where = f"step {brk['step']}" if brk.get("step") is not None else \
            f"{fmt(brk.get('compute'))} {unit}"
        parts.append(f"broke at {where} (−{brk['drop']:.3f})" + (
            ", fit since then" if brk.get("regime") == "fitted" else ""))
    why = ""
    if not brk and fit.get("A") is None:
        parts.append("asymptote not identified yet")
        if fit.get("message"):  # why, in the engine's words (too wide, or too early to claim)
            why = "<br>" + wrap_caption(str(fit["message"]))
    return join_caption(parts) + why + prior_caption(fit.get("prior") or {})


# Characters a caption line may hold: a plotly annotation never wraps, so a longer line ran
# past the chart's right edge and was cut (a withheld reason is often two or three sentences,
# and the parameters with a forecast and a break ~120 characters); ~96 characters of the 12 px
# caption font fit the plot of a chart 760 px wide (the Run page on a 800 px window).
CAPTION_LINE = 96


def join_caption(parts: list[str]) -> str:
    """``parts`` joined by " · " into lines of at most ``CAPTION_LINE`` characters, breaking
    only between parts (a part longer than a line keeps its own line)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= CAPTION_LINE:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return "<br>".join(lines)


def wrap_caption(text: str) -> str:
    """``text`` escaped for a plotly annotation and broken into lines of at most
    ``CAPTION_LINE`` characters (a longer word keeps its own line)."""
    lines = textwrap.wrap(text, CAPTION_LINE, break_long_words=False, break_on_hyphens=False)
    return "<br>".join(html.escape(line) for line in lines)


def withheld_notice(fit: dict[str, Any] | None, unit: str) -> dict[str, Any] | None:
    """What the Run page's warning box says when the fit withholds A, or None (A claimed, no
    fit yet): {"title", "reasons": [sentences], "compute": sentence or ""}, from the fit's
    ``withheld`` object (``server/fitting/withheld.py``)."""
    w = (fit or {}).get("withheld")
    if not w or (fit or {}).get("status") == "ok":
        return None
    reasons = [r for r in w.get("reasons") or [] if r.get("detail")]
    codes = {r.get("code") for r in reasons}
    if "misspecified" in codes:
        title = "A is withheld: this run's data disagree with every sigmoid"
    elif "recent_break" in codes:
        title = "A is withheld: the run broke off its curve"
    elif fit and fit.get("status") == "insufficient_data":
        title = "No A yet"
    else:
        title = "A is withheld: the data do not pin the ceiling down yet"
    factor, at = w.get("compute_to_identify_factor"), w.get("compute_to_identify")
    if factor is not None and at is not None:
        compute = (f"More compute would identify it: about {factor:.2g} × the compute so far, "
                   f"around {fmt(at)} {unit} (simulated from this fit's posterior).")
    elif w.get("max_factor") is None or codes & {"misspecified", "recent_break"}:
        compute = ""  # not simulated: more of the same would not help, or the reason says
    else:
        compute = (f"Not within {fmt(w.get('max_factor'))} × the compute so far, by a "
                   "simulation from this fit's posterior.")
    return {"title": title, "reasons": [str(r["detail"]) for r in reasons], "compute": compute}


def prior_caption(prior: dict[str, Any]) -> str:
    """What a fit learned beyond its own points, as extra caption lines ("" with nothing): on
    the first, beside the parameters and the forecast, they ran past the chart's right edge.
    The opt-in noise prior, the drift allowance the project's finished runs set (on the noise
    prior's line when there is one) and the opt-in B prior."""
    noise = []  # the noise prior and the drift allowance share a line
    rho = prior.get("rho") or {}
    if rho.get("mean") is not None:
        noise.append(f"noise prior ρ {rho['mean']:.2f} ± {rho['sd']:.2f}"
                     + _learned_from(prior.get("finished_runs")))
    if prior.get("drift_rate") is not None:  # the project's own misspecification allowance
        noise.append(f"drift allowance {prior['drift_rate']:.3f} per ln(compute) from "
                     f"{prior.get('hindcasts')} hindcasts")
    lines = [" · ".join(noise)] if noise else []
    b = prior.get("B") or {}
    if b.get("median") is not None:  # a t prior on ln B: its median and its ±1-scale factor
        lines.append(f"B prior {b['median']:.2f} ×/÷ {math.exp(b['log_sd']):.2f}"
                     + _learned_from(b.get("finished_runs")))
    return "".join("<br>" + line for line in lines)


def _learned_from(runs: int | None) -> str:
    return f" from {runs} finished run{'s' * (runs != 1)}" if runs else ""


def forecast_headline(
    fit: dict[str, Any] | None, target: float | None, unit: str
) -> dict[str, str]:
    """The Run page's headline: the forecast at the target (forecast_text) and what it means.

    {"label": "forecast at 16,000 GPU-hours", "value": "0.601 [0.58, 0.62]", "note": "..."}.
    Without a forecast the value is "–" and the note says why (the fit's own message).
    """
    value = forecast_text(fit)
    if not target:  # the fit's own default (the last compute) is no target of the run's
        return {"label": "forecast", "value": "–",
                "note": "this run has no target compute: set one (target_compute in "
                        "scalewatch.init or PATCH /api/v1/runs/{id}) to get a forecast"}
    label = f"forecast at {fmt(target)} {unit}"
    if not fit or value == "–":
        msg = (fit or {}).get("message") or "no fit yet"
        return {"label": label, "value": "–", "note": str(msg)}
    brk = fit.get("break")
    if brk and brk.get("regime") != "fitted" and brk.get("ceiling_upper") is not None:
        note = "the run broke below its curve: an upper bound, not a forecast"
    elif fit.get("status") != "ok":
        note = "95% prediction interval; the ceiling A is not identified yet"
    else:
        note = "median with its 95% prediction interval"
    return {"label": label, "value": value, "note": note}


def _fit_traces(fit: dict[str, Any], color: str, end: float) -> list[go.Scatter]:
    """The fit's curve, band and extrapolation, or up to a break (`fit_trace_dicts`)."""
    return [go.Scatter(d) for d in fit_trace_dicts(fit, color, "", end)]


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
    # User text (metric and run names): Plotly renders <b>, <a href> and entities in titles.
    metric, title = html.escape(metric), html.escape(title)
    c, y = positive(points.get("compute", []), points.get("values", []))
    if c.size == 0:
        return empty_figure("no points yet", title)
    held = c > fit_until if fit_until else np.zeros(c.size, dtype=bool)
    fig = go.Figure()
    hover = f"%{{x:.3~s}} {unit}<br>{metric} %{{y:.4f}}<extra></extra>"
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
    for tr in _fit_traces(fit, color, end) if fit else []:
        fig.add_trace(tr)
    base_layout(fig, title, f"compute ({unit}, log scale)", metric, log_x=True)
    if float(np.ptp(y)) < 0.05:  # one or a few flat points: plotly would pad them to +-0.5
        mid = float(y.mean())
        fig.update_yaxes(range=[mid - 0.05, mid + 0.05])
    caption = fit_caption(fit, unit)
    fig.add_annotation(
        text=caption,
        showarrow=False,
        xref="paper",
        yref="paper",
        x=0,
        y=1.0,
        yshift=4,
        xanchor="left",
        yanchor="bottom",
        align="left",  # a second line (the prior) starts under the first, not centred
        font={"size": 12, "color": "#455a64"},
    )
    stack_header(fig, caption.count("<br>") + 1)
    lo = float(c.min())
    brk = (fit or {}).get("break")
    if brk and brk.get("compute") and float(brk["compute"]) > 0:
        # Where the run fell off its curve: the regime the fit describes starts here (or, with
        # too few points since, the solid curve is the one the run was on before).
        at = float(brk["compute"])
        shape, note = vline_parts(at, f"break −{brk['drop']:.3f}", BROKE_RED, 1.5,
                                  clear_height(c, y, at))
        fig.add_shape(**shape)
        # Beside the line at the height where no point is, on a white ground so nothing
        # drawn later (the band, the extrapolation) runs through its text.
        fig.add_annotation(**{**note, "yanchor": "middle", "bgcolor": "rgba(255,255,255,0.85)"})
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
        vline(fig, fit_until, "end of fit window", "#b0bec5", 1, 0.0)
    if target and target > 0:
        vline(fig, target, "target", "#78909c", 1, 0.0)
    log_axis(fig, lo, max(float(c.max()), target or 0.0))
    return fig


# The Run page's main chart, in px (the page sizes its graph by it): the rows above the plot
# are laid out in px from the top of the chart.
RUN_CHART_HEIGHT = 480
_TITLE_TOP, _LEGEND_TOP, _CAPTION_TOP, _CAPTION_LINE_PX = 8, 36, 62, 16


def stack_header(fig: go.Figure, caption_lines: int) -> None:
    """Title, legend and caption in rows of their own above the plot, the plot's top margin
    as deep as the caption's lines need. In the title's row the legend ran into a long run
    name on a narrow chart, and a title centred in a margin that grew with a three-line
    withheld reason sat on the caption's first line."""
    top = _CAPTION_TOP + _CAPTION_LINE_PX * caption_lines + 6
    fig.update_layout(
        height=RUN_CHART_HEIGHT,
        margin={"t": top},
        title={"y": 1 - _TITLE_TOP / RUN_CHART_HEIGHT, "yref": "container", "yanchor": "top"},
        legend={"y": 1 - _LEGEND_TOP / RUN_CHART_HEIGHT, "yref": "container",
                "yanchor": "top"},
    )


def clear_height(c: np.ndarray, y: np.ndarray, at: float) -> float:
    """Where a label left of the vertical line at compute `at` prints over no point: the
    height (as a fraction of the plot, 0.15 to 0.85: clear of the captions above and the
    "end of fit window" and "target" labels below) farthest from every point in the stretch
    of compute the label covers (a factor of four below `at` on the log axis)."""
    lo, hi = float(np.min(y)), float(np.max(y))
    span = (hi - lo) or 1.0
    near = y[(c <= at) & (c >= at / 4)]
    heights = np.linspace(0.15, 0.85, 15)
    if near.size == 0:
        return 0.85
    fractions = (near - lo) / span
    gaps = [float(np.min(np.abs(fractions - h))) for h in heights]
    return float(heights[int(np.argmax(gaps))])


def _hollow(symbol: str, entry: dict[str, Any]) -> str:
    """A marker drawn hollow when its fit was made afterwards (``backfilled``)."""
    return f"{symbol}-open" if entry.get("backfilled") else symbol


def history_figure(history: list[dict[str, Any]], *, color: str, unit: str) -> go.Figure:
    """How the A estimate (with its 95% interval) moved as compute grew."""
    title = "A estimate as compute grew"
    rows = [h for h in history if h.get("max_compute")]
    if not rows:
        return empty_figure("no fits yet", title)
    ok = [h for h in rows if h.get("A") is not None]
    lb = [h for h in rows if h.get("A") is None and h.get("A_lower_bound") is not None]
    # A broken run's fits withhold A; what they do say is how high its new ceiling can be.
    broke = [h for h in rows if h.get("A") is None
             and (h.get("break") or {}).get("ceiling_upper") is not None]
    if not ok and not lb and not broke:  # fits so far say nothing about A (too few points)
        return empty_figure("no estimate of A yet", title)
    fig = go.Figure()
    # Fits made after the fact (the points arrived at once: refit/backfill.py) are drawn
    # hollow: what scalewatch would have said, not what it said at the time.
    live = [h for h in ok if not h.get("backfilled")]
    after = [h for h in ok if h.get("backfilled")]
    for rows_, name, dash, symbol, meta in (
            (after, "A, fitted afterwards (95%)", "dot", "circle-open", "A_backfilled"),
            (live, "A (95% interval)", "solid", "circle", "A")):
        if not rows_:
            continue
        err_hi = [(h["A_ci"][1] - h["A"]) if h.get("A_ci") else 0 for h in rows_]
        err_lo = [(h["A"] - h["A_ci"][0]) if h.get("A_ci") else 0 for h in rows_]
        fig.add_trace(
            go.Scatter(
                x=[h["max_compute"] for h in rows_],
                y=[h["A"] for h in rows_],
                mode="lines+markers",
                line={"color": color, "dash": dash},
                marker={"symbol": symbol, "size": 7},
                error_y={"type": "data", "array": err_hi, "arrayminus": err_lo, "thickness": 1},
                name=name,
                meta=meta,
            )
        )
    if lb:
        fig.add_trace(
            go.Scatter(
                x=[h["max_compute"] for h in lb],
                y=[h["A_lower_bound"] for h in lb],
                mode="markers",
                marker={"symbol": [_hollow("triangle-up", h) for h in lb], "color": GREY,
                        "size": 9},
                name="A ≥ (not identified)",
                meta="A_lower_bound",
            )
        )
    if broke:
        fig.add_trace(
            go.Scatter(
                x=[h["max_compute"] for h in broke],
                y=[h["break"]["ceiling_upper"] for h in broke],
                mode="markers",
                marker={"symbol": [_hollow("triangle-down", h) for h in broke],
                        "color": BROKE_RED, "size": 9},
                name="A ≤ (broke)",
                meta="ceiling_upper",
                customdata=[[h["break"].get("drop") or 0.0] for h in broke],
                hovertemplate="the run broke (−%{customdata[0]:.3f}): its ceiling is at most "
                              "%{y:.3f}<extra></extra>",
            )
        )
    base_layout(fig, title, f"compute fitted ({unit}, log scale)", "A", log_x=True)
    # The legend says what a marker means even when one kind is drawn (plotly hides a lone
    # trace's legend): a grey triangle alone is otherwise an unexplained shape.  In a half-
    # width panel three entries fill the row above the plot: the title gets its own.
    fig.update_layout(showlegend=True, margin={"t": 90})
    xs = [h["max_compute"] for h in rows]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi < 1.5 * x_lo:  # one fit so far (or a few close together): plotly would span
        # two decades around it; a factor of two either way keeps the axis readable.
        x_lo, x_hi = x_lo / 2.0, x_hi * 2.0
        fig.update_xaxes(range=[math.log10(x_lo), math.log10(x_hi)])
    log_axis(fig, x_lo, x_hi)
    # A is a pass rate: keep the axis on what the estimates and their intervals span (a
    # lone point would otherwise get plotly's default of +-1 around it).
    ys = [v for h in ok for v in (h.get("A_ci") or [h["A"], h["A"]]) if v is not None]
    ys += [h["A"] for h in ok] + [h["A_lower_bound"] for h in lb]
    ys += [h["break"]["ceiling_upper"] for h in broke]
    lo, hi = min(ys), max(ys)
    pad = max(0.02, 0.1 * (hi - lo))
    fig.update_yaxes(range=[max(lo - pad, 0.0 if lo >= 0 else lo - pad), hi + pad])
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
    c, y = positive(points.get("compute", []), points.get("values", []))
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
    base_layout(fig, title, f"compute ({unit}, log scale)", "residual", log_x=True)
    if c.size:
        log_axis(fig, float(c.min()), float(c.max()))
    return fig
