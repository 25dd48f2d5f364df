"""View of the `max-rate` lab: the highest rate each memory manager serves within the SLO,
and every trial of the search (rate vs SLO attainment, the target as a line)."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, LabelSet, Range1d, Span
from bokeh.palettes import Category10_4
from bokeh.plotting import figure

from app.i18n import tr
from app.text import plain
from app.view import LabView, TextTable, percent
from app.views.drawing import legend_below
from kvweb.jsonable import number
from kvweb.lab import Lab

MANAGERS = ("max", "pow2", "oracle", "paged")
COLORS = dict(zip(MANAGERS, Category10_4))
MARKERS = dict(zip(MANAGERS, ("square", "triangle", "diamond", "circle")))  # trials at one rate stay apart


def rate_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Per memory manager: the highest rate within the SLO, and how many times it paged serves."""
    rates, ratios = result["max_rate"], result["paged_over"]
    header = [tr("memory manager"), tr("max rate (requests/s)"), tr("paged's rate / this rate")]
    return header, [[m, f"{rates[m]:.3f}", f"{ratios[m]:.2f}x" if ratios.get(m) is not None else ""] for m in MANAGERS]


class MaxRateView(LabView):
    labs = ("max-rate",)

    def __init__(self) -> None:
        super().__init__()
        self.bars = ColumnDataSource(
            {"memory": list(MANAGERS), "rate": [0.0] * 4, "label": [""] * 4, "color": [COLORS[m] for m in MANAGERS]},
            name="max-rate-bars",
        )
        self.trials = ColumnDataSource(
            {k: [] for k in ("rate", "attainment", "memory", "color", "marker")}, name="max-rate-trials"
        )
        self.rates = figure(
            title=tr("highest arrival rate within the SLO (requests/s)"),
            x_range=list(MANAGERS),
            height=320,
            sizing_mode="stretch_width",
            min_width=300,
            tools="save",
            y_axis_label=tr("requests/s"),
            y_range=Range1d(0, 1),
        )
        self.rates.vbar(x="memory", top="rate", width=0.6, color="color", source=self.bars)
        self.rates.add_tools(
            HoverTool(
                tooltips=[
                    (tr("memory manager"), "@memory"),
                    (tr("highest arrival rate within the SLO (requests/s)"), "@rate{0.000}"),
                ]
            )
        )
        self.rates.add_layout(
            LabelSet(
                x="memory",
                y="rate",
                text="label",
                source=self.bars,
                text_align="center",
                y_offset=4,
                text_font_size="11px",
            )
        )
        self.search = figure(
            title=tr("every trial of the search (x: the run gave up early, below target)"),
            height=320,
            sizing_mode="stretch_width",
            min_width=300,
            tools="pan,wheel_zoom,reset,save,hover",
            x_axis_label=tr("arrival rate (requests/s)"),
            y_axis_label=tr("SLO attainment"),
            x_axis_type="log",
            tooltips=[
                (tr("memory manager"), "@memory"),
                (tr("rate"), "@rate{0.000}"),
                (tr("attainment"), "@attainment{0.0 %}"),
            ],
        )
        # labels at 1, 2, 3 and 5 of every decade: a search spans one or two decades, where a plain
        # log ticker labels only one or two points
        self.search.xaxis.ticker = FixedTicker(
            ticks=[m * 10.0**e for e in range(-3, 4) for m in (1, 2, 3, 5)],
            minor_ticks=[m * 10.0**e for e in range(-3, 4) for m in range(1, 10)],
        )
        self.search.scatter(
            "rate",
            "attainment",
            source=self.trials,
            color="color",
            marker="marker",
            size=10,
            fill_alpha=0.4,
            legend_field="memory",
        )
        legend_below(self.search)
        self.target = Span(location=0.9, dimension="width", line_dash="dashed", line_color="#444444")
        self.search.add_layout(self.target)
        self.summary = plain(css_class="kv-max-rate-summary")
        self.table = TextTable("max-rate-table", "kv-max-rate-table")
        self.paper = plain(css_class="kv-max-rate-paper")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            self.table.pane,
            self.paper,
            pn.Row(self.rates, self.search, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        rates = result["max_rate"]
        self.bars.data = {
            **self.bars.data,
            "rate": [rates[m] for m in MANAGERS],
            "label": [number(rates[m], 3) for m in MANAGERS],
        }
        self.rates.y_range.end = 1.15 * max(max(rates.values()), 1e-9)  # room for the labels above the bars
        trials = [(row["memory"], t) for row in result["managers"] for t in row["trials"]]
        trials.sort(key=lambda mt: mt[1]["slo_attainment"] is None)  # the legend draws each manager's first row
        self.trials.data = {
            "rate": [t["rate"] for _, t in trials],
            "attainment": [t["slo_attainment"] if t["slo_attainment"] is not None else 0.0 for _, t in trials],
            "memory": [m for m, _ in trials],
            "color": [COLORS[m] for m, _ in trials],
            "marker": [MARKERS[m] if t["slo_attainment"] is not None else "x" for m, t in trials],
        }
        self.target.location = result["target"]
        s = result["scenario"]
        self.summary.text = (
            f"{tr('scenario')} {s['name']}: {tr(s['about'])}\n"
            f"{tr('target')}: {percent(result['target'], 0)} {tr('of requests within the SLO')}"
        )
        self.table.show(*rate_table(result))
        self.paper.text = tr(result["paper"])
