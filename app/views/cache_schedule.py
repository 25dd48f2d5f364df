"""Views of the prefix-cache labs: `cache-schedule` (FCFS and LSPF side by side on one
workload: running hit rate and waits), `cache-sweep` (hit rate against capacity),
`prefix-hash` (radix tree vs chained block hashes) and `prefill-savings` (hits turned into
prefill seconds). Everything drawn is in the lab's result."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import (
    ColumnDataSource,
    FixedTicker,
    HoverTool,
    LabelSet,
    Legend,
    LegendItem,
    LogTicker,
    NumeralTickFormatter,
    Span,
)
from bokeh.plotting import figure

from app.i18n import tr
from app.text import plain
from app.view import LabView, TextTable, percent
from kvweb.jsonable import number
from kvweb.lab import Lab

COLORS = {
    "fcfs": "#4c72b0",
    "lspf": "#dd8452",
    "dfs-rank": "#55a868",
    "aging": "#8172b3",
    "optimal": "#333333",
    "radix": "#dd8452",
    "radix_paged": "#c44e52",
    "hash": "#4c72b0",
}
NAMES = {
    "fcfs": "FCFS",
    "lspf": "LSPF",
    "dfs-rank": "DFS rank, within the queue (online)",
    "aging": "aging",
    "optimal": "optimum: offline DFS order",
    "radix": "radix tree",
    "radix_paged": "radix tree, pages of a block",
    "hash": "chained block hashes",
}
SHORT = {"dfs-rank": "DFS rank", "optimal": "optimum"}  # bar labels
# Curves that may coincide stay told apart: a wide pale line under a dashed one under a dotted
# one, and a different marker on each point of a sweep.
STYLE = {
    "fcfs": ("solid", 2.0, "circle"),
    "lspf": ("dashed", 2.5, "triangle"),
    "dfs-rank": ("dotted", 3.0, "square"),
    "aging": ("dashdot", 2.0, "diamond"),
    "optimal": ("dashed", 1.5, "x"),
    "radix": ("solid", 7.0, "circle"),
    "radix_paged": ("dashed", 3.5, "triangle"),
    "hash": ("dotted", 2.0, "square"),
}


def _figure(title: str, x_label: str, y_label: str, **kwargs: Any) -> Any:
    return figure(
        title=title,
        height=340,
        min_width=300,
        sizing_mode="stretch_width",
        tools="pan,wheel_zoom,reset,save",
        x_axis_label=x_label,
        y_axis_label=y_label,
        **kwargs,
    )


def _bars(title: str, name: str, **kwargs: Any) -> tuple[Any, ColumnDataSource]:
    """A bar chart with each value written above its bar (and in its hover)."""
    src = ColumnDataSource({"name": [], "value": [], "label": [], "color": []}, name=name)
    fig = figure(
        title=title,
        height=260,
        sizing_mode="stretch_width",
        min_width=300,
        max_width=560,
        tools="save",
        x_range=[""],
        **kwargs,
    )
    fig.vbar(x="name", top="value", width=0.7, color="color", source=src)
    fig.add_tools(HoverTool(tooltips=[("", "@name"), (title, "@label")]))
    fig.add_layout(
        LabelSet(x="name", y="value", text="label", source=src, text_align="center", y_offset=3, text_font_size="11px")
    )
    return fig, src


def _show_bars(fig: Any, src: ColumnDataSource, bars: list[tuple[str, float, str, str]]) -> None:
    """bars: (name, value, label, colour) each."""
    fig.x_range.factors = [b[0] for b in bars]
    src.data = dict(zip(("name", "value", "label", "color"), map(list, zip(*bars))))


def rates_table(
    x_title: str, xs: list[int], rates: dict[str, list[float]], keys: tuple[str, ...]
) -> tuple[list[str], list[list[str]]]:
    """Hit rates against a swept quantity: one row per value, one column per run (in `keys` order)."""
    keys = tuple(k for k in keys if k in rates)
    return [x_title, *(tr(NAMES[k]) for k in keys)], [
        [f"{x:,}", *(percent(rates[k][i]) for k in keys)] for i, x in enumerate(xs)
    ]


class CurveSet:
    """One line per run on a figure, kept in ColumnDataSources created once; runs missing
    from a result leave the legend, which sits below the plot and hides a run on a click."""

    def __init__(self, fig: Any, keys: tuple[str, ...], name: str, markers: bool = False) -> None:
        self.sources, self.items = {}, {}
        drawn = []
        for key in keys:
            src = ColumnDataSource({"x": [], "y": []}, name=f"{name}-{key}")
            dash, width, marker = STYLE[key]
            glyphs = [
                fig.line(
                    "x",
                    "y",
                    source=src,
                    color=COLORS[key],
                    line_width=width,
                    line_dash=dash,
                    line_alpha=0.45 if width > 5 else 1.0,
                    name=tr(NAMES[key]),
                )
            ]
            if markers:
                glyphs.append(
                    fig.scatter(
                        "x",
                        "y",
                        source=src,
                        color=COLORS[key],
                        marker=marker,
                        size=9,
                        fill_alpha=0.5,
                        name=tr(NAMES[key]),
                    )
                )
            drawn += glyphs
            self.sources[key] = src
            self.items[key] = LegendItem(label=tr(NAMES[key]), renderers=glyphs)
        fig.add_layout(
            Legend(
                items=list(self.items.values()),
                click_policy="hide",
                orientation="horizontal",
                label_text_font_size="11px",
                ncols=3 if len(keys) > 3 else 2,
            ),
            "below",
        )
        fig.add_tools(
            HoverTool(
                renderers=drawn,
                tooltips=[("", "$name"), (fig.xaxis[0].axis_label, "@x{0,0}"), (fig.yaxis[0].axis_label, "@y{0.000}")],
            )
        )

    def show(self, curves: dict[str, tuple[list, list]]) -> None:
        for key, src in self.sources.items():
            x, y = curves.get(key, ([], []))
            src.data = {"x": x, "y": y}
            self.items[key].visible = key in curves


class SweepChart:
    """Final hit rates against a swept quantity (log x, a labelled tick at every swept value),
    each point marked, a dotted line marking one value."""

    def __init__(self, title: str, x_label: str, keys: tuple[str, ...], name: str) -> None:
        self.fig = _figure(title, x_label, tr("hit rate"), x_axis_type="log", y_range=(0, 1))
        self.fig.xaxis.ticker = FixedTicker(ticks=[])
        self.fig.xaxis.formatter = NumeralTickFormatter(format="0,0")
        self.curves = CurveSet(self.fig, keys, name, markers=True)
        self.marker = Span(location=1, dimension="height", line_dash="dotted", line_color="#999999")
        self.fig.add_layout(self.marker)

    def show(self, xs: list[int], rates: dict[str, list[float]], marker: float) -> None:
        self.curves.show({k: (xs, v) for k, v in rates.items()})
        self.fig.xaxis.ticker.ticks = list(xs)
        self.marker.location = marker


class CacheScheduleView(LabView):
    labs = ("cache-schedule",)

    def __init__(self) -> None:
        super().__init__()
        keys = ("fcfs", "lspf", "dfs-rank", "aging")
        self.hit = _figure(
            tr("running hit rate (prompt tokens read from the cache so far)"),
            tr("requests served"),
            tr("hit rate"),
            y_range=(0, 1),
        )
        self.hit_curves = CurveSet(self.hit, keys, "cache-hit")
        self.optimal = Span(location=0, dimension="width", line_dash="dashed", line_color=COLORS["optimal"])
        self.hit.add_layout(self.optimal)
        self.wait = _figure(
            tr("steps each request waited in the queue (in service order)"), tr("requests served"), tr("steps waited")
        )
        self.wait_curves = CurveSet(self.wait, keys, "cache-wait")
        self.queue_line = Span(location=0, dimension="width", line_dash="dotted", line_color="#999999")
        self.wait.add_layout(self.queue_line)
        self.bar_plot, self.bars = _bars(tr("hit rate"), "cache-hit-bars", y_range=(0, 1.1))
        self.summary = plain(css_class="kv-cache-summary")
        self.table = TextTable("cache-table", "kv-cache-table")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            self.table.pane,
            pn.Row(self.hit, self.wait, sizing_mode="stretch_width"),
            self.bar_plot,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        runs = result["runs"]
        self.hit_curves.show({k: (r["curve"]["served"], r["curve"]["hit_rate"]) for k, r in runs.items()})
        self.wait_curves.show({k: (r["curve"]["served"], r["curve"]["wait"]) for k, r in runs.items()})
        self.optimal.location = result["optimal_hit_rate"]
        self.queue_line.location = lab.queue - 1
        rates = [(k, r["hit_rate"]) for k, r in runs.items()] + [("optimal", result["optimal_hit_rate"])]
        _show_bars(self.bar_plot, self.bars, [(tr(SHORT.get(k, NAMES[k])), x, percent(x), COLORS[k]) for k, x in rates])
        self.summary.text = (
            f"{result['requests']} {tr('requests')}, {result['prompt_tokens']:,} {tr('prompt tokens')}, "
            f"{tr('longest request')} {result['longest_request']} {tr('tokens')}; {tr('queue')} {lab.queue} "
            f"({tr('dotted line: FCFS never waits longer than queue - 1')})"
            + (
                "\n"
                + tr(
                    "The mean wait is the same for every order, and rightly: every request is waiting from "
                    "the start and one leaves per step, so the waits add up to the same total whoever leaves "
                    "first (Little's law). The longest wait tells the orders apart."
                )
                if result["mean_wait_same_in_every_order"] and len(runs) > 1
                else ""
            )
        )
        self.table.show(
            [tr("order"), tr("hit rate"), tr("longest wait"), tr("mean wait")],
            [
                [tr(NAMES[k]), percent(r["hit_rate"]), str(r["max_wait"]), f"{r['mean_wait']:.1f}"]
                for k, r in runs.items()
            ]
            + [[tr(NAMES["optimal"]), percent(result["optimal_hit_rate"]), "", ""]],
        )


class CacheSweepView(LabView):
    labs = ("cache-sweep",)

    def __init__(self) -> None:
        super().__init__()
        self.keys = ("fcfs", "lspf", "dfs-rank", "aging", "optimal")
        self.chart = SweepChart(
            tr("hit rate against cache capacity"), tr("capacity (tokens, log scale)"), self.keys, "cache-sweep"
        )
        self.summary = plain(css_class="kv-sweep-summary")
        self.table = TextTable("cache-sweep-table", "kv-cache-sweep-table")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(self.summary, self.chart.fig, self.table.pane, sizing_mode="stretch_width")

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        caps = result["capacity"]
        self.chart.show(caps, result["hit_rate"], result["longest_request"])
        self.summary.text = (
            f"{tr('dotted line: the longest request')} ({result['longest_request']} {tr('tokens')}; "
            f"{tr('shortest')} {result['shortest_request']})"
        )
        self.table.show(*rates_table(tr("capacity (tokens)"), caps, result["hit_rate"], self.keys))


class PrefixHashView(LabView):
    labs = ("prefix-hash",)

    def __init__(self) -> None:
        super().__init__()
        self.fig = _figure(
            tr("running hit rate, same workload, pool and order"), tr("requests served"), tr("hit rate"), y_range=(0, 1)
        )
        self.curves = CurveSet(self.fig, ("radix", "radix_paged", "hash"), "prefix-hash")
        self.sweep = SweepChart(
            tr("final hit rate against block size"),
            tr("tokens per block (log scale)"),
            ("radix", "radix_paged", "hash"),
            "hash-sweep",
        )
        self.summary = plain(css_class="kv-hash-summary")
        self.table = TextTable("hash-sweep-table", "kv-hash-table")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            pn.Row(self.fig, self.sweep.fig, sizing_mode="stretch_width"),
            self.table.pane,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        runs = result["runs"]
        self.curves.show({k: (r["curve"]["served"], r["curve"]["hit_rate"]) for k, r in runs.items()})
        sweep = result["block_sweep"]
        self.sweep.show(sweep["block_size"], sweep["hit_rate"], result["block_size"])
        self.table.show(
            *rates_table(tr("block size"), sweep["block_size"], sweep["hit_rate"], ("radix", "radix_paged", "hash"))
        )
        self.summary.text = (
            f"{tr('block size')} {result['block_size']}: {tr('radix tree')} {percent(result['radix_hit_rate'])}, "
            f"{tr('radix tree, pages of a block')} {percent(result['radix_paged_hit_rate'])}, "
            f"{tr('chained block hashes')} {percent(result['hash_hit_rate'])}"
        )
        ahead = [
            b for b, h, r in zip(sweep["block_size"], sweep["hit_rate"]["hash"], sweep["hit_rate"]["radix"]) if h > r
        ]
        if ahead:
            self.summary.text += f"\n{tr('block size')} {', '.join(map(str, ahead))}: " + tr(
                "the block hashes beat the radix tree here. It is the unit of eviction: the hashes free one "
                "block at a time, a request's tail first, while the tree frees a whole leaf (a question and "
                "its answer, say) at once. At larger blocks, reusing whole blocks only loses more than that."
            )


class PrefillSavingsView(LabView):
    labs = ("prefill-savings",)

    def __init__(self) -> None:
        super().__init__()
        self.bar_plot, self.bars = _bars(tr("prefill seconds, summed over the requests"), "prefill-bars")
        self.bar_plot.y_range.start = 0
        self.curve = ColumnDataSource({"x": [], "y": []})
        self.fig = _figure(
            tr("one prompt of the longest length: prefill time against its uncached suffix"),
            tr("uncached tokens (the rest is cached)"),
            tr("seconds"),
            x_axis_type="log",
        )
        self.fig.xaxis.ticker = LogTicker(mantissas=[1, 2, 5])
        self.fig.xaxis.formatter = NumeralTickFormatter(format="0,0")
        line = self.fig.line("x", "y", source=self.curve, line_width=2, color=COLORS["lspf"])
        self.fig.add_tools(
            HoverTool(
                renderers=[line],
                mode="vline",
                tooltips=[(tr("uncached tokens (the rest is cached)"), "@x{0,0}"), (tr("seconds"), "@y{0.00000}")],
            )
        )
        self.floor = Span(location=0, dimension="width", line_dash="dashed", line_color="#999999")
        self.fig.add_layout(self.floor)
        self.table = TextTable("prefill-table", "kv-prefill-table")
        self.summary = plain(css_class="kv-prefill-summary")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.table.pane,
            self.summary,
            pn.Row(self.bar_plot, self.fig, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        bars = [
            (tr("no cache"), "no_cache", "#999999"),
            ("FCFS", "fcfs", COLORS["fcfs"]),
            ("LSPF", "lspf", COLORS["lspf"]),
        ]
        _show_bars(
            self.bar_plot,
            self.bars,
            [
                (name, result[f"prefill_s_{key}"], f"{number(result[f'prefill_s_{key}'], 3)} s", color)
                for name, key, color in bars
            ],
        )
        curve = result["suffix_curve"]
        self.curve.data = {"x": curve["uncached"], "y": curve["prefill_s"]}
        self.floor.location = curve["floor_s"]
        self.bar_plot.y_range.end = 1.15 * max(result[f"prefill_s_{key}"] for _, key, _ in bars)  # room for labels
        self.table.show(
            [tr("order"), tr("hit rate"), tr("prefill time saved"), tr("prefill seconds")],
            [
                [
                    name,
                    percent(result.get(f"hit_rate_{key}", 0)),
                    percent(result.get(f"time_saved_{key}", 0)),
                    number(result[f"prefill_s_{key}"], 3),
                ]
                for name, key, _ in bars
            ],
        )
        floor = tr("dashed line: one read of the weights plus the step overhead, the least any prefill costs")
        self.summary.text = f"{floor} ({curve['floor_s'] * 1e3:.2f} ms)"
