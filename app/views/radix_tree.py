"""View of the `radix-demo` lab: the radix tree as a node-link drawing, request by request.

Two steps per request: while it runs (its cached prefix matched, split where the match ends
inside an edge, and locked; its new slots taken from the shared pool, least recently used
leaves evicted if the pool was short) and after it (prompt + output inserted, a node split
where it parted from the tree, the lock released). The root is on the left; each edge is
labelled with its tokens, cut to what fits before the next node at the figure's width and
zoom (hover an edge or a node for all of them). Edges on the request's path
are green where it read the cache and yellow where it computed; the suffix it is computing
hangs dashed from the matched node; locked nodes are red, split nodes ringed in purple,
and the nodes evicted in this step stay, for that step only, as faded dashed ghosts.

Prompts and outputs are user-controlled text: shown only through `app.text.plain`, canvas
glyphs, escaped tooltips and DataTable cells, never as HTML.
"""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.core.properties import value
from bokeh.models import ColumnDataSource, CustomJS, CustomJSTransform, HoverTool, LabelSet, Legend, LegendItem, Range1d
from bokeh.transform import transform
from bokeh.palettes import Blues9
from bokeh.plotting import figure

from app.i18n import quoted, tr, yes_no
from app.text import LiveText, plain
from app.view import LabView, TextTable, columns, percent
from kvweb.lab import Lab

LOCKED = "#e6550d"
HIT = "#2ca02c"
COMPUTED = "#e6ab02"
SPLIT = "#7b3294"
GHOST = "#9e9e9e"
EDGE = "#b0b0b0"
RECENCY = list(reversed(Blues9))[2:8]  # light (least recently used) to dark
LOG_COLUMNS = ("request", "kind", "from the cache", "prefilled", "evicted", "identical", "prompt", "output")
POOL_PARTS = (
    ("evictable", "cached, evictable", "#6baed6"),
    ("protected", "cached, locked", LOCKED),
    ("running", "running request", COMPUTED),
    ("free", "free", "#eeeeee"),
)
GHOST_ALPHA = 0.35  # evicted nodes and edges fade
NODE_COLS = ("x", "y", "id", "size", "lock", "last_access", "fill", "line", "ring", "text", "what")
EDGE_COLS = ("xs", "ys", "color", "width", "lx", "ly", "label", "what")
# An edge label holds what fits between its parent and its child (one unit of x) at the
# figure's width and zoom, in the browser: 12 px monospace, about 7.3 px a character.
FIT_LABEL = """
const px = fig.inner_width > 0 ? fig.inner_width / (fig.x_range.end - fig.x_range.start) : 60
const fit = Math.max(3, Math.floor((0.9 * px - 16) / 7.3))
return xs.map((t) => t.length <= fit ? t : t.slice(0, fit - 1) + "\u2026")
"""


def shown_text(text: str) -> str:
    """Spaces made visible, as on the mini model's character tokens."""
    return text.replace(" ", "␣")


def elbow(x0: float, y0: float, x1: float, y1: float) -> tuple[list[float], list[float]]:
    """Parent to child: down (or up) beside the parent, then across to the child."""
    return [x0, x0 + 0.06, x0 + 0.06, x1], [y0, y0, y1, y1]


class RadixTreeView(LabView):
    labs = ("radix-demo",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.nodes = ColumnDataSource(columns(*NODE_COLS), name="radix-nodes")
        self.edges = ColumnDataSource(columns(*EDGE_COLS, "id", "path", "hit"), name="radix-edges")
        self.ghosts = ColumnDataSource(columns(*NODE_COLS), name="radix-ghosts")
        self.ghost_edges = ColumnDataSource(columns(*EDGE_COLS))
        self.splits = ColumnDataSource(columns("x", "y", "id"), name="radix-splits")
        self.suffix = ColumnDataSource(columns(*EDGE_COLS, "text"), name="radix-suffix")
        self.tree = figure(
            title=tr("radix tree: each edge holds a run of tokens (root on the left)"),
            height=360,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,reset,save",
            toolbar_location="above",
            x_range=Range1d(-0.3, 1),
            y_range=Range1d(-1, 0),
        )
        self.tree.axis.visible = False
        self.tree.grid.visible = False
        lines = [
            self.tree.multi_line("xs", "ys", source=self.edges, line_color="color", line_width="width"),
            self.tree.multi_line(
                "xs",
                "ys",
                source=self.ghost_edges,
                line_color=GHOST,
                line_width=2,
                line_dash="dashed",
                line_alpha=GHOST_ALPHA,
            ),
            self.tree.multi_line("xs", "ys", source=self.suffix, line_color=COMPUTED, line_width=4, line_dash="dashed"),
        ]
        self.tree.add_tools(HoverTool(renderers=lines, tooltips=[("", "@what"), (tr("tokens"), "@label")]))
        fit = CustomJSTransform(args={"fig": self.tree}, v_func=FIT_LABEL)
        for src, color, alpha in (
            (self.edges, "#222222", 1.0),
            (self.ghost_edges, GHOST, GHOST_ALPHA + 0.15),
            (self.suffix, "#8a6d00", 1.0),
        ):
            self.tree.add_layout(
                LabelSet(
                    x="lx",
                    y="ly",
                    text=transform("label", fit),
                    source=src,
                    text_font_size="12px",
                    text_font=value("monospace"),
                    text_color=color,
                    text_alpha=alpha,
                    y_offset=3,
                    text_baseline="bottom",
                )
            )
        refit = CustomJS(
            args={"sources": [self.edges, self.ghost_edges, self.suffix]},
            code="for (const s of sources) s.change.emit()",
        )  # the labels' width changed
        self.tree.js_on_change("inner_width", refit)
        self.tree.x_range.js_on_change("start", refit)
        self.tree.x_range.js_on_change("end", refit)
        self.tree.scatter("x", "y", source=self.splits, size=24, fill_color=None, line_color=SPLIT, line_width=3)
        ghosts = self.tree.scatter(
            "x",
            "y",
            source=self.ghosts,
            size=15,
            fill_color="#ffffff",
            line_color=GHOST,
            line_dash="dashed",
            line_width=2,
            marker="circle_x",
            alpha=GHOST_ALPHA + 0.15,
        )
        dots = self.tree.scatter(
            "x", "y", source=self.nodes, size=15, fill_color="fill", line_color="line", line_width="ring"
        )
        self.tree.add_tools(HoverTool(renderers=[dots, ghosts], tooltips=[("", "@what"), (tr("tokens"), "@text")]))
        key = ColumnDataSource({"x": [float("nan")], "y": [float("nan")]})  # glyphs that only draw legend keys
        self.tree.add_layout(
            Legend(
                items=[
                    LegendItem(label=tr(label), renderers=[glyph])
                    for label, glyph in (
                        ("read from the cache", self.tree.line("x", "y", source=key, line_color=HIT, line_width=5)),
                        (
                            "computed by this request",
                            self.tree.line("x", "y", source=key, line_color=COMPUTED, line_width=5),
                        ),
                        (
                            "locked",
                            self.tree.scatter("x", "y", source=key, size=13, fill_color=LOCKED, line_color=None),
                        ),
                        (
                            "split node",
                            self.tree.scatter(
                                "x", "y", source=key, size=13, fill_color=None, line_color=SPLIT, line_width=3
                            ),
                        ),
                        (
                            "evicted in this step",
                            self.tree.scatter(
                                "x",
                                "y",
                                source=key,
                                size=13,
                                fill_color="#ffffff",
                                line_color=GHOST,
                                line_width=2,
                                marker="circle_x",
                                alpha=GHOST_ALPHA + 0.15,
                            ),
                        ),
                    )
                ],
                orientation="horizontal",
                ncols=3,
                click_policy="none",
                label_text_font_size="12px",
            ),
            "below",
        )

        self.pool = ColumnDataSource(
            {
                "what": [tr(label) for _, label, _ in POOL_PARTS],
                "left": [0] * 4,
                "right": [0] * 4,
                "color": [c for _, _, c in POOL_PARTS],
            },
            name="radix-pool",
        )
        self.pool_plot = figure(
            title=tr("one pool of slots for the cache and the running request"),
            height=150,
            sizing_mode="stretch_width",
            tools="",
            toolbar_location=None,
            y_range=["pool"],
            x_range=Range1d(0, 1),
            x_axis_label=tr("slots"),
        )
        bars = self.pool_plot.hbar(
            y=value("pool"),
            left="left",
            right="right",
            height=0.8,
            color="color",
            legend_field="what",
            source=self.pool,
        )
        self.pool_plot.add_tools(HoverTool(renderers=[bars], tooltips=[("", "@what"), (tr("slots"), "@left - @right")]))
        self.pool_plot.legend[0].orientation = "horizontal"
        self.pool_plot.legend[0].ncols = 2
        self.pool_plot.add_layout(self.pool_plot.legend[0], "below")
        self.pool_plot.yaxis.visible = False

        self.table = TextTable("radix-log", "kv-radix-log")

        self.summary = plain(css_class="kv-radix-summary")
        self.step_text = LiveText(css_class="kv-radix-step")
        self.texts = plain(css_class="kv-radix-texts")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            self.player,
            self.step_text,
            self.tree,
            self.pool_plot,
            self.texts,
            self.table.pane,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        self.requests = result["requests"]
        kinds = {True: tr("a later turn of request 0"), False: tr("a new question")}
        self.table.show(
            [tr(title) for title in LOG_COLUMNS],
            [
                [
                    r["index"],
                    kinds[r["follow_up"]],
                    r["cached_tokens"],
                    r["prefilled_tokens"],
                    r["evicted"],
                    yes_no(r["identical"]),
                    quoted(r["prompt"]),
                    quoted(r["output"]),
                ]
                for r in self.requests
            ],
        )
        trees = [t for r in self.requests for t in (r["running_tree"], r["tree"])]
        self.tree.x_range.end = max(n["depth"] for t in trees for n in t["nodes"]) + 1.1
        self.pool_plot.x_range.start, self.pool_plot.x_range.end = 0, trees[0]["pool_size"]
        self.summary.text = (
            f"{tr('identical to from-scratch runs')}: {yes_no(result['identical'])}; "
            f"{tr('prompt tokens from the cache')}: {result['cached_tokens']}, "
            f"{tr('prefilled')}: {result['prefilled_tokens']} ({tr('hit rate')} {percent(result['hit_rate'])}); "
            f"{tr('evicted')}: {result['evicted']}"
        )
        self.set_steps(2 * len(self.requests))

    def show_step(self, index: int) -> None:
        if not self.requests:
            return
        index = min(index, 2 * len(self.requests) - 1)
        req, running = self.requests[index // 2], index % 2 == 0
        tree = req["running_tree"] if running else req["tree"]
        self._draw_tree(tree, req if running else None)
        used, cached = tree["pool_used"], tree["cached"]
        sizes = [tree["evictable"], tree["protected"], used - cached, tree["pool_size"] - used]
        edges = [sum(sizes[:i]) for i in range(5)]
        self.pool.data = {**self.pool.data, "left": edges[:4], "right": edges[1:]}
        self.table.select(index // 2)
        kind = tr("a later turn of request 0") if req["follow_up"] else tr("a new question")
        split = sum(n["split"] for n in tree["nodes"])
        ghosts = sum(n["ghost"] for n in tree["nodes"])
        if running:
            what = (
                f"{tr('running')}: {req['cached_tokens']} {tr('prompt tokens matched and locked')}, "
                f"{req['prefilled_tokens']} {tr('prefilled')}; {tr('evicted to make room')}: {req['evicted']}"
            )
        else:
            what = (
                f"{tr('done')}: {tr('prompt + output inserted, lock released')}; "
                f"{tr('output identical to a from-scratch run')}: {yes_no(req['identical'])}"
            )
        notes = ([f"{tr('split nodes')}: {split}"] if split else []) + (
            [f"{tr('evicted nodes')}: {ghosts}"] if ghosts else []
        )
        self.step_text.text = f"{tr('request')} {req['index']} ({kind}) - {what}" + (
            f" [{'; '.join(notes)}]" if notes else ""
        )
        self.texts.text = (
            f"{tr('prompt')}: {req['prompt']}\n{tr('output')}: {req['output']}\n"
            f"{tr('from scratch')}: {req['reference']}"
        )

    def _draw_tree(self, tree: dict[str, Any], running: dict[str, Any] | None) -> None:
        """Place nodes (x: edges from the root, y: the middle of their leaf rows) and fill
        the sources; `running`: the request whose uncached suffix is being computed."""
        nodes = tree["nodes"]
        at = {n["id"]: (float(n["depth"]), -(n["row"] + n["rows"] / 2)) for n in nodes}
        stamps = sorted({n["last_access"] for n in nodes if not n["ghost"]})
        shade = {s: RECENCY[i * len(RECENCY) // max(1, len(stamps))] for i, s in enumerate(stamps)}
        real, gone = columns(*NODE_COLS), columns(*NODE_COLS)
        edges, ghost_edges = columns(*EDGE_COLS, "id", "path", "hit"), columns(*EDGE_COLS)
        splits = columns("x", "y", "id")
        for n in nodes:
            x, y = at[n["id"]]
            if n["parent"] is None:  # the root: a node, no edge
                for key, v in zip(
                    NODE_COLS, (x, y, n["id"], 0, 0, n["last_access"], "#ffffff", "#444444", 2.0, "", tr("root"))
                ):
                    real[key].append(v)
                continue
            px, py = at[n["parent"]]
            xs, ys = elbow(px, py, x, y)
            where = tr("evicted") if n["ghost"] else tr("locked") if n["lock"] else tr("unlocked")
            what = f"{tr('node')} {n['id']}: {n['size']} {tr('tokens')}, {where}" + (
                f", {tr('split node')}" if n["split"] else ""
            )
            node_row = (
                x,
                y,
                n["id"],
                n["size"],
                n["lock"],
                n["last_access"],
                LOCKED if n["lock"] else shade.get(n["last_access"], GHOST),
                "#7f2704" if n["lock"] else "#ffffff",
                2.0 if n["lock"] else 1.0,
                shown_text(n["text"]),
                what,
            )
            color = HIT if n["hit"] else COMPUTED if n["path"] else EDGE
            role = (
                tr("read from the cache")
                if n["hit"]
                else tr("computed by this request")
                if n["path"]
                else tr("evicted in this step")
                if n["ghost"]
                else tr("cached")
            )
            edge_row = (
                xs,
                ys,
                color,
                5.0 if n["path"] else 2.0,
                px + 0.1,
                y,
                shown_text(n["text"]),
                f"{n['size']} {tr('tokens')}: {role}",
            )
            if n["ghost"]:
                for key, v in zip(NODE_COLS, node_row):
                    gone[key].append(v)
                for key, v in zip(EDGE_COLS, edge_row):
                    ghost_edges[key].append(v)
                continue
            for key, v in zip(NODE_COLS, node_row):
                real[key].append(v)
            for key, v in zip((*EDGE_COLS, "id", "path", "hit"), (*edge_row, n["id"], n["path"], n["hit"])):
                edges[key].append(v)
            if n["split"]:
                for key, v in zip(splits, (x, y, n["id"])):
                    splits[key].append(v)
        suffix = columns(*EDGE_COLS, "text")
        if running is not None:
            x, y = at[running["match_node"]]
            xs, ys = elbow(x, y, x + 0.9, y - 0.4)  # below the node's own edges
            what = f"{running['prefilled_tokens']} {tr('tokens')}: {tr('computed by this request')}"
            for key, v in zip(
                (*EDGE_COLS, "text"),
                (xs, ys, COMPUTED, 4.0, x + 0.1, y - 0.4, shown_text(running["suffix"]), what, running["suffix"]),
            ):
                suffix[key].append(v)
        self.nodes.data, self.ghosts.data = real, gone
        self.edges.data, self.ghost_edges.data = edges, ghost_edges
        self.splits.data, self.suffix.data = splits, suffix
        self.tree.y_range.start, self.tree.y_range.end = -max(1, tree["leaves"]) - 0.2, 0.3
