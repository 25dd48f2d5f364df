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
from app.view import LabView
from app.views.engine import legend_below
from kvweb.lab import Lab

SERIES = ("xs", "ys", "label", "color", "dash")
DASHES = ("solid", "dashed", "dotted", "dashdot")
MARKERS = ("circle", "square", "triangle", "diamond", "inverted_triangle", "hex")


def series_figure(title: str, y_label: str) -> tuple[figure, ColumnDataSource, ColumnDataSource]:
    """A categorical-x figure with one line per series and a dot per point; series that
    coincide stay apart by dash and marker, the legend sits under the plot."""
    lines = ColumnDataSource({k: [] for k in SERIES})
    dots = ColumnDataSource({"x": [], "y": [], "label": [], "color": [], "marker": []})
    fig = figure(title=title, x_range=FactorRange(), height=300, sizing_mode="stretch_width",
                 tools="save", y_axis_label=y_label)
    fig.multi_line("xs", "ys", source=lines, color="color", line_width=2, line_dash="dash")
    points = fig.scatter("x", "y", source=dots, color="color", marker="marker", size=9, fill_alpha=0.4,
                         legend_field="label")
    fig.add_tools(HoverTool(renderers=[points], tooltips=[("", "@label"), ("x", "@x"), (y_label, "@y{0,0.[000]}")]))
    legend_below(fig)
    fig.y_range.start = 0
    return fig, lines, dots


def show_series(fig: figure, lines: ColumnDataSource, dots: ColumnDataSource,
                series: list[tuple[str, list[str], list[float]]]) -> None:
    colors = [Category10_10[i % 10] for i in range(len(series))]
    markers = [MARKERS[i % len(MARKERS)] for i in range(len(series))]
    fig.x_range.factors = list(dict.fromkeys(x for _, xs, _ in series for x in xs))
    lines.data = {"xs": [xs for _, xs, _ in series], "ys": [ys for _, _, ys in series],
                  "label": [label for label, _, _ in series], "color": colors,
                  "dash": [DASHES[i % len(DASHES)] for i in range(len(series))]}
    dots.data = {"x": [x for _, xs, _ in series for x in xs], "y": [y for _, _, ys in series for y in ys],
                 "label": [label for label, xs, _ in series for _ in xs],
                 "color": [c for (_, xs, _), c in zip(series, colors) for _ in xs],
                 "marker": [m for (_, xs, _), m in zip(series, markers) for _ in xs]}


class SweepView(LabView):
    labs = ("sweep",)

    def __init__(self) -> None:
        super().__init__()
        self.throughput = series_figure(tr("throughput (tokens/s)"), tr("tokens/s"))
        self.preemptions = series_figure(tr("preemptions"), tr("preemptions"))
        self.table = plain(css_class="kv-sweep-table", mono=True)

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(pn.Row(self.throughput[0], self.preemptions[0], sizing_mode="stretch_width"),
                         self.table, sizing_mode="stretch_width")

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        rows, swept = result["rows"], result["sweep"]
        if swept == "preemption":
            keys = list(dict.fromkeys((r["preemption"], r["block_size"]) for r in rows))
            groups = [(f"{mode}, {tr('block')} {bs}", [r for r in rows if (r["preemption"], r["block_size"]) == (mode, bs)])
                      for mode, bs in keys]
            x_of = lambda r: f"{r['rate']:.3g}"  # noqa: E731
        else:
            groups = [(tr("paged"), rows)]
            x_of = lambda r: str(r[swept])  # noqa: E731
        for (fig, lines, dots), key in ((self.throughput, "throughput_tok_s"), (self.preemptions, "preemptions")):
            fig.xaxis.axis_label = tr("arrival rate (requests/s)") if swept == "preemption" else swept
            show_series(fig, lines, dots, [(label, [x_of(r) for r in g], [r[key] for r in g]) for label, g in groups])
        head = ["rate", "block_size", "preemption"] if swept == "preemption" else [swept]
        cols = [(tr("tok/s"), "throughput_tok_s", "{:.0f}"), ("SLO", "slo_attainment", "{:.1%}"),
                (tr("batch"), "mean_batch", "{:.1f}"), (tr("KV/occ"), "utilisation", "{:.1%}"),
                (tr("preempt"), "preemptions", "{}"), (tr("recomp"), "recomputed_tokens", "{}"),
                (tr("swap GB"), "swapped_bytes", "{:.1f}")]
        lines = ["".join(f"{h:>12}" for h in head) + "".join(f"{c:>10}" for c, _, _ in cols)]
        for r in rows:
            lines.append("".join(f"{r[h]:>12.4g}" if isinstance(r[h], float) else f"{r[h]:>12}" for h in head)
                         + "".join(f"{fmt.format(r[k] / 1e9 if k == 'swapped_bytes' else r[k]):>10}"
                                   for _, k, fmt in cols))
        s = result["scenario"]
        self.table.text = f"{tr('scenario')} {s['name']}: {s['about']}\n" + "\n".join(lines)


class RecoveryView(LabView):
    labs = ("recovery",)

    def __init__(self) -> None:
        super().__init__()
        self.by_block = series_figure(tr("bringing back one request: swap (out + in) vs recompute"), tr("seconds"))
        self.by_gpu = ColumnDataSource({"gpu": [], "swap": [], "recompute": []}, name="recovery-by-gpu")
        self.gpus = figure(title=tr("per GPU, blocks of 16: swap (left) vs recompute (right)"), x_range=FactorRange(),
                           height=300, sizing_mode="stretch_width", tools="save", y_axis_label=tr("seconds"))
        swap = self.gpus.vbar(x=dodge("gpu", -0.17, range=self.gpus.x_range), top="swap", width=0.3,
                              source=self.by_gpu, color=Category10_10[0])
        recompute = self.gpus.vbar(x=dodge("gpu", 0.17, range=self.gpus.x_range), top="recompute", width=0.3,
                                   source=self.by_gpu, color=Category10_10[1])
        self.gpus.add_tools(HoverTool(tooltips=[("GPU", "@gpu"), (tr("swap"), "@swap{0.000000} s"),
                                                (tr("recompute"), "@recompute{0.000000} s")]))
        legend_below(self.gpus, [LegendItem(label=tr("swap"), renderers=[swap]),
                                 LegendItem(label=tr("recompute"), renderers=[recompute])])
        self.gpus.y_range.start = 0
        self.table = plain(css_class="kv-recovery-table", mono=True)

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(pn.Row(self.by_block[0], self.gpus, sizing_mode="stretch_width"), self.table,
                         sizing_mode="stretch_width")

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        rows = result["per_block_size"]
        xs = [str(r["block_size"]) for r in rows]
        self.by_block[0].xaxis.axis_label = tr("block size (tokens)")
        show_series(*self.by_block, [(tr("swap"), xs, [r["swap_s"] for r in rows]),
                                     (tr("recompute"), xs, [r["recompute_s"] for r in rows])])
        sixteen = [(g["gpu"], next(r for r in g["rows"] if r["block_size"] == 16)) for g in result["by_gpu"] if g["fits"]]
        self.gpus.x_range.factors = [g for g, _ in sixteen]
        self.by_gpu.data = {"gpu": [g for g, _ in sixteen], "swap": [r["swap_s"] for _, r in sixteen],
                            "recompute": [r["recompute_s"] for _, r in sixteen]}
        lines = [f"{tr('KV of the request')}: {result['kv_bytes'] / 1e9:.3f} GB; {tr('host link')} "
                 f"{result['link_bandwidth'] / 1e9:g} GB/s, {result['copies_per_block']} {tr('copies per block')} "
                 f"({result['units']})",
                 f"{tr('block'):>8}{tr('swap ms'):>12}{tr('swap in ms'):>12}{tr('recompute ms'):>14}  {tr('faster')}"]
        lines += [f"{r['block_size']:>8}{1e3 * r['swap_s']:>12.2f}{1e3 * r['swap_in_s']:>12.2f}"
                  f"{1e3 * r['recompute_s']:>14.2f}  {tr(r['faster'])}" for r in rows]
        self.table.text = "\n".join(lines)
