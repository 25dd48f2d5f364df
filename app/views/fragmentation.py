"""View of the `fragmentation` lab: the contiguous arena animated as requests come and go,
failures per mean request size, and the internal waste of reservations."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LegendItem, Range1d
from bokeh.palettes import Category20_20
from bokeh.plotting import figure
from bokeh.transform import dodge

from app.i18n import tr
from app.text import LiveText, plain
from app.view import LabView, TextTable, percent
from app.views.drawing import legend_below
from kvweb.lab import Lab

ROWS = 8  # the arena is drawn wrapped over this many rows
GAP = 0.2


def row_pieces(start: int, length: int, width: int) -> list[tuple[int, int, int]]:
    """Cut a range of the arena into (row, left, right) pieces of rows `width` tokens wide."""
    pieces = []
    while length > 0:
        row, left = divmod(start, width)
        take = min(length, width - left)
        pieces.append((row, left, left + take))
        start, length = start + take, length - take
    return pieces


class FragmentationView(LabView):
    labs = ("fragmentation",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.player.interval = 200
        self.ranges = ColumnDataSource(
            {k: [] for k in ("left", "right", "top", "bottom", "color", "owner", "line", "span")},
            name="fragmentation-ranges",
        )
        self.arena = figure(
            height=300,
            sizing_mode="stretch_width",
            tools="hover,save",
            x_range=Range1d(0, 1),
            y_range=Range1d(-ROWS, 0),
            tooltips=[(tr("request"), "@owner"), (tr("tokens held"), "@span")],
        )
        self.arena.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.ranges,
            fill_color="color",
            line_color="#111111",
            line_width="line",
        )
        self.arena.yaxis.visible = False
        self.arena.xaxis.axis_label = tr("token offset within a row (white: free; between ranges: a hole)")
        self.arena.ygrid.visible = False
        self.by_size = ColumnDataSource({"size": [], "failures": [], "enough": []}, name="fragmentation-by-size")
        self.sizes = figure(
            title=tr("failed allocations by mean request size: all (left), with enough free tokens (right)"),
            x_range=FactorRange(),
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            tools="save",
        )
        failures = self.sizes.vbar(
            x=dodge("size", -0.17, range=self.sizes.x_range),
            top="failures",
            width=0.3,
            source=self.by_size,
            color="#d62728",
        )
        enough = self.sizes.vbar(
            x=dodge("size", 0.17, range=self.sizes.x_range),
            top="enough",
            width=0.3,
            source=self.by_size,
            color="#ff9896",
        )
        self.sizes.add_tools(
            HoverTool(
                tooltips=[
                    (tr("mean size"), "@size"),
                    (tr("failures"), "@failures"),
                    (tr("with enough free"), "@enough"),
                ]
            )
        )
        legend_below(
            self.sizes,
            [
                LegendItem(label=tr("failures"), renderers=[failures]),
                LegendItem(label=tr("with enough free"), renderers=[enough]),
            ],
        )
        self.sizes.y_range.start = 0
        self.waste = ColumnDataSource({"scheme": [], "percent": []}, name="fragmentation-waste")
        self.internal = figure(
            title=tr("internal waste at request end (% of what was held)"),
            x_range=FactorRange(),
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            tools="save",
        )
        self.internal.vbar(x="scheme", top="percent", width=0.6, source=self.waste, color="#9467bd")
        self.internal.add_tools(HoverTool(tooltips=[("", "@scheme"), (tr("internal waste"), "@percent{0.0} %")]))
        self.internal.y_range.start = 0
        self.table = TextTable("fragmentation-table", "kv-fragmentation-table")
        self.summary = plain(css_class="kv-fragmentation-summary")
        self.step_text = LiveText(css_class="kv-fragmentation-step")
        self.frames: list[dict[str, Any]] = []
        self.width = 1

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.table.pane,
            self.summary,
            self.player,
            self.step_text,
            self.arena,
            pn.Row(self.sizes, self.internal, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        self.frames = result["frames"]
        self.width = -(-result["arena"] // ROWS)
        self.arena.x_range.start, self.arena.x_range.end = 0, self.width
        packed = (
            f"; {tr('ranges packed, no hole between them (as if compacted after every free)')}"
            if result["allocator"] == "ideal"
            else ""
        )
        self.arena.title.text = (
            f"{tr('arena')}: {result['arena']} {tr('tokens')} ({result['allocator']}), "
            f"{tr('mean request')} {result['mean_size']} {tr('tokens')}; {ROWS} {tr('rows')}{packed}"
        )
        rows = result["by_mean_size"]
        self.sizes.x_range.factors = [str(r["mean_size"]) for r in rows]
        self.by_size.data = {
            "size": [str(r["mean_size"]) for r in rows],
            "failures": [r["failures"] for r in rows],
            "enough": [r["failures_with_enough_free"] for r in rows],
        }
        internal = result["internal"]["rows"]
        self.internal.x_range.factors = [r["scheme"] for r in internal]
        self.waste.data = {
            "scheme": [r["scheme"] for r in internal],
            "percent": [100 * r["waste_frac"] for r in internal],
        }
        self.table.show(
            [tr("mean size"), tr("failures"), tr("with enough free"), tr("share")],
            [
                [
                    str(r["mean_size"]),
                    str(r["failures"]),
                    str(r["failures_with_enough_free"]),
                    percent(r["share_with_enough_free"]),
                ]
                for r in rows
            ],
        )
        self.summary.text = f"{tr('internal waste')} ({result['internal']['workload']}): " + ", ".join(
            f"{r['scheme']} {percent(r['waste_frac'])}" for r in internal
        )
        self.set_steps(len(self.frames))

    def show_step(self, index: int) -> None:
        if not self.frames:
            return
        frame = self.frames[min(index, len(self.frames) - 1)]
        data: dict[str, list] = {k: [] for k in self.ranges.data}
        for start, length, owner in frame["ranges"]:
            line = 3 if owner == frame["request"] else 0.5  # outline the range placed this step
            span = f"{start}-{start + length} ({length})"
            for row, left, right in row_pieces(start, length, self.width):
                for key, value in zip(
                    data, (left, right, -row, -row - 1 + GAP, Category20_20[owner % 20], owner, line, span)
                ):
                    data[key].append(value)
        self.ranges.data = data
        outcome = tr("FAILED") if frame["failed"] else tr("placed")
        self.step_text.text = (
            f"{tr('request')} {frame['request'] + 1}/{self.frames[-1]['request'] + 1} {tr('needs')} {frame['size']} "
            f"{tr('tokens')}: {outcome}; {tr('free')} {frame['free']}, {tr('largest hole')} {frame['largest_hole']}; "
            f"{tr('failures so far')} {frame['failures']} ({frame['failures_with_enough_free']} "
            f"{tr('with enough free tokens')})"
        )
