"""What a page's link may carry: its query values as text, bounded like the components they
fill. The callback guard refuses a component value it was not written for (a repeated key is a
list, a metric name longer than any) and every callback of the page then failed: a blank page
with no word. A page checks its link first and says what is wrong with it instead."""

from __future__ import annotations

from typing import Any

from dash import html

from scalewatch.dashboard.components import empty_state


class BadLink(ValueError):
    """A link's value no page state can hold; the message names it."""


def link_text(value: Any, name: str, most: int) -> str | None:
    """A query value as text: None when absent; a repeated one (Dash hands it over as a list)
    is its first; `BadLink` when longer than ``most`` characters."""
    if isinstance(value, list):
        value = value[0] if value else None
    if value in (None, ""):
        return None
    text = str(value)
    if len(text) > most:
        raise BadLink(f"This link's {name} is longer than {most} characters: open the page "
                      "from the dashboard, or shorten the link.")
    return text


def bad_link(exc: BadLink) -> html.Div:
    return empty_state(str(exc))
