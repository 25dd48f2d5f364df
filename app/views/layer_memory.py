"""View of the `layer-memory` lab: one request's cache layer by layer and as it grows (full layers
growing, window layers sliding, latent layers thin, linear layers fixed), and the requests each
model holds on the chosen GPUs, side by side."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LabelSet
from bokeh.plotting import figure

from app.i18n import tr
from app.text import plain
from app.view import LabView, TextTable
from app.views.drawing import LAYER_NAMES
from kvweb.jsonable import number
from kvweb.lab import Lab

COLORS = {"full": "#4c72b0", "sliding": "#55a868", "latent": "#c44e52", "linear": "#8172b2"}
MARK_PX = 10  # each layer's mark (by_layer), drawn whatever its bar's height
NAMES = LAYER_NAMES


class LayerMemoryView(LabView):
    labs = ("layer-memory",)

    def __init__(self) -> None:
        super().__init__()
        self.layers = ColumnDataSource({"layer": [], "mb": [], "kind": [], "color": []})
        self.by_layer = figure(
            title=tr("One request's cache, layer by layer (one GPU)"),
            height=320,
            sizing_mode="stretch_width",
            x_axis_label=tr("layer"),
            y_axis_label=tr("MB"),
            tools="pan,wheel_zoom,reset,save",
        )
        bars = self.by_layer.vbar(
            x="layer", top="mb", width=0.8, color="color", source=self.layers, legend_field="kind"
        )
        # A window layer holds `window` tokens, a full layer the whole context: at the default
        # gpt-oss-20b and 32k tokens its bar is 1/256 of a full layer's, under a pixel high. Each
        # layer also gets a mark of fixed size at its bar's top, in its type's colour (in the same
        # legend entry), so every layer's type shows, the bars' heights staying true to scale.
        self.marks = self.by_layer.scatter(
            x="layer",
            y="mb",
            marker="square",
            size=MARK_PX,
            color="color",
            line_color="white",
            source=self.layers,
            legend_field="kind",
        )
        self.by_layer.add_tools(
            HoverTool(
                renderers=[bars, self.marks],
                tooltips=[(tr("layer"), "@layer"), ("", "@kind"), (tr("MB"), "@mb{0,0.000}")],
            )
        )
        self.by_layer.y_range.start = 0  # below 0 only the marks' lower halves (`update`)
        self.by_layer.y_range.range_padding = 0.2  # room above the tallest bar for its size
        self.by_layer.legend[0].ncols = 4
        self.by_layer.add_layout(self.by_layer.legend[0], "below")  # never over the bars
        # each layer type's size written over its first layer: a window layer's bar beside a full
        # layer's is too thin to read, and it is the point of the figure
        self.sizes = ColumnDataSource({"layer": [], "mb": [], "text": []})
        self.by_layer.add_layout(
            LabelSet(
                x="layer",
                y="mb",
                text="text",
                source=self.sizes,
                y_offset=MARK_PX // 2 + 3,
                text_align="center",
                text_font_size="11px",
                text_color="#333333",
            )
        )

        self.growth = ColumnDataSource({"context": [], **{k: [] for k in COLORS}})
        self.grows = figure(
            title=tr("As the request grows (one GPU)"),
            height=420,
            sizing_mode="stretch_width",
            min_width=300,
            x_axis_label=tr("context (tokens)"),
            y_axis_label=tr("GB"),
            tools="pan,wheel_zoom,reset,save",
        )
        areas = self.grows.varea_stack(
            list(COLORS),
            x="context",
            source=self.growth,
            color=list(COLORS.values()),
            legend_label=[tr(NAMES[k]) for k in COLORS],
        )
        self.grows.add_tools(
            HoverTool(
                renderers=areas[:1],
                mode="vline",
                tooltips=[
                    (tr("context (tokens)"), "@context{0,0}"),
                    *[(tr(NAMES[k]), f"@{k}{{0,0.000}} GB") for k in COLORS],
                ],
            )
        )
        self.grows.legend[0].ncols = 2
        self.grows.add_layout(self.grows.legend[0], "below")  # outside the areas, also on a phone
        self.grows.y_range.start = 0

        self.models = ColumnDataSource({"model": [], "requests": [], "color": [], "per_token": [], "per_sequence": []})
        self.capacity = figure(
            title=tr("Requests of this length that fit, per model"),
            height=420,
            sizing_mode="stretch_width",
            min_width=300,
            y_range=FactorRange(),
            x_axis_label=tr("requests"),
            tools="save",
        )
        self.capacity.hbar(y="model", right="requests", height=0.7, color="color", source=self.models)
        self.capacity.add_tools(
            HoverTool(
                tooltips=[
                    ("", "@model"),
                    (tr("requests"), "@requests{0,0}"),
                    (tr("KV per token, all GPUs"), "@per_token{0,0} B"),
                    (tr("KV per request, all GPUs"), "@per_sequence{0,0.000} GB"),
                ]
            )
        )
        self.capacity.x_range.start = 0
        self.note = plain(css_class="kv-layer-note")
        self.table = TextTable("layer-memory-numbers", "kv-layer-numbers")

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.note,
            self.by_layer,
            pn.Row(self.grows, self.capacity, sizing_mode="stretch_width"),
            self.table.pane,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        layers = result["layers"]
        self.layers.data = {
            "layer": list(range(len(layers["kind"]))),
            "mb": [b / 1e6 for b in layers["bytes_per_gpu"]],
            "kind": [tr(NAMES[k]) for k in layers["kind"]],
            "color": [COLORS[k] for k in layers["kind"]],
        }
        # room under 0 for half a mark of a near-empty layer: the frame is about 240 px high
        tallest = max((b / 1e6 for b in layers["bytes_per_gpu"]), default=0)
        self.by_layer.y_range.start = -MARK_PX / 2 / 240 * 1.2 * tallest
        firsts = {k: i for i, k in reversed(list(enumerate(layers["kind"])))}
        self.sizes.data = {
            "layer": list(firsts.values()),
            "mb": [layers["bytes_per_gpu"][i] / 1e6 for i in firsts.values()],
            "text": [f"{number(layers['bytes_per_gpu'][i] / 1e6, 3)} MB" for i in firsts.values()],
        }
        growth = result["growth"]
        self.growth.data = {"context": growth["context"], **{k: [b / 1e9 for b in growth[k]] for k in COLORS}}
        models = result["models"]
        self.capacity.y_range.factors = [m["model"] for m in models]
        self.models.data = {
            "model": [m["model"] for m in models],
            "requests": [m["capacity_requests"] for m in models],
            "color": [
                "#dd8452" if m["model"] == result["model"] else "#4c72b0" if m["fits"] else "#bbbbbb" for m in models
            ],
            "per_token": [m["kv_bytes_per_token_total"] for m in models],
            "per_sequence": [m["kv_bytes_per_sequence_total"] / 1e9 for m in models],
        }
        kinds = ", ".join(f"{g['layers']} {tr(NAMES[g['kind']])}" for g in result["groups"])
        self.note.text = tr(
            "{model}: {kinds}. One request of {context} tokens takes {gb} GB over the GPUs; "
            "{requests} such requests fit."
        ).format(
            model=result["model"],
            kinds=kinds,
            context=number(lab.context),
            gb=number(result["kv_bytes_per_sequence_total"] / 1e9, 4),
            requests=number(result["capacity_requests"]),
        )
        rows = [
            [tr("KV per token, growing part, one GPU (B)"), number(result["kv_bytes_per_token_per_gpu"])],
            [tr("KV per token, growing part, all GPUs (B)"), number(result["kv_bytes_per_token_total"])],
            [tr("KV per request, one GPU (GB)"), number(result["kv_bytes_per_sequence_per_gpu"] / 1e9, 4)],
            [tr("KV per request, all GPUs (GB)"), number(result["kv_bytes_per_sequence_total"] / 1e9, 4)],
            [tr("requests that fit"), number(result["capacity_requests"])],
        ]
        rows += [
            [
                f"{tr('decode step, one request')}: {tr(NAMES[p['kind']])} ({tr('KV read, MB')})",
                number(p["kv_bytes_read"] / 1e6, 4),
            ]
            for p in result["decode_attention"]
        ]
        self.table.show([tr("figure"), tr("value")], rows)
