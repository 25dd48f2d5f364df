"""Drawing shared by the views: memory-map cells sent as number arrays, colours looked up in the
page, a request's hover, and legends kept off the data."""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.models import ColumnDataSource, CustomJSHover, Legend, LegendItem, LinearColorMapper
from bokeh.plotting import figure

from app.view import columns

# The kinds of layer (kvweb/gpu/layers.py) by the names views show, each through tr().
LAYER_NAMES = {
    "full": "full attention",
    "sliding": "sliding window",
    "latent": "latent (MLA)",
    "linear": "linear state",
}

GAP = 0.12  # between memory-map cells
CELL = ("left", "right", "top", "bottom")


def cell_boxes(cells: np.ndarray, cols: int) -> dict[str, np.ndarray]:
    """(left, right, top, bottom) of each of `cells` in a grid `cols` cells wide."""
    left, top = (cells % cols).astype(float), -(cells // cols).astype(float)
    return {"left": left, "right": left + 1 - GAP, "top": top, "bottom": top - 1 + GAP}


def indexed_color(field: str, palette: list[str]) -> dict[str, Any]:
    """A fill colour from a column of indices into `palette`, looked up in the page (the column
    stays a number array, sent as bytes)."""
    return {"field": field, "transform": LinearColorMapper(palette=palette, low=-0.5, high=len(palette) - 0.5)}


def request_hover(none: str) -> CustomJSHover:
    """A hover formatter of a cell's owner: the request id, or `none` for a cell no request holds."""
    return CustomJSHover(args={"none": none}, code="return value >= 0 ? String(value) : none")


class Cells:
    """A memory map's cells as one ColumnDataSource of number arrays, which Bokeh sends as bytes
    (lists went through its encoder one value at a time: 0.1-0.2 s of a redraw in Pyodide). The
    cells' boxes go once per grid; then a frame sends only its own columns."""

    def __init__(self, name: str, *shown: str) -> None:
        self.source = ColumnDataSource(columns(*CELL, "fill_top", "written", *shown), name=name)
        self.drawn: tuple = (0, 0, None)  # (cells, columns, slots) of the boxes the page has
        self.bottom = np.zeros(0)

    def show(self, cols: int, written: np.ndarray, slots: np.ndarray | None = None, **shown: np.ndarray) -> None:
        """One frame: each cell's percentage holding KV (filled from the bottom) and `shown`; `slots`:
        where each cell goes in the grid, if not one after another (a grid of several maps)."""
        grid = None
        drawn = (len(written), cols, None if slots is None else hash(slots.tobytes()))
        if self.drawn != drawn:
            grid = cell_boxes(np.arange(len(written)) if slots is None else slots, cols)
            self.bottom, self.drawn = grid["bottom"], drawn
        data = {"fill_top": self.bottom + (1 - GAP) * written / 100, "written": written, **shown}
        if grid is None:
            self.source.data.update(data)  # a ColumnDataChangedEvent of these columns only
        else:
            self.source.data = {**grid, **data}


def legend_below(fig: figure, items: list[LegendItem] | None = None) -> None:
    """A legend outside the plot area, under it (one item a row, so a phone has room), so it
    never covers data; a click hides its line. Without `items`, the figure's own legend
    (made by `legend_field`/`legend_label`) moves there."""
    if items is None:
        inside = fig.legend[0]
        fig.center.remove(inside)
        items = inside.items
    fig.add_layout(
        Legend(
            items=items,
            orientation="vertical",
            click_policy="hide",
            label_text_font_size="11px",
            margin=0,
            padding=2,
            border_line_alpha=0,
        ),
        "below",
    )
