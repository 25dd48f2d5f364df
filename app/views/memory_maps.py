"""View of the `engine` lab: two memory maps side by side, animated over simulated time,
with memory, batch and queue curves below and every preemption, swap and recompute marked.

A map cell is a block (or a few blocks, or a slice of a reserved arena) of KV memory:
coloured by the request holding it, hatched where it is held but holds no KV yet
(reserved-but-unused), filled solid up to the share that holds written KV, white when free
(a white cell between held ones is a hole). Cells a preemption freed since the frame before
are outlined red, cells preempted work came back to green; under a map that swaps, a strip
of host memory holds the requests swapped out at that moment.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import panel as pn
from bokeh.models import (
    CDSView,
    ColumnDataSource,
    CustomJSHover,
    FixedTicker,
    GroupFilter,
    HoverTool,
    Label,
    LegendItem,
    Range1d,
    Span,
)
from bokeh.core.properties import value
from bokeh.palettes import Category20_20
from bokeh.plotting import figure

from app.i18n import tr
from app.text import LiveText, plain
from app.view import (
    LabView,
    TextTable,
    columns,
    figures_rows,
    padded_end,
    percent,
    serving_rows,
    set_range,
    steady_ticks,
)
from app.views.drawing import CELL, Cells, cell_boxes, indexed_color, legend_below, request_hover
from kvweb.lab import Lab
from kvweb.serving.loop.engine_trace import EVENT_KINDS

FREE = "#ffffff"
RUN_COLORS = ("#1f77b4", "#ff7f0e")  # the lab's `memory`, then `compare`
FREED, RETURNED = "#d62728", "#2ca02c"
EVENT_MARKERS = {"preempt": "x", "swap_out": "inverted_triangle", "swap_in": "triangle", "recompute": "circle"}
EVENT_NAMES = {
    "preempt": "preempted (recompute later)",
    "swap_out": "swapped out",
    "swap_in": "swapped in",
    "recompute": "recomputed",
}
EVENT_LANES = {"preempt": "preempt", "swap_out": "swap out", "swap_in": "swap in", "recompute": "recompute"}  # short:
# the events figure's axis labels set the left edge of every figure in the column

OWNER_COLORS = (*Category20_20, FREE)  # a request's colour (its id mod 20), then free


def owner_index(owners: np.ndarray) -> np.ndarray:
    """Each owner's colour as its index in OWNER_COLORS: a request's id mod 20; free (-1) the last."""
    return np.where(owners >= 0, owners % len(Category20_20), len(Category20_20)).astype(np.int8)


def owner_color(owner: int) -> str:
    return OWNER_COLORS[owner_index(np.asarray(owner))]


class MemoryMap:
    """One run's KV memory as a grid of cells (and its host swap space as a strip below);
    `draw` shows one frame of its trace."""

    def __init__(self, name: str) -> None:
        # numbers only (`Cells`): a request's colour is its index in OWNER_COLORS, coloured in the
        # page; `hatched` and `freed` are 0 or 1
        self.cells = Cells(f"engine-{name}-cells", "color", "hatched", "owner", "freed")
        self.marks = ColumnDataSource(columns(*CELL, "color"), name=f"engine-{name}-marks")
        self.host = ColumnDataSource(columns(*CELL, "color", "owner", "tokens"), name=f"engine-{name}-host")
        self.figure = figure(
            height=380,
            sizing_mode="stretch_width",
            tools="save",
            toolbar_location="above",
            x_range=Range1d(0, 1),
            y_range=Range1d(-1, 0),
        )
        self.figure.axis.visible = False
        self.figure.grid.visible = False
        color = indexed_color("color", list(OWNER_COLORS))
        held = self.figure.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.cells.source,
            fill_color=color,
            fill_alpha=0.22,
            line_color="#bbbbbb",
            line_width=0.5,
        )
        # One hatch for every held-but-unwritten cell: a hatch that varies per cell makes BokehJS
        # paint a pattern canvas per cell on every frame (seconds for a full map in a browser).
        self.figure.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.cells.source,
            view=CDSView(filter=GroupFilter(column_name="hatched", group=1)),
            fill_color=None,
            line_color=None,
            hatch_pattern="/",
            hatch_color="#555555",
            hatch_alpha=0.55,
            hatch_scale=6,
        )
        self.figure.quad(
            left="left",
            right="right",
            top="fill_top",
            bottom="bottom",
            source=self.cells.source,
            fill_color=color,
            line_color=None,
        )
        self.figure.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.marks,
            fill_color=None,
            line_color="color",
            line_width=2.5,
        )
        host = self.figure.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.host,
            fill_color="color",
            line_color="#444444",
            line_width=0.5,
        )
        self.figure.add_tools(
            HoverTool(
                renderers=[held],
                tooltips=[(tr("request"), "@owner{owner}"), (tr("written KV"), "@written %"), ("", "@freed{freed}")],
                formatters={
                    "@owner": request_hover(tr("free")),
                    "@freed": CustomJSHover(
                        args={"freed": tr("freed by a preemption since the last frame")},
                        code="return value ? freed : ''",
                    ),
                },
            ),
            HoverTool(
                renderers=[host], tooltips=[(tr("swapped out on the host"), "@owner"), (tr("KV tokens"), "@tokens")]
            ),
        )
        self.host_label = Label(x=0, y=0, text="", text_font_size="11px", text_color="#444444")
        self.figure.add_layout(self.host_label)
        self.columns = 1
        self.rows = 1
        self.host_tokens = 0

    def reset(self, title: str, cells: int, host_tokens: int) -> None:
        """Fix the grid for a run: square-ish, at most 40 cells a row, and a host strip when it swaps."""
        self.columns = min(40, max(8, int(cells**0.5 + 0.999)))
        self.rows = -(-cells // self.columns)
        self.host_tokens = host_tokens
        self.figure.title.text = title
        self.figure.x_range.start, self.figure.x_range.end = -0.2, self.columns + 0.2
        bottom = -self.rows - (2.6 if host_tokens else 0)
        self.figure.y_range.start, self.figure.y_range.end = bottom - 0.2, 0.2
        self.host_label.x, self.host_label.y = 0, -self.rows - 0.85
        self.host_label.text = f"{tr('host memory (swap space)')}: {host_tokens} {tr('tokens')}" if host_tokens else ""

    def draw(self, frame: dict[str, Any]) -> None:
        owners = np.asarray(frame["owner"], dtype=np.int32)
        written = np.asarray(frame["written"], dtype=np.int32)
        freed = np.zeros(len(owners), dtype=np.int8)
        freed[frame["freed"]] = 1
        self.cells.show(
            self.columns,
            written,
            color=owner_index(owners),
            hatched=((owners >= 0) & (written < 100)).astype(np.int8),
            owner=owners,
            freed=freed,
        )
        marked = [(i, FREED) for i in frame["freed"]] + [(i, RETURNED) for i in frame["returned"]]
        self.marks.data = {
            **cell_boxes(np.array([i for i, _ in marked], dtype=int), self.columns),
            "color": [c for _, c in marked],
        }
        self.draw_host(frame["host"] if self.host_tokens else [])

    def draw_host(self, host: list[list[int]]) -> None:
        """Swapped-out requests packed left to right, as wide as the share of host memory they take."""
        scale, left = self.columns / max(self.host_tokens, 1), 0.0
        top = -self.rows - 1.05
        data: dict[str, list] = columns(*self.host.data)
        for owner, tokens in host:
            for key, item in zip(
                data, (left, left + tokens * scale, top, top - 1.3, owner_color(owner), owner, tokens)
            ):
                data[key].append(item)
            left += tokens * scale
        self.host.data = data


def figures_table(runs: list[dict[str, Any]], names: list[str]) -> tuple[list[str], list[list[str]]]:
    """The runs' figures: a row per figure, a column per run (under `names`)."""
    common = serving_rows()
    rows = [
        common["throughput"],
        common["requests"],
        common["slo"],
        common["batch"],
        (tr("memory occupied (time avg)"), lambda r: percent(r["occupied_frac"])),
        (tr("memory holding KV (time avg)"), lambda r: percent(r["used_frac"])),
        (tr("KV / occupied"), lambda r: percent(r["utilisation"])),
        common["preemptions"],
        common["recomputed"],
        (tr("swapped (GB, both ways)"), lambda r: f"{r['swapped_bytes'] / 1e9:.2f}"),
        (tr("TTFT p50 / p90 (s)"), lambda r: f"{r['ttft_s']['p50'] or 0:.2f} / {r['ttft_s']['p90'] or 0:.2f}"),
        (
            tr("TPOT p50 / p90 (ms)"),
            lambda r: f"{1e3 * (r['tpot_s']['p50'] or 0):.0f} / {1e3 * (r['tpot_s']['p90'] or 0):.0f}",
        ),
        common["time"],
        common["finished"],
    ]
    return figures_rows(rows, runs, names)


class EngineView(LabView):
    labs = ("engine",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.player.interval = 250
        self.maps = [MemoryMap("left"), MemoryMap("right")]
        self.header = LiveText(css_class="kv-engine-header")  # (changes with the GPU and scenario: no page layout)
        self.table = TextTable("engine-figures", "kv-engine-table", max_rows=40)  # every row in view
        self.paper = plain(css_class="kv-engine-paper")
        self.step_text = LiveText(css_class="kv-engine-step")
        self.legend = plain(
            tr(
                "cells: colour = request; solid = written KV; hatched = held but not written "
                "(reserved-but-unused); white = free (between held cells: a hole)"
            )
            + "\n"
            + tr(
                "outlined red: freed by a preemption since the last frame; outlined green: "
                "preempted work back on the GPU; strip below: requests swapped out to host memory"
            )
        )
        self.curves = [
            ColumnDataSource(columns("t", "occupied", "used", "batch", "queue"), name=f"engine-curves-{i}")
            for i in range(2)
        ]
        self.events = [
            ColumnDataSource(
                columns("t", "lane", "size", "marker", "kind", "count", "t0", "t1", "run"), name=f"engine-events-{i}"
            )
            for i in range(2)
        ]
        tools = "xpan,xwheel_zoom,reset,save"
        time = Range1d(0, 1)  # the three share it; the ranges are set in `update` (`set_range`)
        self.memory = figure(
            title=tr("KV memory, % of capacity"),
            height=260,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(0, 1),
            x_axis_label=tr("simulated time (s)"),
        )
        self.batch = figure(
            title=tr("batch and queue (requests)"),
            height=260,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(0, 1),
            x_axis_label=tr("simulated time (s)"),
        )
        steady_ticks(self.memory, 3)  # (percentages up to 100; batches and queues up to 5000 requests)
        steady_ticks(self.batch, 4)
        self.marks = figure(
            title=tr("engine events per time bin (bigger = more)"),
            height=230,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(-0.6, len(EVENT_KINDS) - 0.4),
            x_axis_label=tr("simulated time (s)"),
        )
        self.marks.yaxis.ticker = FixedTicker(ticks=list(range(len(EVENT_KINDS))))
        self.marks.yaxis.major_label_overrides = {i: tr(EVENT_LANES[k]) for i, k in enumerate(EVENT_KINDS)}
        self.marks.add_tools(
            HoverTool(
                tooltips=[
                    ("", "@run"),
                    (tr("event"), "@kind"),
                    (tr("count"), "@count"),
                    (tr("from (s)"), "@t0{0.0}"),
                    (tr("to (s)"), "@t1{0.0}"),
                ]
            )
        )
        self.lines = []
        self.legend_items: list[list[LegendItem]] = [[], [], []]
        for i, color in enumerate(RUN_COLORS):
            src = self.curves[i]
            occupied = self.memory.line("t", "occupied", source=src, color=color, line_width=2)
            used = self.memory.line("t", "used", source=src, color=color, line_dash="dashed", line_width=2)
            batch = self.batch.line("t", "batch", source=src, color=color, line_width=2)
            queue = self.batch.line("t", "queue", source=src, color=color, line_dash="dashed", line_width=2)
            dots = self.marks.scatter(
                "t",
                "lane",
                source=self.events[i],
                marker="marker",
                size="size",
                color=color,
                line_width=2,
                fill_alpha=0.3,
            )
            self.lines.append((occupied, used, batch, queue, dots))
            self.legend_items[0] += [LegendItem(label="", renderers=[occupied]), LegendItem(label="", renderers=[used])]
            self.legend_items[1] += [LegendItem(label="", renderers=[batch]), LegendItem(label="", renderers=[queue])]
            self.legend_items[2].append(LegendItem(label="", renderers=[dots]))
        for fig, items in zip((self.memory, self.batch, self.marks), self.legend_items):
            legend_below(fig, items)
        self.now = [Span(location=0, dimension="height", line_color="#444444", line_dash="dotted") for _ in range(3)]
        for fig, span in zip((self.memory, self.batch, self.marks), self.now):
            fig.add_layout(span)
        self.frames: list[list[dict[str, Any]]] = []
        self.names: list[str] = []
        self.timeline: dict[str, Any] = {"t": [], "frames": []}

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.header,
            self.table.pane,
            self.paper,
            self.player,
            self.step_text,
            self.legend,
            pn.Row(self.maps[0].figure, self.maps[1].figure, sizing_mode="stretch_width"),
            self.memory,
            self.batch,
            self.marks,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        runs = [result] + ([result["compare"]] if result["compare"] else [])
        scenario = result["scenario"]
        capacity = scenario["kv_capacity_tokens"]
        self.frames = [r["trace"]["frames"] for r in runs]
        self.names = [r["memory"] for r in runs]
        self.timeline = result["timeline"]
        swaps = getattr(lab, "preemption", "") == "swap"
        # Titles, labels and what is shown first, new data after: in the static site a change that lays
        # out a figure after new data waits a task (static/handler.js), and the page paints in between.
        for i, m in enumerate(self.maps):
            m.figure.visible = i < len(runs)
            if i < len(runs):
                run, trace = runs[i], runs[i]["trace"]
                cells = len(trace["frames"][0]["owner"]) if trace["frames"] else 0
                arena = "" if run["memory"] == "paged" else f" ({tr('arena')}: {lab.allocator})"
                m.reset(
                    f"{run['memory']}{arena}: {tr('one cell')} = {trace['cell_tokens']} {tr('tokens')}",
                    cells,
                    scenario["host_tokens"] if swaps and run["memory"] == "paged" else 0,
                )
        labels = [(tr("occupied"), tr("holding KV")), (tr("batch"), tr("queue (waiting + preempted)"))]
        for i, drawn in enumerate(self.lines):
            for r in drawn:
                r.visible = i < len(runs)
        for items, pair in zip(self.legend_items[:2], labels):
            for j, item in enumerate(items):
                item.visible = j // 2 < len(runs)
                item.label = value(f"{self.run_name(j // 2)}: {pair[j % 2]}")
        for j, item in enumerate(self.legend_items[2]):
            item.visible = j < len(runs)
            item.label = value(self.run_name(j))
        curves: list[dict[str, list]] = []  # each run's, as drawn
        ends: list[float] = []
        for i, (source, events) in enumerate(zip(self.curves, self.events)):
            if i >= len(runs):
                source.data = columns(*source.data)
                events.data = columns(*events.data)
                continue
            run, c = runs[i], runs[i]["trace"]["curves"]
            source.data = {
                "t": c["t"],
                "occupied": [100 * x / capacity for x in c["occupied"]],
                "used": [100 * x / capacity for x in c["used"]],
                "batch": c["batch"],
                "queue": [w + p for w, p in zip(c["waiting"], c["preempted"])],
            }
            events.data = self.event_marks(run["trace"]["event_bins"], run["memory"], i)
            curves.append(source.data)
            ends.append(max([*c["t"][-1:], *events.data["t1"]], default=0.0))  # (events after the last sample too)
        set_range(self.memory.x_range, max(ends, default=0.0))
        set_range(self.memory.y_range, padded_end(*(d[k] for d in curves for k in ("occupied", "used"))))
        set_range(self.batch.y_range, padded_end(*(d[k] for d in curves for k in ("batch", "queue"))))
        self.table.show(*figures_table(runs, self.names))
        self.header.text = (
            f"{tr('scenario')} {scenario['name']}: {tr(scenario['about'])}; {capacity} "
            f"{tr('tokens of KV')} ({tr(scenario['units'])})"
        )
        self.paper.text = tr(result["paper"])
        self.set_steps(len(self.timeline["t"]))

    def run_name(self, i: int) -> str:
        """The legend's name of run i: the lab's memory manager, then the comparison (so marked)."""
        if i >= len(self.names):
            return ""
        return f"{self.names[i]} ({tr('compare')})" if i else self.names[i]

    @staticmethod
    def event_marks(bins: dict[str, list], name: str, run: int) -> dict[str, list]:
        """One marker per (time bin, kind) with events, in the kind's lane, sized by the count."""
        lanes = {k: i for i, k in enumerate(EVENT_KINDS)}
        offset = -0.15 if run == 0 else 0.15
        return {
            "t": [(a + b) / 2 for a, b in zip(bins["t0"], bins["t1"])],
            "lane": [lanes[k] + offset for k in bins["kind"]],
            "size": [min(26, 7 + 3 * n**0.5) for n in bins["count"]],
            "marker": [EVENT_MARKERS[k] for k in bins["kind"]],
            "kind": [tr(EVENT_NAMES[k]) for k in bins["kind"]],
            "count": bins["count"],
            "t0": bins["t0"],
            "t1": bins["t1"],
            "run": [name] * len(bins["kind"]),
        }

    def show_step(self, index: int) -> None:
        times = self.timeline["t"]
        if not times:
            return
        index = min(index, len(times) - 1)
        t = times[index]
        shown = [frames[at[index]] for frames, at in zip(self.frames, self.timeline["frames"])]
        for m, frame in zip(self.maps, shown):
            m.draw(frame)
        for span in self.now:
            span.location = t
        lines = [f"t = {t:.1f} s"]
        for name, frame in zip(self.names, shown):
            happened = ", ".join(f"{n} {tr(EVENT_NAMES[k])}" for k, n in frame["happened"].items())
            host = frame["host"]
            lines.append(
                f"{name}: {tr('since the last frame')}: {happened or tr('no preemption')}"
                + (
                    f"; {tr('on the host')}: {len(host)} {tr('requests')}, {sum(n for _, n in host)} {tr('tokens')}"
                    if host
                    else ""
                )
            )
        self.step_text.text = "\n".join(lines)
