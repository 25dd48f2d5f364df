"""Plain text on the page, never markup.

Panel's `pn.pane.Str` is NOT safe for outside text: it escapes the string once and the
front end un-escapes it into innerHTML, so `<img onerror=...>` in a URL runs (our e2e test
caught it). A Bokeh `Div` with `render_as_text=True` sets textContent instead. Every text
that can carry URL, upload or user input goes through `plain`, or `LiveText` when it changes
every step.
"""

from __future__ import annotations

from typing import Any

import param
from bokeh.models import Div
from panel.reactive import ReactiveHTML


def plain(text: str = "", css_class: str = "", color: str = "inherit", mono: bool = False) -> Div:
    """A Div that shows `text` literally (line breaks kept); update it with `div.text = ...`."""
    return Div(
        text=text,
        render_as_text=True,
        css_classes=[css_class] if css_class else [],
        sizing_mode="stretch_width",
        styles={
            "white-space": "pre-wrap",
            "overflow-wrap": "anywhere",
            "color": color,
            "font-family": "monospace" if mono else "inherit",
            "margin": "2px 0",
        },
    )


class LiveText(ReactiveHTML):
    """Plain text that changes every step or every run (a player's step, the run's status).

    A Bokeh Div's new text makes BokehJS lay out the whole page again (`rerender` ->
    `compute_layout`: about 0.1 s per change on the schedulers lab, on every animation step).
    Here a script sets the text's `textContent` (never markup) and the browser only reflows it.
    Read and set it as `.text`, as a `plain` Div.
    """

    # A dict, not a string: Panel cleans every string parameter with nh3, which the static site
    # (Pyodide) cannot carry (`StepPlayer` in app/view.py). `name` is the one string; kept home.
    name = param.String(default="text", precedence=-1)
    content = param.Dict(default={"text": ""}, doc="{'text': the text shown}")

    _template = '<div id="box" class="kv-text" aria-live="polite"></div>'
    _scripts = {"render": "box.textContent = data.content.text", "content": "box.textContent = data.content.text"}

    def __init__(self, css_class: str = "", mono: bool = False, color: str = "inherit", **params: Any) -> None:
        params = {"margin": (2, 0), **params}
        super().__init__(
            css_classes=[css_class] if css_class else [],
            sizing_mode="stretch_width",
            styles={
                "white-space": "pre-wrap",
                "overflow-wrap": "anywhere",
                "color": color,
                "font-family": "monospace" if mono else "inherit",
            },
            **params,
        )

    @property
    def text(self) -> str:
        return self.content["text"]

    @text.setter
    def text(self, text: str) -> None:
        self.content = {"text": text}
