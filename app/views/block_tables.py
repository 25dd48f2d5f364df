"""View of the `block-tables` lab: block tables growing step by step.

`BlockMap` draws one step of a PagedStore trace, as the vLLM paper draws it: on the left each
sequence's block table (logical blocks in a row), an arrow from every logical block to its
physical block, and on the right the grid of physical blocks, coloured by owner, filled to
their fill level, with the reference count when a block is shared. Every cell shows the
characters it holds (the mini model's tokens are characters; a space is drawn as a dot), so
read along a table they spell the request. The sharing view reuses it.
"""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import Arrow, ColumnDataSource, CustomJS, HoverTool, LabelSet, NormalHead, Range1d
from bokeh.palettes import Category10_10
from bokeh.core.properties import value
from bokeh.plotting import figure

from app.i18n import tr, yes_no
from app.text import LiveText, plain
from app.view import LabView, columns
from kvweb.lab import Lab

SHARED = "#7f7f7f"  # a block held by more than one block table
GAP = 0.15  # between cells
ROW = 1.3  # vertical pitch of a row of blocks


def owner_color(seq: int) -> str:
    return Category10_10[seq % len(Category10_10)]


def block_color(block: dict[str, Any]) -> str:
    return SHARED if block["ref_count"] > 1 else owner_color(block["owners"][0])


def shown_chars(text: str) -> str:
    """A block's characters as a cell shows them: spaces as dots (each row visible), at most 8."""
    text = text.replace(" ", "\u00b7").replace("\n", "\u21b5")
    return text if len(text) <= 8 else text[:7] + "\u2026"


def grid_columns(num_blocks: int) -> int:
    return 8 if num_blocks <= 64 else 16 if num_blocks <= 256 else 32


def _cell(data: dict[str, list], x: float, y: float, level: float, **values: Any) -> None:
    """Append one unit cell with its top-left corner at (x, y) and a fill bar of `level` (0..1)."""
    data["left"].append(x)
    data["right"].append(x + 1 - GAP)
    data["top"].append(y)
    data["bottom"].append(y - 1 + GAP)
    data["fill_top"].append(y - (1 - GAP) * (1 - level))
    data["cx"].append(x + (1 - GAP) / 2)
    data["cy"].append(y - (1 - GAP) * 0.62)
    for key, item in values.items():
        data[key].append(item)


CELL = ("left", "right", "top", "bottom", "fill_top", "cx", "cy", "color", "label", "text", "chars")


class BlockMap:
    """Block tables -> physical blocks, for one step of a trace. Sources are named
    `{name}-logical`, `{name}-physical`, `{name}-arrows`, `{name}-marks` (for tests)."""

    def __init__(self, name: str, title: str) -> None:
        self.logical = ColumnDataSource(columns(*CELL, "seq", "index", "block", "rows"), name=f"{name}-logical")
        self.physical = ColumnDataSource(
            columns(*CELL, "block", "owners", "ref_count", "fill"), name=f"{name}-physical"
        )
        self.arrows = ColumnDataSource(columns("x0", "y0", "x1", "y1", "color"), name=f"{name}-arrows")
        self.marks = ColumnDataSource(columns("left", "right", "top", "bottom", "tag"), name=f"{name}-marks")
        self.heads = ColumnDataSource(columns("x", "y", "text"))
        self.figure = figure(
            title=title,
            height=380,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,reset,save",
            toolbar_location="above",
            x_range=Range1d(0, 1),
            y_range=Range1d(-1, 1),
        )
        self.figure.axis.visible = False
        self.figure.grid.visible = False
        for source, alpha in ((self.logical, 0.25), (self.physical, 0.25)):
            self.figure.quad(
                left="left",
                right="right",
                top="top",
                bottom="bottom",
                source=source,
                fill_color="color",
                fill_alpha=alpha,
                line_color="color",
            )
            self.figure.quad(
                left="left",
                right="right",
                top="fill_top",
                bottom="bottom",
                source=source,
                fill_color="color",
                fill_alpha=0.75,
                line_color=None,
            )
        cells, entries = (
            self.figure.quad(
                left="left", right="right", top="top", bottom="bottom", source=source, fill_alpha=0, line_alpha=0
            )
            for source in (self.physical, self.logical)
        )
        self.figure.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            source=self.marks,
            fill_alpha=0,
            line_color="#111111",
            line_width=3,
        )
        self.figure.add_layout(
            LabelSet(
                x="left",
                y="bottom",
                text="tag",
                source=self.marks,
                x_offset=3,
                y_offset=3,
                text_font_size="10px",
                text_font_style="bold",
            )
        )
        self.figure.add_layout(
            Arrow(
                end=NormalHead(size=7, line_color="color", fill_color="color"),
                x_start="x0",
                y_start="y0",
                x_end="x1",
                y_end="y1",
                source=self.arrows,
                line_color="color",
                line_alpha=0.6,
            )
        )
        chars = []
        for source in (self.logical, self.physical):
            self.figure.add_layout(
                LabelSet(
                    x="left",
                    y="top",
                    text="label",
                    source=source,
                    x_offset=2,
                    y_offset=-11,
                    text_font_size="9px",
                    text_color="#444444",
                )
            )
            chars.append(
                LabelSet(
                    x="cx",
                    y="cy",
                    text="chars",
                    source=source,
                    text_align="center",
                    text_baseline="middle",
                    text_font=value("monospace"),
                    text_font_size="11px",
                    text_font_style="bold",
                    text_color="#111111",
                )
            )
            self.figure.add_layout(chars[-1])
        # characters sized to the cells on screen: 8 fit a cell, or none (hover still says)
        fit = CustomJS(
            args={"labels": chars, "plot": self.figure, "x": self.figure.x_range},
            code="""
            const cell = plot.inner_width / Math.max(1, x.end - x.start)
            const size = Math.min(11, Math.floor(cell * 0.85 / 8 / 0.6))
            for (const l of labels) { l.visible = size >= 6; l.text_font_size = size + "px" }""",
        )
        self.figure.js_on_change("inner_width", fit)
        self.figure.x_range.js_on_change("end", fit)
        self.figure.add_layout(
            LabelSet(x="x", y="y", text="text", source=self.heads, text_font_size="11px", text_font_style="bold")
        )
        self.figure.add_tools(
            HoverTool(
                renderers=[cells],
                tooltips=[
                    (tr("physical block"), "@block"),
                    (tr("holds"), "'@text'"),
                    (tr("filled rows"), "@fill"),
                    (tr("held by the tables of seq"), "@owners"),
                    (tr("reference count"), "@ref_count"),
                ],
            )
        )
        self.figure.add_tools(
            HoverTool(
                renderers=[entries],
                tooltips=[
                    (tr("seq"), "@seq"),
                    (tr("logical block"), "@index"),
                    (tr("points to physical block"), "@block"),
                    (tr("holds"), "'@text'"),
                    (tr("filled rows"), "@rows"),
                ],
            )
        )
        self.num_blocks, self.block_size, self.width = 1, 1, 1

    def reset(self, steps: list[dict[str, Any]], num_blocks: int, block_size: int) -> None:
        """Fix the frame for a whole trace: the widest table and the pool's grid."""
        self.num_blocks, self.block_size = num_blocks, block_size
        self.width = max((len(s["block_table"]) for step in steps for s in step["sequences"]), default=1)
        rows = max((len(step["sequences"]) for step in steps), default=1)
        cols = grid_columns(num_blocks)
        grid_rows = -(-num_blocks // cols)
        self.figure.x_range.start, self.figure.x_range.end = -2.2, self.width + 3 + cols
        self.figure.y_range.start, self.figure.y_range.end = -ROW * max(rows, grid_rows) - 0.3, 1.2
        self.heads.data = {
            "x": [-2.2, self.width + 3],
            "y": [0.5, 0.5],
            "text": [tr("block tables (logical)"), tr("physical blocks")],
        }

    def draw(self, step: dict[str, Any], marks: list[tuple[int, str]] = ()) -> None:
        """Draw one trace step; `marks` outlines physical blocks and tags them (block id, tag)."""
        x0, cols, bs = self.width + 3, grid_columns(self.num_blocks), self.block_size
        where = {b: (x0 + b % cols, -ROW * (b // cols)) for b in range(self.num_blocks)}
        held = {b["block"]: b for b in step["blocks"]}
        physical = columns(*CELL, "block", "owners", "ref_count", "fill")
        for b in range(self.num_blocks):
            info = held.get(b, {"owners": [], "ref_count": 0, "fill": 0})
            count = info["ref_count"]
            text = info.get("text", "")
            _cell(
                physical,
                *where[b],
                info["fill"] / bs,
                block=b,
                owners=", ".join(map(str, info["owners"])) or "-",
                ref_count=count,
                fill=info["fill"],
                color=block_color(info) if count else "#dddddd",
                label=f"{b}" + (f"  x{count}" if count > 1 else ""),
                text=text,
                chars=shown_chars(text),
            )
        logical = columns(*CELL, "seq", "index", "block", "rows")
        arrows = columns("x0", "y0", "x1", "y1", "color")
        labels = {"x": [], "y": [], "text": []}
        for row, seq in enumerate(step["sequences"]):
            y, table = -ROW * row, seq["block_table"]
            labels["x"].append(-2.2)
            labels["y"].append(y - 0.6)
            labels["text"].append(f"{tr('seq')} {seq['seq']}")
            texts = seq.get("texts", [""] * len(table))
            for i, (block, text) in enumerate(zip(table, texts)):
                rows = seq["last_block_fill"] if i == len(table) - 1 else bs
                color = block_color(held[block])
                _cell(
                    logical,
                    i,
                    y,
                    rows / bs,
                    seq=seq["seq"],
                    index=i,
                    block=block,
                    rows=rows,
                    color=color,
                    label=f"{block}",
                    text=text,
                    chars=shown_chars(text),
                )
                px, py = where[block]
                for key, item in zip(arrows, (i + 0.5, y - 1 + GAP, px, py - 0.45, color)):
                    arrows[key].append(item)
        self.physical.data, self.logical.data, self.arrows.data = physical, logical, arrows
        self.heads.data = {k: self.heads.data[k][:2] + labels[k] for k in labels}
        box = columns("left", "right", "top", "bottom", "tag")
        for block, tag in marks:
            x, y = where[block]
            for key, item in zip(box, (x - 0.05, x + 1 - GAP + 0.05, y + 0.05, y - 1 + GAP - 0.05, tag)):
                box[key].append(item)
        self.marks.data = box


def map_key() -> str:
    """How to read a block map (the figure's title stays short enough for a phone)."""
    return tr(
        "each cell shows the characters its block holds (a dot is a space); fill: rows written; "
        "grey xN: shared by N block tables; outlined: taken or copied this step; hover a cell for more"
    )


def describe_events(events: list[dict[str, Any]]) -> list[str]:
    """Plain words for a step's store events (allocation, copy-on-write, fork, free)."""
    words = []
    for e in events:
        if e["kind"] == "allocate":
            words.append(f"{tr('seq')} {e['seq']} {tr('takes block')} {e['block']}")
        elif e["kind"] == "copy":
            words.append(
                f"{tr('seq')} {e['seq']} {tr('copies block')} {e['from']} ({e['rows']} {tr('rows')}) "
                f"{tr('to block')} {e['to']}: {tr('copy-on-write')}"
            )
        elif e["kind"] == "fork":
            words.append(f"{tr('seq')} {e['parent']} {tr('forks')} {tr('seq')} {e['child']}")
        else:
            back = ", ".join(map(str, e["released"])) or tr("none")
            words.append(f"{tr('seq')} {e['seq']} {tr('freed; back to the free list')}: {back}")
    return words


def event_marks(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Blocks to outline this step: just taken ("new"), copied by copy-on-write ("CoW src"),
    and the copies ("CoW copy"); a copy is also newly taken, the later tag wins."""
    tags: dict[int, str] = {}
    for e in events:
        if e["kind"] == "allocate":
            tags[e["block"]] = tr("new")
        elif e["kind"] == "copy":
            tags[e["from"]] = tr("CoW src")
            tags[e["to"]] = tr("CoW copy")
    return list(tags.items())


class BlockTraceView(LabView):
    """Base of the views that animate a PagedStore trace around a BlockMap: `name` names the
    sources (`{name}-physical`, ...) and the text boxes (`kv-{name}-summary`, `-step`, `-texts`)."""

    animated = True

    def __init__(self, name: str, title: str) -> None:
        super().__init__()
        self.steps: list[dict[str, Any]] = []
        self.map = BlockMap(name, title)
        self.summary = plain(css_class=f"kv-{name}-summary", mono=True)
        self.step_text = LiveText(css_class=f"kv-{name}-step", mono=True)
        self.texts = plain(css_class=f"kv-{name}-texts", mono=True)

    def draw(self, index: int) -> dict[str, Any] | None:
        """Draw trace step `index` on the block map; the step, for the caller's text."""
        if not self.steps:
            return None
        step = self.steps[min(index, len(self.steps) - 1)]
        self.map.draw(step, event_marks(step["events"]))
        return step


class BlockTablesView(BlockTraceView):
    labs = ("block-tables",)

    def __init__(self) -> None:
        super().__init__("paged", tr("block tables -> physical blocks"))

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary, self.player, self.step_text, self.map.figure, self.texts, sizing_mode="stretch_width"
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        self.steps = result["steps"]
        self.map.reset(self.steps, result["num_blocks"], result["block_size"])
        self.summary.text = (
            f"{tr('identical to generating each request alone')}: {yes_no(result['identical'])}; "
            f"{tr('block size')} {result['block_size']}, {result['num_blocks']} {tr('physical blocks')}, "
            f"{tr('at most')} {result['peak_used_blocks']} {tr('in use')}\n{map_key()}"
        )
        self.texts.text = "\n".join(
            f"{tr('seq')} {r['seq']}: {r['prompt']} | {r['answer']}" for r in result["requests"]
        )
        self.set_steps(len(self.steps))

    def show_step(self, index: int) -> None:
        step = self.draw(index)
        if step is None:
            return
        fed = ", ".join(f"{tr('seq')} {b['seq']} +{b['fed']}" for b in step["batch"])
        tables = "\n".join(
            f"{tr('seq')} {s['seq']}: {s['tokens']} {tr('tokens')}, {tr('table')} {s['block_table']}, "
            f"{tr('last block')} {s['last_block_fill']}/{self.map.block_size}"
            for s in step["sequences"]
        )
        self.step_text.text = (
            f"{tr('step')} {step['step']} ({tr('prefill') if step['step'] == 0 else tr('decode')}): {fed}\n{tables}\n"
            + "\n".join(describe_events(step["events"]))
            + f"\n{tr('free blocks')}: {step['free_blocks']} ({tr('next first')}: "
            f"{' '.join(map(str, step['free_list'][:16]))}{' ...' if step['free_blocks'] > 16 else ''})"
        )
