"""View of the `paged-equivalence` lab: one row per cache configuration, the contiguous cache
first, green where its tokens equal each request generated alone, with the peak K/V rows it
held (a paged store holds whole blocks: rows = blocks x block size)."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, HoverTool, LabelSet, Range1d
from bokeh.plotting import figure

from app.i18n import tr, quoted, yes_no
from app.text import plain
from app.view import LabView, TextTable
from kvweb.lab import Lab

SAME, DIFFERENT = "#2ca02c", "#d62728"


def run_label(run: dict[str, Any]) -> str:
    if run["store"] == "contiguous":
        return tr("contiguous")
    order = tr("shuffled") if run["shuffle"] else tr("in order")
    return f"{tr('paged')}, {tr('block')} {run['block_size']}, {order}"


class PagedEquivalenceView(LabView):
    labs = ("paged-equivalence",)

    def __init__(self) -> None:
        super().__init__()
        self.verdict = plain(css_class="kv-equivalence-verdict")
        self.runs = ColumnDataSource({"label": [], "peak": [], "color": [], "text": []}, name="equivalence-runs")
        self.chart = figure(
            title=tr("peak K/V rows held (green: same tokens as alone)"),
            y_range=[],
            height=340,
            sizing_mode="stretch_width",
            x_axis_label=tr("K/V rows (tokens' worth of cache)"),
            tools="save",
            x_range=Range1d(0, 1),
        )
        bars = self.chart.hbar(y="label", right="peak", height=0.7, color="color", source=self.runs)
        self.chart.add_tools(
            HoverTool(
                renderers=[bars],
                tooltips=[(tr("configuration"), "@label"), (tr("peak K/V rows"), "@peak"), (tr("result"), "@text")],
            )
        )
        # inside the bars, from their start: the shortest bar (contiguous) is long enough on a phone
        self.chart.add_layout(
            LabelSet(
                x=0,
                y="label",
                text="text",
                source=self.runs,
                x_offset=6,
                text_color="white",
                text_baseline="middle",
                text_font_size="11px",
                text_font_style="bold",
            )
        )
        self.answers = TextTable("equivalence-answers", "kv-equivalence-answers")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(pn.pane.Bokeh(self.verdict), self.chart, self.answers.pane, sizing_mode="stretch_width")

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        runs = result["runs"]
        labels = [run_label(r) for r in runs]
        self.chart.y_range.factors = labels[::-1]
        self.chart.x_range.end = 1.05 * max(r["peak_rows"] for r in runs)
        self.runs.data = {
            "label": labels,
            "peak": [r["peak_rows"] for r in runs],
            "color": [SAME if r["identical"] else DIFFERENT for r in runs],
            "text": [
                f"{tr('identical') if r['identical'] else tr('DIFFERENT')}, {r['peak_rows']} {tr('rows')}"
                + (f" = {r['peak_used_blocks']} {tr('blocks')}" if r["peak_used_blocks"] else "")
                for r in runs
            ],
        }
        self.verdict.text = (
            f"{tr('identical in every configuration')}: {yes_no(result['identical'])} "
            f"({len(runs)} {tr('runs')}, {len(result['requests'])} {tr('requests')})"
        )
        self.answers.show(
            [tr("request"), tr("arrives at iteration"), tr("prompt"), tr("answer")],
            [[f"r{q['seq']}", str(q["arrival"]), quoted(q["prompt"]), quoted(q["answer"])] for q in result["requests"]],
        )
