"""View of the `radix-demo` lab: the radix tree as an icicle, request by request.

Two steps per request: while it runs (its cached prefix locked, its new slots taken from the
shared pool, leaves evicted if the pool was short) and after it (prompt + output inserted,
a node split where it parted from the tree, the lock released). x is the token position,
so a node's width is its number of tokens; colour is the lock or how recently it was used;
the request's path is outlined, the part it read from the cache shaded green.

Prompts and outputs are user-controlled text: shown only through `app.text.plain` and
canvas glyphs, never as HTML.
"""
from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.core.properties import value
from bokeh.models import ColumnDataSource, HoverTool, Range1d
from bokeh.palettes import Blues9
from bokeh.plotting import figure

from app.i18n import tr
from app.text import plain
from app.view import LabView, columns
from kvweb.lab import Lab

LOCKED = "#e6550d"
HIT = "#2ca02c"
COMPUTED = "#ffbf00"
RECENCY = list(reversed(Blues9))[2:8]  # light (least recently used) to dark
POOL_PARTS = (("evictable", "cached, evictable", "#6baed6"), ("protected", "cached, locked", LOCKED),
              ("running", "running request", COMPUTED), ("free", "free", "#eeeeee"))


class RadixTreeView(LabView):
    labs = ("radix-demo",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.nodes = ColumnDataSource(columns("left", "right", "top", "bottom", "fill", "id", "size", "lock",
                                               "last_access"), name="radix-nodes")
        self.path = ColumnDataSource(columns("left", "right", "top", "bottom", "fill"), name="radix-path")
        self.chars = ColumnDataSource(columns("x", "y", "char"))
        self.tree = figure(
            title=tr("radix tree (width: tokens; red: locked; blue: darker = used more recently; "
                     "strip: this request's path, green = read from the cache, yellow = computed)"),
            height=330, sizing_mode="stretch_width", tools="pan,wheel_zoom,reset,save", toolbar_location="above",
            x_axis_label=tr("token position"), x_range=Range1d(0, 1), y_range=Range1d(-1, 0),
        )
        self.tree.yaxis.visible = False
        self.tree.ygrid.visible = False
        boxes = self.tree.quad(left="left", right="right", top="top", bottom="bottom", source=self.nodes,
                               fill_color="fill", line_color="#ffffff", line_width=2)
        self.tree.quad(left="left", right="right", top="top", bottom="bottom", source=self.path,
                       fill_color="fill", line_color="#222222", line_width=1)
        self.tree.text("x", "y", text="char", source=self.chars, text_align="center", text_baseline="middle",
                       text_font_size="9px", text_font=value("monospace"))
        self.tree.add_tools(HoverTool(renderers=[boxes], tooltips=[
            (tr("node"), "@id"), (tr("tokens"), "@size"), (tr("lock"), "@lock"), (tr("last access"), "@last_access")]))

        self.pool = ColumnDataSource({"what": [tr(label) for _, label, _ in POOL_PARTS], "left": [0] * 4,
                                      "right": [0] * 4, "color": [c for _, _, c in POOL_PARTS]}, name="radix-pool")
        self.pool_plot = figure(title=tr("one pool of slots for the cache and the running request"), height=140,
                                sizing_mode="stretch_width", tools="", toolbar_location=None, y_range=["pool"],
                                x_range=Range1d(0, 1), x_axis_label=tr("slots"))
        self.pool_plot.hbar(y=value("pool"), left="left", right="right", height=0.8, color="color",
                            legend_field="what", source=self.pool)
        self.pool_plot.add_layout(self.pool_plot.legend[0], "right")
        self.pool_plot.yaxis.visible = False

        self.bars = ColumnDataSource(columns("name", "cached", "prefilled", "alpha"), name="radix-requests")
        self.bar_plot = figure(title=tr("prompt tokens per request: from the cache vs prefilled"), height=220,
                               width=420, tools="", toolbar_location=None, x_range=[""])
        self.bar_plot.vbar_stack(["cached", "prefilled"], x="name", width=0.7, color=[HIT, "#bbbbbb"],
                                 fill_alpha="alpha", source=self.bars,
                                 legend_label=[tr("from the cache"), tr("prefilled")])
        self.bar_plot.legend.location = "top_left"
        self.bar_plot.y_range.start = 0

        self.summary = plain(css_class="kv-radix-summary", mono=True)
        self.step_text = plain(css_class="kv-radix-step", mono=True)
        self.texts = plain(css_class="kv-radix-texts", mono=True)

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary, self.player, self.step_text, self.tree, self.pool_plot,
            pn.Row(self.bar_plot, self.texts, sizing_mode="stretch_width"), sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        self.requests = result["requests"]
        names = [f"r{r['index']}" + (f" ({tr('turn 2')})" if r["follow_up"] else "") for r in self.requests]
        self.bar_plot.x_range.factors = names
        self.bars.data = {"name": names, "cached": [r["cached_tokens"] for r in self.requests],
                          "prefilled": [r["prefilled_tokens"] for r in self.requests],
                          "alpha": [0.35] * len(self.requests)}
        trees = [t for r in self.requests for t in (r["running_tree"], r["tree"])]
        self.tree.x_range.end = max(n["start"] + n["size"] for t in trees for n in t["nodes"]) + 1
        self.pool_plot.x_range.start, self.pool_plot.x_range.end = 0, trees[0]["pool_size"]
        self.summary.text = (
            f"{tr('identical to from-scratch runs')}: {result['identical']}; "
            f"{tr('prompt tokens from the cache')}: {result['cached_tokens']}, "
            f"{tr('prefilled')}: {result['prefilled_tokens']} ({tr('hit rate')} {result['hit_rate']:.0%}); "
            f"{tr('evicted')}: {result['evicted']}"
        )
        self.set_steps(2 * len(self.requests))

    def show_step(self, index: int) -> None:
        if not self.requests:
            return
        index = min(index, 2 * len(self.requests) - 1)
        req, running = self.requests[index // 2], index % 2 == 0
        tree = req["running_tree"] if running else req["tree"]
        self._draw_tree(tree)
        used, cached = tree["pool_used"], tree["cached"]
        sizes = [tree["evictable"], tree["protected"], used - cached, tree["pool_size"] - used]
        edges = [sum(sizes[:i]) for i in range(5)]
        self.pool.data = {**self.pool.data, "left": edges[:4], "right": edges[1:]}
        alpha = [1.0 if i == index // 2 else 0.35 for i in range(len(self.requests))]
        self.bars.data = {**self.bars.data, "alpha": alpha}
        kind = tr("a later turn of request 0") if req["follow_up"] else tr("a new question")
        if running:
            what = (f"{tr('running')}: {req['cached_tokens']} {tr('prompt tokens matched and locked')}, "
                    f"{req['prefilled_tokens']} {tr('prefilled')}; {tr('evicted to make room')}: {req['evicted']}")
        else:
            what = (f"{tr('done')}: {tr('prompt + output inserted, lock released')}; "
                    f"{tr('output identical to a from-scratch run')}: {req['identical']}")
        self.step_text.text = f"{tr('request')} {req['index']} ({kind}) - {what}"
        self.texts.text = (f"{tr('prompt')}: {req['prompt']}\n{tr('output')}: {req['output']}\n"
                           f"{tr('from scratch')}: {req['reference']}")

    def _draw_tree(self, tree: dict[str, Any]) -> None:
        nodes = [n for n in tree["nodes"] if n["size"]]
        stamps = sorted({n["last_access"] for n in nodes})
        shade = {s: RECENCY[i * len(RECENCY) // max(1, len(stamps))] for i, s in enumerate(stamps)}
        self.nodes.data = {
            "left": [n["start"] for n in nodes], "right": [n["start"] + n["size"] for n in nodes],
            "top": [-n["row"] for n in nodes], "bottom": [-(n["row"] + n["rows"]) for n in nodes],
            "fill": [LOCKED if n["lock"] else shade[n["last_access"]] for n in nodes],
            "id": [n["id"] for n in nodes], "size": [n["size"] for n in nodes],
            "lock": [n["lock"] for n in nodes], "last_access": [n["last_access"] for n in nodes],
        }
        path = columns("left", "right", "top", "bottom", "fill")
        for n in nodes:
            for lo, hi, color in ((0, n["hit"], HIT), (n["hit"], n["path"], COMPUTED)):
                if hi > lo:
                    bottom = -n["row"] - n["rows"] + 0.08  # a strip along the node's bottom edge
                    for key, v in zip(path, (n["start"] + lo, n["start"] + hi, bottom + 0.22, bottom, color)):
                        path[key].append(v)
        self.path.data = path
        chars = columns("x", "y", "char")
        for n in nodes:
            for i, c in enumerate(n["text"]):
                chars["x"].append(n["start"] + i + 0.5)
                chars["y"].append(-n["row"] - 0.5)
                chars["char"].append("␣" if c == " " else c)
        self.chars.data = chars
        self.tree.y_range.start, self.tree.y_range.end = -max(1, tree["leaves"]) - 0.1, 0.1
