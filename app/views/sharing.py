"""View of the `parallel-sampling` and `beam-search` labs: sharing blocks through fork.

The block map shows every sequence's table and the pool, shared blocks in grey with their
reference count, copy-on-write as it happens (the shared block and the writer's copy are
outlined and tagged). A curve gives blocks in use against what private block tables would hold, step by
step; bars set the measured saving beside the block-free estimate, and the text says where
the difference goes: the prompt's partly filled last block, copied once per extra sequence.
Beam search also draws its lineage tree (the trace's `lineage`): one node per beam per step,
in its sequence's colour (the colour of the blocks only it holds), solid where a beam goes
on in its own sequence, dashed where it forks, a cross where it is freed; the nodes of the
step shown are labelled with the blocks they hold (xN: shared by N tables).
"""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import CDSView, ColumnDataSource, GroupFilter, HoverTool, LabelSet, Legend, LegendItem, Range1d, Span
from bokeh.core.properties import value
from bokeh.plotting import figure

from app.i18n import tr, yes_no
from app.view import columns, percent
from app.views.block_tables import BlockTraceView, describe_events, map_key, owner_color
from kvweb.lab import Lab

NODE = ("x", "y", "seq", "text", "score", "kind", "fate", "fate_text", "blocks", "color", "alpha", "note")


class LineageTree:
    """The beams' tree over steps; `show(step)` draws the steps up to `step`, labels its nodes
    with the blocks they hold and fades the later ones. Sources `beam-nodes`, `beam-edges`."""

    def __init__(self) -> None:
        self.nodes = ColumnDataSource(columns(*NODE), name="beam-nodes")
        self.edges = ColumnDataSource(columns("x0", "y0", "x1", "y1", "kind", "color", "alpha"), name="beam-edges")
        self.lineage: list[dict] = []
        self.figure = figure(
            title=tr("beam lineage over steps"),
            height=260,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,reset,save",
            toolbar_location="above",
            x_axis_label=tr("step"),
            visible=False,
            x_range=Range1d(-0.5, 1),
            y_range=Range1d(-1, 0.6),
        )
        self.figure.yaxis.visible = False
        self.figure.ygrid.visible = False
        items = []
        for kind, dash, label in (
            ("survive", "solid", tr("goes on in its own sequence")),
            ("fork", "dashed", tr("forks: shares the parent's blocks")),
        ):
            view = CDSView(filter=GroupFilter(column_name="kind", group=kind))
            r = self.figure.segment(
                "x0",
                "y0",
                "x1",
                "y1",
                source=self.edges,
                view=view,
                line_color="color",
                line_alpha="alpha",
                line_width=2,
                line_dash=dash,
            )
            items.append(LegendItem(label=label, renderers=[r]))
        circles = self.figure.scatter(
            "x",
            "y",
            source=self.nodes,
            size=20,
            fill_color="color",
            fill_alpha=0.25,
            line_color="color",
            line_width=2,
            alpha="alpha",
        )
        freed = self.figure.scatter(
            "x",
            "y",
            source=self.nodes,
            view=CDSView(filter=GroupFilter(column_name="fate", group="freed")),
            marker="x",
            size=24,
            line_color="#d62728",
            line_width=3,
            alpha="alpha",
        )
        final = self.figure.scatter(
            "x",
            "y",
            source=self.nodes,
            view=CDSView(filter=GroupFilter(column_name="fate", group="final")),
            marker="circle",
            size=28,
            fill_alpha=0,
            line_color="#111111",
            line_width=2,
            alpha="alpha",
        )
        items += [
            LegendItem(label=tr("freed: nobody extends it"), renderers=[freed]),
            LegendItem(label=tr("final beam"), renderers=[final]),
        ]
        self.figure.add_layout(
            LabelSet(
                x="x",
                y="y",
                text="text",
                source=self.nodes,
                text_align="center",
                text_baseline="middle",
                text_font=value("monospace"),
                text_font_size="12px",
                text_font_style="bold",
                text_alpha="alpha",
            )
        )
        self.figure.add_layout(
            LabelSet(
                x="x",
                y="y",
                text="note",
                source=self.nodes,
                x_offset=16,
                text_baseline="middle",
                text_font_size="10px",
                background_fill_color="white",
                background_fill_alpha=0.85,
            )
        )
        self.figure.add_layout(
            Legend(items=items, orientation="vertical", click_policy="hide", label_text_font_size="10px"), "below"
        )
        self.figure.add_tools(
            HoverTool(
                renderers=[circles],
                tooltips=[
                    (tr("step"), "@x"),
                    (tr("seq"), "@seq"),
                    (tr("new character"), "'@text'"),
                    (tr("log-probability"), "@score{0.000}"),
                    (tr("how it came"), "@kind"),
                    (tr("next"), "@fate_text"),
                    (tr("blocks it holds"), "@blocks"),
                ],
            )
        )
        self.now = Span(location=0, dimension="height", line_color="#555555", line_dash="dashed")
        self.figure.add_layout(self.now)

    def reset(self, lineage: list[dict]) -> None:
        """Lay out the whole tree once; `show` then changes only the fading and the labels."""
        self.lineage = lineage
        self.figure.visible = bool(lineage)
        nodes, edges = columns(*NODE), columns("x0", "y0", "x1", "y1", "kind", "color", "alpha")
        for n in lineage:
            for key, item in zip(
                NODE,
                (
                    n["step"],
                    -n["rank"],
                    n["seq"],
                    n["text"],
                    n["score"],
                    tr(n["kind"]),
                    n["fate"],
                    tr(n["fate"]),
                    " ".join(map(str, n["blocks"])),
                    owner_color(n["seq"]),
                    1.0,
                    "",
                ),
            ):
                nodes[key].append(item)
            if n["parent_rank"] is not None:
                for key, value in zip(
                    edges,
                    (n["step"] - 1, -n["parent_rank"], n["step"], -n["rank"], n["kind"], owner_color(n["seq"]), 1.0),
                ):
                    edges[key].append(value)
        self.nodes.data, self.edges.data = nodes, edges
        if lineage:
            steps, width = max(n["step"] for n in lineage), max(n["rank"] for n in lineage) + 1
            self.figure.x_range.start, self.figure.x_range.end = -0.5, steps + 2.5
            self.figure.y_range.start, self.figure.y_range.end = -width + 0.4, 0.6
            self.figure.height = 210 + 34 * width

    def show(self, step: int, ref_counts: dict[int, int]) -> None:
        """The tree up to `step` (later nodes faded); its nodes labelled with their blocks
        (xN: shared by N block tables)."""
        alpha = [1.0 if n["step"] <= step else 0.12 for n in self.lineage]
        notes = [
            f"{tr('seq')} {n['seq']}: {tr('blocks')} "
            + " ".join(f"{b}" + (f"(x{ref_counts[b]})" if ref_counts.get(b, 1) > 1 else "") for b in n["blocks"])
            if n["step"] == step
            else ""
            for n in self.lineage
        ]
        self.nodes.data.update(alpha=alpha, note=notes)
        self.edges.data.update(alpha=[a for a, n in zip(alpha, self.lineage) if n["parent_rank"] is not None])
        self.now.location = step


class SharingView(BlockTraceView):
    labs = ("parallel-sampling", "beam-search")

    def __init__(self) -> None:
        super().__init__("sharing", tr("block tables -> physical blocks"))
        self.memory = ColumnDataSource({"step": [], "shared": [], "unshared": []}, name="sharing-memory")
        self.curve = figure(
            title=tr("blocks in use: shared vs private block tables"),
            height=260,
            sizing_mode="stretch_width",
            min_width=300,
            tools="save",
            toolbar_location="above",
            x_axis_label=tr("step"),
            y_axis_label=tr("blocks"),
        )
        steps = [
            self.curve.step(
                "step",
                "unshared",
                source=self.memory,
                mode="after",
                line_width=2,
                color="#d62728",
                legend_label=tr("without sharing"),
            ),
            self.curve.step(
                "step",
                "shared",
                source=self.memory,
                mode="after",
                line_width=2,
                color="#1f77b4",
                legend_label=tr("with fork + copy-on-write"),
            ),
        ]
        self.curve.add_tools(
            HoverTool(
                renderers=steps[:1],
                mode="vline",
                tooltips=[
                    (tr("step"), "@step"),
                    (tr("with fork + copy-on-write"), "@shared"),
                    (tr("without sharing"), "@unshared"),
                ],
            )
        )
        self.curve.legend.label_text_font_size = "10px"
        self.curve.add_layout(self.curve.legend[0], "below")  # outside the plot: it covers no step
        self.curve.y_range.start = 0
        self.now = Span(location=0, dimension="height", line_color="#555555", line_dash="dashed")
        self.curve.add_layout(self.now)
        self.savings = ColumnDataSource({"what": [], "saving": [], "color": []}, name="sharing-savings")
        self.bars = figure(
            title=tr("memory saved"),
            height=260,
            sizing_mode="stretch_width",
            min_width=300,
            max_width=560,
            tools="save",
            toolbar_location="above",
            x_range=[""],
            y_axis_label=tr("fraction of blocks saved"),
        )
        saved = self.bars.vbar(x="what", top="saving", width=0.6, color="color", source=self.savings)
        self.bars.add_tools(
            HoverTool(renderers=[saved], tooltips=[("", "@what"), (tr("memory saved"), "@saving{0.0 %}")])
        )
        self.bars.y_range.start = 0
        self.tree = LineageTree()

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            self.player,
            self.step_text,
            self.map.figure,
            self.tree.figure,
            pn.Row(self.curve, self.bars, sizing_mode="stretch_width"),
            self.texts,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        self.steps = result["steps"]
        self.map.reset(self.steps, result["num_blocks"], result["block_size"])
        self.tree.reset(result.get("lineage", []))
        self.memory.data = {
            "step": [s["step"] for s in self.steps],
            "shared": [s["used_blocks"] for s in self.steps],
            "unshared": [s["unshared_blocks"] for s in self.steps],
        }
        if lab.lab_name == "parallel-sampling":
            bars = [
                (tr("estimate (no blocks)"), result["estimate"], "#aaaaaa"),
                (tr("measured"), result["saving"], "#1f77b4"),
            ]
            self.summary.text = self._parallel_summary(lab, result)
            self.texts.text = f"{tr('prompt')}: {result['prompt']}\n" + "\n".join(
                f"{tr('answer')} {i} ({tr('seed')} {lab.seed + i}): {a}" for i, a in enumerate(result["answers"])
            )
        else:
            bars = [
                (tr("time-averaged"), result["saving_mean"], "#1f77b4"),
                (tr("at the peak"), result["saving_peak"], "#2ca02c"),
            ]
            self.summary.text = self._beam_summary(result)
            self.texts.text = f"{tr('prompt')}: {result['prompt']}\n" + "\n".join(
                f"{tr('beam')} {i} ({tr('log-probability')} {b['score']:.3f}): {b['text']}"
                for i, b in enumerate(result["beams"])
            )
        self.summary.text += f"\n{map_key()}"
        self.bars.x_range.factors = [what for what, _, _ in bars]
        self.savings.data = {k: [bar[i] for bar in bars] for i, k in enumerate(("what", "saving", "color"))}
        self.set_steps(len(self.steps))

    def show_step(self, index: int) -> None:
        step = self.draw(index)
        if step is None:
            return
        self.now.location = step["step"]
        self.tree.show(step["step"], {b["block"]: b["ref_count"] for b in step["blocks"]})
        shared = [b for b in step["blocks"] if b["ref_count"] > 1]
        held = ", ".join(f"{b['block']} x{b['ref_count']}" for b in shared) or tr("none")
        self.step_text.text = "\n".join(
            [
                f"{tr('step')} {step['step']}: {step['used_blocks']} {tr('blocks in use')}, "
                f"{step['unshared_blocks']} {tr('without sharing')}; {tr('shared blocks')}: {held}",
                *describe_events(step["events"]),
            ]
        )

    @staticmethod
    def _parallel_summary(lab: Lab, result: dict[str, Any]) -> str:
        fill, copies = result["prompt_last_block_fill"], result["copies"]
        why = (
            f"{tr('the prompt fills')} {result['prompt_blocks']} {tr('blocks')}; {tr('its last block holds only')} "
            f"{fill}/{result['block_size']} {tr('rows, so each answer that writes into it while it is shared copies it')}: "
            f"{copies} {tr('copies, one per extra sequence')}"
            if fill
            else tr("the prompt ends on a block edge: nothing is copied, and the saving is the estimate")
        )
        return (
            f"{tr('identical to each seed generated alone')}: {yes_no(result['identical'])}\n"
            f"{tr('blocks with sharing')}: {result['blocks_shared']}, {tr('without')}: {result['blocks_unshared']}; "
            f"{tr('saving')} {percent(result['saving'])} {tr('against the block-free estimate')} "
            f"(n-1)Lp/(n(Lp+Lo)) = {percent(result['estimate'])}\n{why}"
        )

    @staticmethod
    def _beam_summary(result: dict[str, Any]) -> str:
        sweep = ", ".join(
            f"{s['width']}: {percent(s['saving_mean'])} / {percent(s['saving_peak'])}" for s in result["sweep"]
        )
        memory = result["memory"]
        shared, unshared = (max(memory, key=lambda m: m[k]) for k in ("shared", "unshared"))
        return (
            f"{tr('identical to a beam search recomputing from scratch')}: {tr('yes' if result['identical'] else 'no')}\n"
            f"{tr('memory saved')}: {percent(result['saving_mean'])} {tr('time-averaged')}, "
            f"{percent(result['saving_peak'])} {tr('at the peak')}\n"
            f"{tr('at the peak')}: {shared['shared']} {tr('blocks with sharing')} ({tr('step')} {shared['step']}) "
            f"{tr('against')} {unshared['unshared']} {tr('without')} ({tr('step')} {unshared['step']}), "
            + tr(
                "the pool a server must reserve; time-averaged: the blocks held, summed over every step. The share "
                "saved changes from step to step (least just after the beams start new blocks of their own), so "
                "the two differ"
            )
            + "\n"
            f"{tr('by width (time-averaged / peak)')}: {sweep}"
        )
