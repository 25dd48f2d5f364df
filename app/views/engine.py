"""View of the `engine` lab: two memory maps side by side, animated over simulated time,
with memory, batch and queue curves below and preemption / swap events marked.

A map cell is a block (or a few blocks, or a slice of a reserved arena) of KV memory:
coloured by the request holding it, hatched where it is held but holds no KV yet
(reserved-but-unused), filled solid up to the share that holds written KV, white when free
(a white cell between held ones is a hole).
"""
from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, Range1d, Span
from bokeh.palettes import Category20_20
from bokeh.plotting import figure

from app.i18n import tr
from app.text import plain
from app.view import LabView
from kvweb.lab import Lab

FREE = "#ffffff"
GAP = 0.12
RUN_COLORS = ("#1f77b4", "#ff7f0e")  # the lab's `memory`, then `compare`
EVENT_MARKERS = {"preempt": "x", "swap_out": "inverted_triangle", "swap_in": "triangle", "recompute": "circle"}


def owner_color(owner: int) -> str:
    return FREE if owner < 0 else Category20_20[owner % len(Category20_20)]


class MemoryMap:
    """One run's KV memory as a grid of cells; `draw` shows one frame of its trace."""

    def __init__(self, name: str) -> None:
        self.cells = ColumnDataSource({k: [] for k in ("left", "right", "top", "bottom", "fill_top", "color",
                                                      "hatch", "owner", "written")}, name=f"engine-{name}-cells")
        self.figure = figure(height=380, sizing_mode="stretch_width", tools="hover,save", toolbar_location="above",
                             x_range=Range1d(0, 1), y_range=Range1d(-1, 0),
                             tooltips=[(tr("request"), "@owner"), (tr("written KV"), "@written %")])
        self.figure.axis.visible = False
        self.figure.grid.visible = False
        self.figure.quad(left="left", right="right", top="top", bottom="bottom", source=self.cells,
                         fill_color="color", fill_alpha=0.22, hatch_pattern="hatch", hatch_color="color",
                         hatch_alpha=0.6, hatch_scale=6, line_color="#bbbbbb", line_width=0.5)
        self.figure.quad(left="left", right="right", top="fill_top", bottom="bottom", source=self.cells,
                         fill_color="color", line_color=None)
        self.columns = 1

    def reset(self, title: str, cells: int) -> None:
        """Fix the grid for a run: square-ish, at most 40 cells a row."""
        self.columns = min(40, max(8, int(cells ** 0.5 + 0.999)))
        rows = -(-cells // self.columns)
        self.figure.title.text = title
        self.figure.x_range.start, self.figure.x_range.end = -0.2, self.columns + 0.2
        self.figure.y_range.start, self.figure.y_range.end = -rows - 0.2, 0.2

    def draw(self, frame: dict[str, Any]) -> None:
        owners, written = frame["owner"], frame["written"]
        cols = self.columns
        xs = [i % cols for i in range(len(owners))]
        ys = [-(i // cols) for i in range(len(owners))]
        self.cells.data = {
            "left": xs, "right": [x + 1 - GAP for x in xs], "top": ys, "bottom": [y - 1 + GAP for y in ys],
            "fill_top": [y - 1 + GAP + (1 - GAP) * w / 100 for y, w in zip(ys, written)],
            "color": [owner_color(o) for o in owners],
            "hatch": ["/" if o >= 0 and w < 100 else " " for o, w in zip(owners, written)],
            "owner": [o if o >= 0 else "free" for o in owners], "written": written,
        }


def figures_text(runs: list[dict[str, Any]]) -> str:
    """The runs' figures as a plain two-column table."""
    rows = [
        ("", lambda r: r["memory"]),
        (tr("throughput (tokens/s)"), lambda r: f"{r['throughput_tok_s']:.1f}"),
        (tr("SLO attainment"), lambda r: f"{100 * r['slo_attainment']:.1f} %"),
        (tr("mean batch"), lambda r: f"{r['mean_batch']:.1f}"),
        (tr("memory occupied (time avg)"), lambda r: f"{100 * r['occupied_frac']:.1f} %"),
        (tr("memory holding KV (time avg)"), lambda r: f"{100 * r['used_frac']:.1f} %"),
        (tr("KV / occupied"), lambda r: f"{100 * r['utilisation']:.1f} %"),
        (tr("preemptions"), lambda r: str(r["preemptions"])),
        (tr("recomputed tokens"), lambda r: str(r["recomputed_tokens"])),
        (tr("swapped (GB, both ways)"), lambda r: f"{r['swapped_bytes'] / 1e9:.2f}"),
        (tr("TTFT p50 / p90 (s)"), lambda r: f"{r['ttft_s']['p50'] or 0:.2f} / {r['ttft_s']['p90'] or 0:.2f}"),
        (tr("TPOT p50 / p90 (ms)"), lambda r: f"{1e3 * (r['tpot_s']['p50'] or 0):.0f} / {1e3 * (r['tpot_s']['p90'] or 0):.0f}"),
        (tr("simulated time (s)"), lambda r: f"{r['sim_time_s']:.1f}"),
        (tr("finished / rejected"), lambda r: f"{r['finished']} / {r['rejected']}"),
    ]
    return "\n".join(f"{label:<30}" + "".join(f"{get(r):>16}" for r in runs) for label, get in rows)


class EngineView(LabView):
    labs = ("engine",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.player.interval = 250
        self.maps = [MemoryMap("left"), MemoryMap("right")]
        self.summary = plain(css_class="kv-engine-summary", mono=True)
        self.step_text = plain(css_class="kv-engine-step", mono=True)
        self.legend = plain(tr("cells: colour = request; solid = written KV; hatched = held but not written "
                               "(reserved-but-unused); white = free (between held cells: a hole)"))
        curves = {k: [] for k in ("t", "occupied", "used", "batch", "queue")}
        self.curves = [ColumnDataSource(dict(curves), name=f"engine-curves-{i}") for i in range(2)]
        self.events = [ColumnDataSource({"t": [], "y": [], "marker": [], "kind": []}, name=f"engine-events-{i}")
                       for i in range(2)]
        self.memory = figure(title=tr("KV memory: occupied (solid) and holding KV (dashed), % of capacity"),
                             height=220, sizing_mode="stretch_width", tools="xpan,xwheel_zoom,reset,save",
                             x_axis_label=tr("simulated time (s)"))
        self.batch = figure(title=tr("batch (solid) and queue (dashed); marks: preempt x, swap out v, swap in ^, recompute o"),
                            height=220, sizing_mode="stretch_width", tools="xpan,xwheel_zoom,reset,save",
                            x_range=self.memory.x_range, x_axis_label=tr("simulated time (s)"))
        self.lines = []
        for i, color in enumerate(RUN_COLORS):
            src = self.curves[i]
            self.lines += [
                self.memory.line("t", "occupied", source=src, color=color, line_width=2),
                self.memory.line("t", "used", source=src, color=color, line_dash="dashed", line_width=2),
                self.batch.line("t", "batch", source=src, color=color, line_width=2),
                self.batch.line("t", "queue", source=src, color=color, line_dash="dashed", line_width=2),
            ]
            self.batch.scatter("t", "y", source=self.events[i], marker="marker", color=color, size=8)
        self.now = [Span(location=0, dimension="height", line_color="#444444", line_dash="dotted") for _ in range(2)]
        self.memory.add_layout(self.now[0])
        self.batch.add_layout(self.now[1])
        self.memory.y_range.start = self.batch.y_range.start = 0
        self.frames: list[list[dict[str, Any]]] = []
        self.timeline: dict[str, list] = {"t": [], "frames": []}

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(self.summary, self.player, self.step_text, self.legend,
                         pn.Row(self.maps[0].figure, self.maps[1].figure, sizing_mode="stretch_width"),
                         self.memory, self.batch, sizing_mode="stretch_width")

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        runs = [result] + ([result["compare"]] if result["compare"] else [])
        capacity = result["scenario"]["kv_capacity_tokens"]
        self.frames = [r["trace"]["frames"] for r in runs]
        self.timeline = result["timeline"]
        for i, (m, source, events) in enumerate(zip(self.maps, self.curves, self.events)):
            m.figure.visible = i < len(runs)
            if i >= len(runs):
                source.data = {k: [] for k in source.data}
                events.data = {k: [] for k in events.data}
                continue
            run, trace = runs[i], runs[i]["trace"]
            cells = len(trace["frames"][0]["owner"]) if trace["frames"] else 0
            m.reset(f"{run['memory']}: {tr('one cell')} = {trace['cell_tokens']} {tr('tokens')}", cells)
            c = trace["curves"]
            source.data = {"t": c["t"], "occupied": [100 * x / capacity for x in c["occupied"]],
                           "used": [100 * x / capacity for x in c["used"]], "batch": c["batch"],
                           "queue": [w + p for w, p in zip(c["waiting"], c["preempted"])]}
            ev = trace["events"]
            events.data = {"t": [e["t"] for e in ev], "y": [0] * len(ev),
                           "marker": [EVENT_MARKERS[e["kind"]] for e in ev], "kind": [e["kind"] for e in ev]}
        for j, line in enumerate(self.lines):
            line.visible = j // 4 < len(runs)
        scenario = result["scenario"]
        dropped = sum(r["trace"]["events_dropped"] for r in runs)
        self.summary.text = (
            f"{tr('scenario')} {scenario['name']}: {scenario['about']}; {scenario['kv_capacity_tokens']} "
            f"{tr('tokens of KV')} ({scenario['units']})\n"
            f"{figures_text(runs)}\n"
            + (f"({dropped} {tr('later events not marked')})\n" if dropped else "")
            + tr(result["paper"])
        )
        self.set_steps(len(self.timeline["t"]))

    def show_step(self, index: int) -> None:
        times = self.timeline["t"]
        if not times:
            return
        index = min(index, len(times) - 1)
        t = times[index]
        for m, frames, shown in zip(self.maps, self.frames, self.timeline["frames"]):
            m.draw(frames[shown[index]])
        for span in self.now:
            span.location = t
        self.step_text.text = f"t = {t:.1f} s  ({tr('frame')} {index + 1}/{len(times)})"
