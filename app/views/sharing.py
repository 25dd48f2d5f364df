"""View of the `parallel-sampling` and `beam-search` labs: sharing blocks through fork.

The block map shows every sequence's table and the pool, shared blocks in grey with their
reference count, copy-on-write as it happens (the shared block and the writer's copy are
outlined and tagged). A curve gives blocks in use against what private block tables would hold, step by
step; bars set the measured saving beside the block-free estimate, and the text says where
the difference goes: the prompt's partly filled last block, copied once per extra sequence.
"""
from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, Span
from bokeh.plotting import figure

from app.i18n import tr
from app.views.block_tables import BlockTraceView, describe_events
from kvweb.lab import Lab


class SharingView(BlockTraceView):
    labs = ("parallel-sampling", "beam-search")

    def __init__(self) -> None:
        super().__init__("sharing", tr("block tables -> physical blocks (grey xN: shared by N tables; "
                                       "outlined: taken or copied this step)"))
        self.memory = ColumnDataSource({"step": [], "shared": [], "unshared": []}, name="sharing-memory")
        self.curve = figure(title=tr("blocks in use: shared vs private block tables"), height=230, width=420,
                            tools="save", toolbar_location="above", x_axis_label=tr("step"),
                            y_axis_label=tr("blocks"))
        self.curve.step("step", "unshared", source=self.memory, mode="after", line_width=2, color="#d62728",
                        legend_label=tr("without sharing"))
        self.curve.step("step", "shared", source=self.memory, mode="after", line_width=2, color="#1f77b4",
                        legend_label=tr("with fork + copy-on-write"))
        self.curve.legend.location = "top_left"
        self.curve.y_range.start = 0
        self.now = Span(location=0, dimension="height", line_color="#555555", line_dash="dashed")
        self.curve.add_layout(self.now)
        self.savings = ColumnDataSource({"what": [], "saving": [], "color": []}, name="sharing-savings")
        self.bars = figure(title=tr("memory saved"), height=230, width=420, tools="save", toolbar_location="above",
                           x_range=[""], y_axis_label=tr("fraction of blocks saved"))
        self.bars.vbar(x="what", top="saving", width=0.6, color="color", source=self.savings)
        self.bars.y_range.start = 0

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(self.summary, self.player, self.step_text, self.map.figure,
                         pn.Row(self.curve, self.bars, sizing_mode="stretch_width"), self.texts,
                         sizing_mode="stretch_width")

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        self.steps = result["steps"]
        self.map.reset(self.steps, result["num_blocks"], result["block_size"])
        self.memory.data = {"step": [s["step"] for s in self.steps], "shared": [s["used_blocks"] for s in self.steps],
                            "unshared": [s["unshared_blocks"] for s in self.steps]}
        if lab.lab_name == "parallel-sampling":
            bars = [(tr("estimate (no blocks)"), result["estimate"], "#aaaaaa"),
                    (tr("measured"), result["saving"], "#1f77b4")]
            self.summary.text = self._parallel_summary(lab, result)
            self.texts.text = f"{tr('prompt')}: {result['prompt']}\n" + "\n".join(
                f"{tr('answer')} {i} ({tr('seed')} {lab.seed + i}): {a}" for i, a in enumerate(result["answers"]))
        else:
            bars = [(tr("time-averaged"), result["saving_mean"], "#1f77b4"),
                    (tr("at the peak"), result["saving_peak"], "#2ca02c")]
            self.summary.text = self._beam_summary(result)
            self.texts.text = f"{tr('prompt')}: {result['prompt']}\n" + "\n".join(
                f"{tr('beam')} {i} ({tr('log-probability')} {b['score']:.3f}): {b['text']}"
                for i, b in enumerate(result["beams"]))
        self.bars.x_range.factors = [what for what, _, _ in bars]
        self.savings.data = {k: [bar[i] for bar in bars] for i, k in enumerate(("what", "saving", "color"))}
        self.set_steps(len(self.steps))

    def show_step(self, index: int) -> None:
        step = self.draw(index)
        if step is None:
            return
        self.now.location = step["step"]
        shared = [b for b in step["blocks"] if b["ref_count"] > 1]
        held = ", ".join(f"{b['block']} x{b['ref_count']}" for b in shared) or tr("none")
        self.step_text.text = "\n".join([
            f"{tr('step')} {step['step']}: {step['used_blocks']} {tr('blocks in use')}, "
            f"{step['unshared_blocks']} {tr('without sharing')}; {tr('shared blocks')}: {held}",
            *describe_events(step["events"]),
        ])

    @staticmethod
    def _parallel_summary(lab: Lab, result: dict[str, Any]) -> str:
        fill, copies = result["prompt_last_block_fill"], result["copies"]
        why = (f"{tr('the prompt fills')} {result['prompt_blocks']} {tr('blocks')}; {tr('its last block holds only')} "
               f"{fill}/{result['block_size']} {tr('rows, so each answer that writes into it while it is shared copies it')}: "
               f"{copies} {tr('copies, one per extra sequence')}" if fill else
               tr("the prompt ends on a block edge: nothing is copied, and the saving is the estimate"))
        return (
            f"{tr('identical to each seed generated alone')}: {result['identical']}\n"
            f"{tr('blocks with sharing')}: {result['blocks_shared']}, {tr('without')}: {result['blocks_unshared']}; "
            f"{tr('saving')} {result['saving']:.1%} {tr('against the block-free estimate')} "
            f"(n-1)Lp/(n(Lp+Lo)) = {result['estimate']:.1%}\n{why}"
        )

    @staticmethod
    def _beam_summary(result: dict[str, Any]) -> str:
        sweep = ", ".join(f"{s['width']}: {s['saving_mean']:.0%} / {s['saving_peak']:.0%}" for s in result["sweep"])
        return (
            f"{tr('identical to a beam search recomputing from scratch')}: {result['identical']}\n"
            f"{tr('memory saved')}: {result['saving_mean']:.1%} {tr('time-averaged')}, "
            f"{result['saving_peak']:.1%} {tr('at the peak')}\n"
            f"{tr('by width (time-averaged / peak)')}: {sweep}"
        )
