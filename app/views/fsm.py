"""View of the `fsm` lab: the DFA as a graph with its jump chains, and decoding replayed
step by step (current state lit, the mask over the vocabulary, forwards plain vs compressed).

The pattern and the outputs are user-controlled text: they appear only through
`app.text.plain` (textContent) and Bokeh canvas glyphs, never as HTML.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import panel as pn
from bokeh.core.properties import value
from bokeh.models import ColumnDataSource, HoverTool, LabelSet, Range1d
from bokeh.plotting import figure

from app.i18n import tr, quoted, yes_no
from app.text import LiveText, plain
from app.view import LabView, TextTable, columns
from kvweb.lab import Lab
from kvweb.constrained.layout import band_positions
from kvweb.kv.model import VOCAB

EDGE = "#9a9a9a"
JUMP = "#e6550d"
ACTIVE = "#d62728"
STATE = "#c6dbef"
FORCED = "#fdd0a2"
ALLOWED = "#74c476"
MASKED = "#eeeeee"
GRID_COLUMNS = 16  # the vocabulary (+ end) drawn as a 16 x 6 grid
TEXT_COLUMNS = 48  # output characters per line
PER_BAND = 16  # layers per band: longer DFAs wrap like lines of text
UNIT_PX = 46  # pixels per unit of height (one state of a layer)
LABEL_H = 0.34  # an edge label's height, in those units
CHAR_W = 0.085  # one label character's width, in layers (at about 80 px per layer)


def edge_curve(p: tuple[float, float], q: tuple[float, float]) -> tuple[float, float, float, float]:
    """Bezier control points: straight to the next layer, arched above over skipped layers,
    below when going back, an S from one band down to the next, a loop on a state itself."""
    (x0, y0), (x1, y1) = p, q
    if p == q:
        return x0 - 0.45, y0 + 0.9, x0 + 0.45, y0 + 0.9
    if y1 < y0 - 1.2 and x1 < x0:  # wrapped into a later band
        return x0 + 1.5, y0, x1 - 1.5, y1
    if x1 == x0 + 1:
        return x0 + (x1 - x0) / 3, y0 + (y1 - y0) / 3, x0 + 2 * (x1 - x0) / 3, y0 + 2 * (y1 - y0) / 3
    lift = 0.45 + 0.22 * abs(x1 - x0)
    level = max(y0, y1) + lift if x1 > x0 else min(y0, y1) - lift
    return x0 + (x1 - x0) / 3, level, x0 + 2 * (x1 - x0) / 3, level


def spread_labels(xs: list[float], ys: list[float], labels: list[str]) -> list[float]:
    """Label heights nudged upwards until no two labels' boxes overlap (greedy, in order)."""
    placed: list[tuple[float, float, float]] = []
    out = []
    for x, y, label in zip(xs, ys, labels):
        half = max(1, len(label)) * CHAR_W / 2
        while any(abs(x - px) < half + ph and abs(y - py) < LABEL_H for px, py, ph in placed):
            y += LABEL_H
        placed.append((x, y, half))
        out.append(y)
    return out


def _bezier(t: float, a: float, b: float, c: float, d: float) -> float:
    return (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t * t * c + t**3 * d


class FsmView(LabView):
    labs = ("fsm",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.trace: list[dict[str, Any]] = []
        self.output = ""
        self.jumped_at: list[bool] = []
        self.positions: dict[int, tuple[float, float]] = {}
        self.chains: dict[int, list[int]] = {}

        edge_cols = ("x0", "y0", "x1", "y1", "cx0", "cy0", "cx1", "cy1", "color", "width")
        self.edges = ColumnDataSource(columns(*edge_cols, "source", "target"), name="fsm-edges")
        self.active = ColumnDataSource(columns(*edge_cols), name="fsm-active")
        self.arrows = ColumnDataSource(columns("x", "y", "angle", "color"))
        self.edge_labels = ColumnDataSource(columns("x", "y", "label", "color", "what"), name="fsm-labels")
        self.states = ColumnDataSource(columns("x", "y", "id", "fill", "line", "ring", "what"), name="fsm-states")
        self.current = ColumnDataSource(columns("x", "y"))

        self.graph = figure(
            title=tr(
                "DFA, layered left to right and wrapped into bands (orange: jump chains, thick ring: "
                "accepting, red: this step)"
            ),
            height=380,
            sizing_mode="stretch_width",
            tools="pan,wheel_zoom,reset,save",
            toolbar_location="above",
            x_range=Range1d(-1, 1),
            y_range=Range1d(-1, 1),
        )
        self.graph.axis.visible = False
        self.graph.grid.visible = False
        self.graph.bezier(
            "x0",
            "y0",
            "x1",
            "y1",
            "cx0",
            "cy0",
            "cx1",
            "cy1",
            source=self.edges,
            line_color="color",
            line_width="width",
        )
        self.graph.bezier(
            "x0",
            "y0",
            "x1",
            "y1",
            "cx0",
            "cy0",
            "cx1",
            "cy1",
            source=self.active,
            line_color=ACTIVE,
            line_width=5,
            line_alpha=0.8,
        )
        self.graph.scatter("x", "y", source=self.arrows, marker="triangle", size=9, angle="angle", color="color")
        self.graph.add_layout(
            LabelSet(
                x="x",
                y="y",
                text="label",
                source=self.edge_labels,
                text_font_size="11px",
                text_color="color",
                text_align="center",
                text_baseline="middle",
                background_fill_color="#ffffff",
                background_fill_alpha=0.8,
            )
        )
        spots = self.graph.scatter("x", "y", source=self.edge_labels, size=14, alpha=0)
        self.graph.add_tools(HoverTool(renderers=[spots], tooltips=[(tr("edge"), "@what")]))
        self.graph.scatter("x", "y", source=self.current, size=28, fill_color=None, line_color=ACTIVE, line_width=4)
        dots = self.graph.scatter(
            "x", "y", source=self.states, size=18, fill_color="fill", line_color="line", line_width="ring"
        )
        self.graph.add_tools(HoverTool(renderers=[dots], tooltips=[(tr("state"), "@what")]))
        self.graph.text(
            "x", "y", text="id", source=self.states, text_align="center", text_baseline="middle", text_font_size="9px"
        )

        self.mask = ColumnDataSource(columns("x", "y", "char", "fill", "line", "width", "what"), name="fsm-mask")
        self.mask_plot = figure(
            title=tr("the mask at this step (green: allowed, grey: masked, red ring: chosen)"),
            height=190,
            sizing_mode="stretch_width",
            min_width=300,
            max_width=640,
            tools="",
            toolbar_location=None,
            x_range=(-0.6, GRID_COLUMNS - 0.4),
            y_range=(-5.6, 0.6),
        )
        self.mask_plot.axis.visible = False
        self.mask_plot.grid.visible = False
        cells = self.mask_plot.rect(
            "x", "y", 0.92, 0.92, source=self.mask, fill_color="fill", line_color="line", line_width="width"
        )
        self.mask_plot.add_tools(HoverTool(renderers=[cells], tooltips=[(tr("character"), "@char"), ("", "@what")]))
        self.mask_plot.text(
            "x",
            "y",
            text="char",
            source=self.mask,
            text_align="center",
            text_baseline="middle",
            text_font_size="12px",
            text_font=value("monospace"),
        )

        self.text = ColumnDataSource(columns("x", "y", "char", "color", "back", "how"), name="fsm-text")
        self.text_plot = figure(
            title=tr("output so far (orange: through a jump edge; highlighted: this step)"),
            height=170,
            sizing_mode="stretch_width",
            tools="",
            toolbar_location=None,
            x_range=(-0.6, TEXT_COLUMNS - 0.4),
            y_range=Range1d(-2.6, 0.6),
        )
        self.text_plot.axis.visible = False
        self.text_plot.grid.visible = False
        chars = self.text_plot.rect("x", "y", 0.95, 0.9, source=self.text, fill_color="back", line_color=None)
        self.text_plot.add_tools(HoverTool(renderers=[chars], tooltips=[(tr("character"), "@char"), ("", "@how")]))
        self.text_plot.text(
            "x",
            "y",
            text="char",
            source=self.text,
            text_color="color",
            text_align="center",
            text_baseline="middle",
            text_font_size="14px",
            text_font=value("monospace"),
        )

        self.counts = ColumnDataSource(
            {"mode": [tr("plain"), tr("compressed")], "forwards": [0, 0], "color": [EDGE, JUMP], "label": ["0", "0"]},
            name="fsm-counts",
        )
        self.count_plot = figure(
            title=tr("forwards so far (sample 0)"),
            y_range=self.counts.data["mode"],
            height=190,
            sizing_mode="stretch_width",
            min_width=300,
            max_width=480,
            tools="",
            toolbar_location=None,
        )
        bars = self.count_plot.hbar(y="mode", right="forwards", height=0.6, color="color", source=self.counts)
        self.count_plot.add_tools(
            HoverTool(renderers=[bars], tooltips=[("", "@mode"), (tr("forwards so far"), "@forwards")])
        )
        self.count_plot.add_layout(
            LabelSet(
                x="forwards", y="mode", text="label", source=self.counts, x_offset=4, y_offset=-6, text_font_size="12px"
            )
        )
        self.count_plot.x_range.start = 0

        self.step_text = LiveText(css_class="kv-fsm-step")
        self.pattern_text = plain(css_class="kv-fsm-pattern", mono=True)
        self.summary = plain(css_class="kv-fsm-summary")
        self.table = TextTable("fsm-outputs", "kv-fsm-outputs", max_rows=8)

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.pattern_text,
            self.summary,
            self.player,
            self.graph,
            pn.Row(self.mask_plot, self.count_plot, sizing_mode="stretch_width"),
            self.step_text,
            self.text_plot,
            self.table.pane,
            sizing_mode="stretch_width",
        )

    # -- a new result ---------------------------------------------------------------------
    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        graph = result["graph"]
        self.trace = result["trace"]
        self.output = result["outputs"][0]
        self.jumped_at = [s["jump"] for s in self.trace for _ in s["chars"]]
        states = graph["states"]
        xy = band_positions([s["layer"] for s in states], [s["slot"] for s in states], PER_BAND)
        self.positions = {s["id"]: p for s, p in zip(states, xy)}
        self.chains = {c["head"]: [*c["states"], c["end"]] for c in graph["chains"]}
        self._draw_graph(graph)
        self.count_plot.x_range.end = max(1, result["per_sample"][0]["forwards_plain"]) * 1.25
        self.pattern_text.text = f"{tr('pattern in use')}: {result['pattern']}"
        self.summary.text = (
            f"{tr('DFA')}: {result['dfa_states']} {tr('states')} (NFA {result['nfa_states']}), "
            f"{len(graph['edges'])} {tr('edges')}, {result['jump_edges']} {tr('jump edges')}; "
            f"{tr('shortest match')} {result['shortest_match']}\n"
            f"{tr('all samples')}: {tr('forwards plain')} {result['forwards_plain']}, "
            f"{tr('compressed')} {result['forwards_compressed']}, "
            f"{tr('saved')} {result['forwards_plain'] - result['forwards_compressed']} = "
            f"{tr('characters through jump edges')} {result['jump_chars']}; "
            f"{tr('identical')}: {yes_no(result['identical'])}, {tr('all match')}: {yes_no(result['all_match'])}"
        )
        per = result["per_sample"]
        self.table.show(
            [
                tr("seed"),
                tr("constrained output"),
                tr("forwards plain"),
                tr("compressed"),
                tr("unconstrained output (same seed, no mask)"),
            ],
            [
                [p["seed"], out, p["forwards_plain"], p["forwards_compressed"], free]
                for p, out, free in zip(per, result["outputs"], result["unconstrained_outputs"])
            ],
        )
        rows = -(-max(len(self.output), 1) // TEXT_COLUMNS)
        self.text_plot.y_range.start = -rows + 0.4
        self.text_plot.height = 70 + 28 * rows
        self.set_steps(len(self.trace))

    def _edge_rows(self, pairs: list[tuple[int, int]], color: list[str], width: list[float]) -> dict[str, list]:
        data = columns("x0", "y0", "x1", "y1", "cx0", "cy0", "cx1", "cy1")
        for s, t in pairs:
            (x0, y0), (x1, y1) = self.positions[s], self.positions[t]
            cx0, cy0, cx1, cy1 = edge_curve((x0, y0), (x1, y1))
            for key, coordinate in zip(data, (x0, y0, x1, y1, cx0, cy0, cx1, cy1)):
                data[key].append(coordinate)
        return {**data, "color": color, "width": width}

    def _draw_graph(self, graph: dict[str, Any]) -> None:
        edges = graph["edges"]
        pairs = [(e["source"], e["target"]) for e in edges]
        colors = [JUMP if e["jump"] else EDGE for e in edges]
        rows = self._edge_rows(pairs, colors, [3.0 if e["jump"] else 1.2 for e in edges])
        self.edges.data = {**rows, "source": [s for s, _ in pairs], "target": [t for _, t in pairs]}
        arrows = columns("x", "y", "angle", "color")
        labels = columns("x", "y", "label", "color", "what")
        for i, e in enumerate(edges):
            ctrl = [rows[k][i] for k in ("x0", "cx0", "cx1", "x1")], [rows[k][i] for k in ("y0", "cy0", "cy1", "y1")]
            (ax, bx), (ay, by) = ((_bezier(0.8, *c), _bezier(0.86, *c)) for c in ctrl)
            arrows["x"].append(bx)
            arrows["y"].append(by)
            arrows["angle"].append(float(np.arctan2(by - ay, bx - ax)) - np.pi / 2)
            arrows["color"].append(colors[i])
            labels["x"].append(_bezier(0.5, *ctrl[0]))
            labels["y"].append(_bezier(0.5, *ctrl[1]) + LABEL_H * 0.7)  # above its edge
            labels["label"].append(e["label"].replace(" ", "␣"))
            labels["color"].append(JUMP if e["jump"] else "#444444")
            labels["what"].append(
                f"{e['source']} -> {e['target']}: {e['label']} ({e['chars']} {tr('characters')})"
                + (f", {tr('jump edge')}" if e["jump"] else "")
            )
        labels["y"] = spread_labels(labels["x"], labels["y"], labels["label"])
        self.arrows.data = arrows
        self.edge_labels.data = labels
        ids = [s["id"] for s in graph["states"]]
        self.states.data = {
            "x": [self.positions[i][0] for i in ids],
            "y": [self.positions[i][1] for i in ids],
            "id": [str(i) for i in ids],
            "fill": [FORCED if s["forced"] else STATE for s in graph["states"]],
            "line": ["#222222" if s["accepting"] else "#6b6b6b" for s in graph["states"]],
            "ring": [4.0 if s["accepting"] else 1.0 for s in graph["states"]],
            "what": [
                f"{s['id']} ({tr('layer')} {s['layer']})"
                + (f", {tr('accepting')}" if s["accepting"] else "")
                + (f", {tr('forced: one legal character')}" if s["forced"] else "")
                for s in graph["states"]
            ],
        }
        xs = [p[0] for p in self.positions.values()]
        ys = [p[1] for p in self.positions.values()] + labels["y"]
        self.graph.x_range.start, self.graph.x_range.end = -0.8, max(xs) + 0.8
        self.graph.y_range.start, self.graph.y_range.end = min(ys) - 0.8, max(ys) + 1.0
        self.graph.height = int(UNIT_PX * (max(ys) - min(ys) + 1.8)) + 60

    # -- one step of the trace ------------------------------------------------------------
    def show_step(self, index: int) -> None:
        if not self.trace:
            return
        step = self.trace[min(index, len(self.trace) - 1)]
        path = self.chains[step["state"]] if step["jump"] else [step["state"], step["to"]]
        walked = list(zip(path, path[1:])) if step["chars"] else []
        self.active.data = self._edge_rows(walked, [ACTIVE] * len(walked), [5.0] * len(walked))
        x, y = self.positions[step["state"]]
        self.current.data = {"x": [x], "y": [y]}
        self._show_mask(step)
        self._show_text(step)
        fp, fc = step["forwards_plain"], step["forwards_compressed"]
        self.counts.data = {**self.counts.data, "forwards": [fp, fc], "label": [str(fp), str(fc)]}
        if step["jump"]:
            what = (
                f"{tr('jump edge')}: {quoted(step['chars'])} ({len(step['chars'])} {tr('characters')}, "
                f"{tr('no forward and no random number of its own: fed with the next forward')})"
            )
        elif step["chars"]:
            choices = len(step["allowed"]) + step["end_allowed"]
            what = f"{tr('sampled')} {quoted(step['chars'])} {tr('from')} {choices} {tr('choices')}" + (
                f" ({tr('forced: no random number drawn')})" if choices == 1 else ""
            )
        else:
            what = tr("sampled end-of-text")
        self.step_text.text = (
            f"{tr('step')} {index + 1}/{len(self.trace)}: {tr('state')} {step['state']} -> {step['to']}; {what}\n"
            f"{tr('forwards so far')}: {tr('plain')} {fp}, {tr('compressed')} {fc}"
        )

    def _show_mask(self, step: dict[str, Any]) -> None:
        cells = [*VOCAB, "END"]
        allowed = set(step["allowed"])
        chosen = step["chars"][:1] or "END"
        ok = [c in allowed for c in VOCAB] + [step["end_allowed"]]
        self.mask.data = {
            "x": [i % GRID_COLUMNS for i in range(len(cells))],
            "y": [-(i // GRID_COLUMNS) for i in range(len(cells))],
            "char": ["␣" if c == " " else c for c in cells],
            "fill": [ALLOWED if a else MASKED for a in ok],
            "line": [ACTIVE if c == chosen else "#ffffff" for c in cells],
            "width": [3.0 if c == chosen else 1.0 for c in cells],
            "what": [tr("chosen") if c == chosen else tr("allowed") if a else tr("masked") for c, a in zip(cells, ok)],
        }

    def _show_text(self, step: dict[str, Any]) -> None:
        shown = self.output[: step["emitted"]]
        first_new = step["emitted"] - len(step["chars"])
        self.text.data = {
            "x": [i % TEXT_COLUMNS for i in range(len(shown))],
            "y": [-(i // TEXT_COLUMNS) for i in range(len(shown))],
            "char": ["␣" if c == " " else c for c in shown],
            "color": [JUMP if self.jumped_at[i] else "#222222" for i in range(len(shown))],
            "back": ["#ffe08a" if i >= first_new else "#ffffff" for i in range(len(shown))],
            "how": [tr("through a jump edge") if self.jumped_at[i] else tr("sampled") for i in range(len(shown))],
        }
