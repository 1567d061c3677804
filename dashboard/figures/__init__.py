"""Pure figure builders: plain data in, plotly figure out (no store, no Dash).

Conventions follow the ScaleRL paper: compute on a log x axis, the fitted curve solid over the
fit window, the extrapolation dashed with its 95% band, held-out points (beyond the fit
window) as "×", the excluded warm-up shaded.

`common` holds what all figures share, `run`, `group` and `compare` the figures of those pages.
"""

from scalewatch.dashboard.figures.common import (
    PALETTE,
    a_text,
    empty_figure,
    fmt,
    forecast_text,
    log_ticks,
    plural,
    rgba,
    run_color,
    unit_label,
)
from scalewatch.dashboard.figures.compare import ceiling_figure, compare_figure
from scalewatch.dashboard.figures.group import (
    group_color,
    group_figure,
    group_headline,
    pooled_over,
    shades,
    spread_text,
)
from scalewatch.dashboard.figures.run import (
    CAPTION_LINE,
    RUN_CHART_HEIGHT,
    fit_caption,
    forecast_headline,
    history_figure,
    residuals_figure,
    run_figure,
    withheld_notice,
)

__all__ = [
    "CAPTION_LINE",
    "RUN_CHART_HEIGHT",
    "PALETTE",
    "a_text",
    "ceiling_figure",
    "compare_figure",
    "empty_figure",
    "fit_caption",
    "fmt",
    "forecast_headline",
    "forecast_text",
    "group_color",
    "group_figure",
    "group_headline",
    "history_figure",
    "log_ticks",
    "plural",
    "pooled_over",
    "residuals_figure",
    "rgba",
    "run_color",
    "run_figure",
    "shades",
    "spread_text",
    "unit_label",
    "withheld_notice",
]
