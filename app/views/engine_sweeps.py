"""Views of the `sweep` lab (paged serving across block sizes, watermarks, swap vs recompute)
and the `recovery` lab (bringing back one preempted request)."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LegendItem
from bokeh.palettes import Category10_10
from bokeh.plotting import figure
from bokeh.transform import dodge

from app.i18n import tr
from app.text import plain
from app.view import LabView, TextTable, percent
from app.views.drawing import legend_below
from kvweb.jsonable import number
from kvweb.lab import Lab

SERIES = ("xs", "ys", "label", "color", "dash")
DASHES = ("solid", "dashed", "dotted", "dashdot")
MARKERS = ("circle", "square", "triangle", "diamond", "inverted_triangle", "hex")
SWEPT = {
    "rate": "arrival rate (requests/s)",
    "block_size": "block size",
    "preemption": "preemption",
    "watermark": "watermark",
}
FIGURES = [  # (column title, result key, value -> cell text)
    ("throughput (tokens/s)", "throughput_tok_s", "{:,.0f}".format),
    ("SLO attainment", "slo_attainment", percent),
    ("mean batch", "mean_batch", "{:.1f}".format),
    ("KV / occupied", "utilisation", percent),
    ("preemptions", "preemptions", "{:,}".format),
    ("recomputed tokens", "recomputed_tokens", "{:,}".format),
    ("swapped (GB, both ways)", "swapped_bytes", "{:.1f}".format),
]


def sweep_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The sweep's rows as a table: the swept parameters, then the run's figures."""
    head = ["rate", "block_size", "preemption"] if result["sweep"] == "preemption" else [result["sweep"]]
    rows = [
        [number(r[h], 4) for h in head] + [fmt(r[k] / 1e9 if k == "swapped_bytes" else r[k]) for _, k, fmt in FIGURES]
        for r in result["rows"]
    ]
    return [tr(SWEPT[h]) for h in head] + [tr(title) for title, _, _ in FIGURES], rows


def recovery_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Per block size: swap out + in, swap in alone and recompute, in ms, and which is faster."""
    header = [tr("block size"), tr("swap ms"), tr("swap in ms"), tr("recompute ms"), tr("faster")]
    return header, [
        [
            str(r["block_size"]),
            f"{1e3 * r['swap_s']:.2f}",
            f"{1e3 * r['swap_in_s']:.2f}",
            f"{1e3 * r['recompute_s']:.2f}",
            tr(r["faster"]),
        ]
        for r in result["per_block_size"]
    ]


def series_figure(title: str, y_label: str) -> tuple[figure, ColumnDataSource, ColumnDataSource]:
    """A categorical-x figure with one line per series and a dot per point; series that
    coincide stay apart by dash and marker, the legend sits under the plot."""
    lines = ColumnDataSource({k: [] for k in SERIES})
    dots = ColumnDataSource({"x": [], "y": [], "label": [], "color": [], "marker": []})
    fig = figure(
        title=title,
        x_range=FactorRange(),
        height=300,
        sizing_mode="stretch_width",
        min_width=300,
        tools="save",
        y_axis_label=y_label,
    )
    fig.multi_line("xs", "ys", source=lines, color="color", line_width=2, line_dash="dash")
    points = fig.scatter(
        "x", "y", source=dots, color="color", marker="marker", size=9, fill_alpha=0.4, legend_field="label"
    )
    fig.add_tools(HoverTool(renderers=[points], tooltips=[("", "@label"), ("x", "@x"), (y_label, "@y{0,0.[000]}")]))
    legend_below(fig)
    fig.y_range.start = 0
    return fig, lines, dots


def show_series(
    fig: figure,
    lines: ColumnDataSource,
    dots: ColumnDataSource,
    series: list[tuple[str, list[str], list[float]]],
    x_label: str,
) -> None:
    """Draw the series (label, xs, ys) each; the x axis and a point's hover say `x_label`."""
    fig.xaxis.axis_label = x_label
    hover = fig.select_one(HoverTool)
    hover.tooltips = [hover.tooltips[0], (x_label, "@x"), *hover.tooltips[2:]]
    colors = [Category10_10[i % 10] for i in range(len(series))]
    markers = [MARKERS[i % len(MARKERS)] for i in range(len(series))]
    fig.x_range.factors = list(dict.fromkeys(x for _, xs, _ in series for x in xs))
    lines.data = {
        "xs": [xs for _, xs, _ in series],
        "ys": [ys for _, _, ys in series],
        "label": [label for label, _, _ in series],
        "color": colors,
        "dash": [DASHES[i % len(DASHES)] for i in range(len(series))],
    }
    dots.data = {
        "x": [x for _, xs, _ in series for x in xs],
        "y": [y for _, _, ys in series for y in ys],
        "label": [label for label, xs, _ in series for _ in xs],
        "color": [c for (_, xs, _), c in zip(series, colors) for _ in xs],
        "marker": [m for (_, xs, _), m in zip(series, markers) for _ in xs],
    }


class SweepView(LabView):
    labs = ("sweep",)

    def __init__(self) -> None:
        super().__init__()
        self.throughput = series_figure(tr("throughput (tokens/s)"), tr("tokens/s"))
        self.preemptions = series_figure(tr("preemptions"), tr("preemptions"))
        self.scenario = plain(css_class="kv-sweep-scenario")
        self.table = TextTable("sweep-table", "kv-sweep-table")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            pn.Row(self.throughput[0], self.preemptions[0], sizing_mode="stretch_width"),
            self.scenario,
            self.table.pane,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        rows, swept = result["rows"], result["sweep"]
        if swept == "preemption":
            keys = list(dict.fromkeys((r["preemption"], r["block_size"]) for r in rows))
            groups = [
                (f"{mode}, {tr('block')} {bs}", [r for r in rows if (r["preemption"], r["block_size"]) == (mode, bs)])
                for mode, bs in keys
            ]
            x_of = lambda r: f"{r['rate']:.3g}"  # noqa: E731
        else:
            groups = [(tr("paged"), rows)]
            x_of = lambda r: str(r[swept])  # noqa: E731
        x_label = tr(SWEPT["rate" if swept == "preemption" else swept])
        for (fig, lines, dots), key in ((self.throughput, "throughput_tok_s"), (self.preemptions, "preemptions")):
            show_series(
                fig, lines, dots, [(label, [x_of(r) for r in g], [r[key] for r in g]) for label, g in groups], x_label
            )
        s = result["scenario"]
        self.scenario.text = f"{tr('scenario')} {s['name']}: {tr(s['about'])}"
        self.table.show(*sweep_table(result))


class RecoveryView(LabView):
    labs = ("recovery",)

    def __init__(self) -> None:
        super().__init__()
        self.by_block = series_figure(tr("bringing back one request: swap (out + in) vs recompute"), tr("seconds"))
        self.by_gpu = ColumnDataSource({"gpu": [], "swap": [], "recompute": []}, name="recovery-by-gpu")
        self.gpus = figure(
            title=tr("per GPU, blocks of 16: swap (left) vs recompute (right)"),
            x_range=FactorRange(),
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            tools="save",
            y_axis_label=tr("seconds"),
        )
        swap = self.gpus.vbar(
            x=dodge("gpu", -0.17, range=self.gpus.x_range),
            top="swap",
            width=0.3,
            source=self.by_gpu,
            color=Category10_10[0],
        )
        recompute = self.gpus.vbar(
            x=dodge("gpu", 0.17, range=self.gpus.x_range),
            top="recompute",
            width=0.3,
            source=self.by_gpu,
            color=Category10_10[1],
        )
        self.gpus.add_tools(
            HoverTool(
                tooltips=[
                    ("GPU", "@gpu"),
                    (tr("swap"), "@swap{0.000000} s"),
                    (tr("recompute"), "@recompute{0.000000} s"),
                ]
            )
        )
        legend_below(
            self.gpus,
            [LegendItem(label=tr("swap"), renderers=[swap]), LegendItem(label=tr("recompute"), renderers=[recompute])],
        )
        self.gpus.y_range.start = 0
        self.about = plain(css_class="kv-recovery-about")
        self.table = TextTable("recovery-table", "kv-recovery-table")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            pn.Row(self.by_block[0], self.gpus, sizing_mode="stretch_width"),
            self.about,
            self.table.pane,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        rows = result["per_block_size"]
        xs = [str(r["block_size"]) for r in rows]
        show_series(
            *self.by_block,
            [(tr("swap"), xs, [r["swap_s"] for r in rows]), (tr("recompute"), xs, [r["recompute_s"] for r in rows])],
            tr("block size (tokens)"),
        )
        sixteen = [
            (g["gpu"], next(r for r in g["rows"] if r["block_size"] == 16)) for g in result["by_gpu"] if g["fits"]
        ]
        self.gpus.x_range.factors = [g for g, _ in sixteen]
        self.by_gpu.data = {
            "gpu": [g for g, _ in sixteen],
            "swap": [r["swap_s"] for _, r in sixteen],
            "recompute": [r["recompute_s"] for _, r in sixteen],
        }
        self.about.text = (
            f"{tr('KV of the request')}: {result['kv_bytes'] / 1e9:.3f} GB; {tr('host link')} "
            f"{result['link_bandwidth'] / 1e9:g} GB/s, {result['copies_per_block']} "
            f"{tr('copy per block' if result['copies_per_block'] == 1 else 'copies per block')} "
            f"({result['units']})"
        )
        self.table.show(*recovery_table(result))
