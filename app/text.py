"""Plain text on the page, never markup.

Panel's `pn.pane.Str` is NOT safe for outside text: it escapes the string once and the
front end un-escapes it into innerHTML, so `<img onerror=...>` in a URL runs (our e2e test
caught it). A Bokeh `Div` with `render_as_text=True` sets textContent instead. Every text
that can carry URL, upload or user input goes through `plain`.
"""
from __future__ import annotations

from bokeh.models import Div


def plain(text: str = "", css_class: str = "", color: str = "inherit", mono: bool = False) -> Div:
    """A Div that shows `text` literally (line breaks kept); update it with `div.text = ...`."""
    return Div(
        text=text, render_as_text=True, css_classes=[css_class] if css_class else [],
        sizing_mode="stretch_width",
        styles={"white-space": "pre-wrap", "overflow-wrap": "anywhere", "color": color,
                "font-family": "monospace" if mono else "inherit", "margin": "2px 0"},
    )
