"""View of the `roofline` lab: one GPU's roofline with prefill and decode on it, the step times
split into roofline and all-reduce (tensor parallelism), swap vs recompute, and the figures."""

from __future__ import annotations

from typing import Any

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, HoverTool, LabelSet
from bokeh.plotting import figure

from app.i18n import tr
from app.text import plain
from app.view import Explainer, LabView, TextTable
from kvweb.jsonable import number
from kvweb.lab import Lab

INTENSITIES = np.logspace(-1, 4, 120)

FIGURES = [  # (result key, label, unit divisor, unit)
    ("tp", "tensor parallelism", 1, "GPUs"),
    ("kv_bytes_per_token_total", "KV per token, all GPUs", 1024, "KiB"),
    ("kv_bytes_per_token_per_gpu", "KV per token, one GPU", 1024, "KiB"),
    ("weight_bytes_total", "weights, all GPUs", 1e9, "GB"),
    ("weight_bytes_per_gpu", "weights, one GPU", 1e9, "GB"),
    ("kv_bytes_free_per_gpu", "memory left for KV, one GPU", 1e9, "GB"),
    ("kv_capacity_tokens", "KV capacity", 1, "tokens"),
    ("kv_capacity_blocks", "KV capacity", 1, "blocks"),
    ("prefill_s", "prefill of N tokens", 1e-3, "ms"),
    ("prefill_allreduce_s", "of which all-reduce", 1e-3, "ms"),
    ("decode_step_s", "one decode step", 1e-3, "ms"),
    ("decode_allreduce_s", "of which all-reduce", 1e-3, "ms"),
    ("decode_tokens_per_s", "decode throughput", 1, "tokens/s"),
    ("swap_roundtrip_s", "swap out + in of N tokens", 1e-3, "ms"),
    ("recompute_s", "recompute N tokens", 1e-3, "ms"),
]


def figure_value(result: dict[str, Any], key: str) -> tuple[float, bool]:
    """A figure and whether it is a what-if (the lab names such a figure `KEY_what_if`)."""
    return (result[key], False) if key in result else (result[f"{key}_what_if"], True)


def figures_table(result: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The lab's figures, one a row: what (unit), value; a what-if says so."""
    rows = []
    for key, label, div, unit in FIGURES:
        value, what_if = figure_value(result, key)
        rows.append([f"{tr(label)}{', ' + tr('what-if') if what_if else ''} ({tr(unit)})", number(value / div, 4)])
    return [tr("figure"), tr("value")], rows


class RooflineView(LabView):
    labs = ("roofline",)

    def __init__(self) -> None:
        super().__init__()
        self.roof = ColumnDataSource({"x": [], "y": []})
        self.points = ColumnDataSource({"x": [], "y": [], "name": [], "color": [], "flops": []})
        self.bars = ColumnDataSource(
            {"how": [tr("swap round trip"), tr("recompute")], "seconds": [0.0, 0.0], "color": ["#4c72b0", "#dd8452"]}
        )

        self.roofline = figure(
            title=tr("Roofline (decimal units)"),
            x_axis_type="log",
            y_axis_type="log",
            height=360,
            sizing_mode="stretch_width",
            x_axis_label=tr("arithmetic intensity (FLOP per byte)"),
            y_axis_label=tr("attainable FLOP/s"),
            tools="pan,wheel_zoom,reset,save",
        )
        self.roofline.line("x", "y", source=self.roof, line_width=3, color="#333333")
        dots = self.roofline.scatter("x", "y", source=self.points, size=14, color="color", legend_field="name")
        self.roofline.add_tools(
            HoverTool(
                renderers=[dots],
                tooltips=[
                    ("", "@name"),
                    (tr("arithmetic intensity (FLOP per byte)"), "@x{0,0.[00]}"),
                    (tr("attainable FLOP/s"), "@flops"),
                ],
            )
        )
        self.roofline.add_layout(LabelSet(x="x", y="y", text="name", source=self.points, x_offset=8, y_offset=-18))
        self.roofline.legend.location = "bottom_right"

        self.steps = ColumnDataSource(
            {"step": [tr("prefill"), tr("decode")], "roofline": [0.0, 0.0], "allreduce": [0.0, 0.0]}
        )
        self.step_times = figure(
            title=tr("Step time: roofline + all-reduce (tp GPUs)"),
            x_range=self.steps.data["step"],
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            y_axis_label=tr("ms"),
            tools="save",
        )
        self.step_times.vbar_stack(
            ["roofline", "allreduce"],
            x="step",
            width=0.6,
            source=self.steps,
            color=["#4c72b0", "#c44e52"],
            legend_label=[tr("roofline + overhead"), tr("all-reduce")],
        )
        self.step_times.add_tools(
            HoverTool(
                tooltips=[
                    ("", "@step"),
                    (tr("roofline + overhead"), "@roofline{0.000} ms"),
                    (tr("all-reduce"), "@allreduce{0.000} ms"),
                ]
            )
        )
        self.step_times.y_range.start = 0
        legend = self.step_times.legend[0]
        self.step_times.add_layout(legend, "below")  # outside the bars, also on a phone

        self.costs = figure(
            title=tr("Bringing back N tokens"),
            x_range=self.bars.data["how"],
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            y_axis_label=tr("seconds"),
            tools="save",
        )
        self.costs.vbar(x="how", top="seconds", width=0.6, color="color", source=self.bars)
        self.costs.add_tools(HoverTool(tooltips=[("", "@how"), (tr("seconds"), "@seconds{0.000000}")]))
        self.costs.y_range.start = 0
        self.note = plain(css_class="kv-roofline-note", color="#8a4b00")
        self.table = TextTable("roofline-numbers", "kv-roofline-numbers")
        self.explainer = Explainer("kv-roofline-explain")  # a headline figure's formula, one tap away

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.roofline,
            pn.Row(self.step_times, self.costs, sizing_mode="stretch_width"),
            self.note,
            self.table.pane,
            self.explainer.layout,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        roof = result["roofline"]
        self.roof.data = {"x": INTENSITIES, "y": np.minimum(roof["peak_flops_s"], INTENSITIES * roof["bandwidth_b_s"])}
        points = roof["points"]
        self.points.data = {
            "x": [p["intensity"] for p in points],
            "y": [p["attainable_flops_s"] for p in points],
            "name": [f"{tr(p['name'])} ({tr(p['bound'] + '-bound')})" for p in points],
            "color": ["#dd8452", "#4c72b0"],
            "flops": [f"{p['attainable_flops_s']:.3g}" for p in points],
        }
        self.bars.patch({"seconds": [(slice(0, 2), [result["swap_roundtrip_s"], result["recompute_s"]])]})
        allreduce = [result["prefill_allreduce_s"], figure_value(result, "decode_allreduce_s")[0]]
        total = [result["prefill_s"], figure_value(result, "decode_step_s")[0]]
        self.steps.patch(
            {
                "roofline": [(slice(0, 2), [(t - a) * 1e3 for t, a in zip(total, allreduce)])],
                "allreduce": [(slice(0, 2), [a * 1e3 for a in allreduce])],
            }
        )

        self.table.show(*figures_table(result))
        self.explainer.show(
            {key: {"": e} for key, e in lab.explain().items()},
            {key: f"{tr(label)} ({tr(unit)})" for key, label, _, unit in FIGURES},
            "kv_capacity_tokens",
        )
        self.note.visible = not result["decode_batch_fits"]
        self.note.text = tr(
            "the decode batch (batch x context tokens) does not fit the KV capacity: its figures are a what-if"
        )
