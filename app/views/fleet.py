"""View of the `fleet` lab: each router's prefix hit rate beside the single engine's, the regret
of its decisions, each replica's load over time behind the first router listed, and a table of
the fleet's figures per router (and, with prefill or encode replicas, disaggregated against
co-located, with the encode replicas' work).
Up to `LEGEND_REPLICAS` replicas the load chart has a legend; with more, hover names a line."""

from __future__ import annotations

from typing import Any

import panel as pn
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Legend, LegendItem, Span
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from app.i18n import tr, yes_no
from app.text import plain
from app.view import Explainer, LabView, TextTable, columns, percent
from app.views.schedulers import explained_labels
from kvweb.jsonable import number
from kvweb.lab import Lab

LEGEND_REPLICAS = 8  # the load chart's legend names up to this many lines (more would crowd a phone)


def ms(seconds: float | None) -> str:
    return number(1e3 * seconds, 3) if seconds is not None else ""


def router_rows(
    rows: list[dict[str, Any]], per_replica: dict[str, list[dict[str, Any]]]
) -> tuple[list[str], list[list[str]]]:
    """Per router: throughput, TTFT and TPOT p50 / p99, SLO attainment, hit rate, regret; with LoRA
    adapters, their loads (all replicas' and each one's) and each replica's slots at the end."""
    lora = "adapter_loads" in rows[0]
    header = [
        tr("router"),
        tr("throughput (tokens/s)"),
        "TTFT p50 / p90 / p99 (ms)",
        "TPOT p50 / p90 / p99 (ms)",
        tr("SLO attainment"),
        tr("prefix hit rate"),
        tr("regret (tokens)"),
        tr("decisions with regret"),
        *((tr("LoRA adapter loads: all (per replica)"), tr("LoRA adapters in each replica's slots")) if lora else ()),
    ]
    return header, [
        [
            r["router"],
            number(r["throughput_tok_s"], 4),
            " / ".join(ms(r["ttft_s"][p]) for p in ("p50", "p90", "p99")),
            " / ".join(ms(r["tpot_s"][p]) for p in ("p50", "p90", "p99")),
            percent(r["slo_attainment"]),
            percent(r["prefix_hit_rate"]),
            f"{r['regret']['total_tokens']:,}",
            percent(r["regret"]["share_with_regret"]),
            *(adapter_cells(r["adapter_loads"], per_replica[r["router"]]) if lora else ()),
        ]
        for r in rows
    ]


def adapter_cells(loads: int, replicas: list[dict[str, Any]]) -> tuple[str, str]:
    """'12 (3 / 4 / 5)' and each replica's adapters in slots, '1, 4 | 2 | 3, 5' (adapter numbers)."""
    each = " / ".join(f"{p['lora']['loads']:,}" for p in replicas)
    return f"{loads:,} ({each})", " | ".join(", ".join(map(str, p["lora"]["in_slots"])) or "-" for p in replicas)


class FleetView(LabView):
    labs = ("fleet",)

    def __init__(self) -> None:
        super().__init__()
        self.summary = plain(css_class="kv-fleet-summary")
        self.bars = ColumnDataSource(columns("router", "hit_rate", "regret"), name="fleet-bars")
        tools = "save"
        self.hits = figure(
            title=tr("prefix hit rate per router (dashed: the single engine's)"),
            x_range=FactorRange(),
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            tools=tools,
            y_axis_label=tr("prefix hit rate"),
            y_range=(0, 1.05),
        )
        self.hits.vbar(x="router", top="hit_rate", width=0.6, source=self.bars, color="#1f77b4")
        self.hits.add_tools(
            HoverTool(tooltips=[(tr("router"), "@router"), (tr("prefix hit rate"), "@hit_rate{0.0 %}")])
        )
        self.single = Span(location=0.0, dimension="width", line_dash="dashed", line_color="#444444")
        self.hits.add_layout(self.single)
        self.regret = figure(
            title=tr("regret: prefix tokens another replica had cached"),
            x_range=FactorRange(),
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            tools=tools,
            y_axis_label=tr("tokens"),
        )
        self.regret.vbar(x="router", top="regret", width=0.6, source=self.bars, color="#d62728")
        self.regret.add_tools(HoverTool(tooltips=[(tr("router"), "@router"), (tr("regret (tokens)"), "@regret{0,0}")]))
        self.load_lines = ColumnDataSource(columns("t", "load", "replica", "color"), name="fleet-load")
        self.load = figure(
            title="",
            height=300,
            sizing_mode="stretch_width",
            min_width=300,
            tools="pan,wheel_zoom,reset,save",
            x_axis_label=tr("time (s)"),
            y_axis_label=tr("requests outstanding"),
        )
        self.lines = self.load.multi_line("t", "load", source=self.load_lines, line_color="color", line_width=1.5)
        self.load.add_tools(HoverTool(tooltips=[(tr("replica"), "@replica")]))
        self.legend = Legend(
            title=tr("replica"),
            orientation="horizontal",
            label_text_font_size="11px",
            title_text_font_size="11px",
            margin=0,
            padding=2,
            border_line_alpha=0,
        )
        self.load.add_layout(self.legend, "below")
        self.table = TextTable("fleet-table", "kv-fleet-table")
        self.explainer = Explainer("kv-fleet-explain")  # a router's headline figure's formula
        self.disaggregated = TextTable("fleet-disaggregation", "kv-fleet-disaggregation")
        self.note = plain(css_class="kv-fleet-note")
        self.split_note = plain(
            tr(
                "Prefill/decode disaggregation on the same GPUs: a split pays when it keeps more "
                "requests within the SLO than the co-located fleet, or as many with a lower TPOT "
                "p99. Each prefill replica's KV leaves over its own link, shared by the transfers "
                "in flight."
            ),
            css_class="kv-fleet-split-note",
        )
        self.encode_table = TextTable("fleet-encode", "kv-fleet-encode")  # the chosen run's encode replicas
        self.encode_pane = pn.Column(self.encode_table.pane, sizing_mode="stretch_width", margin=0)
        self.split_pane = pn.Column(
            pn.pane.Bokeh(self.split_note, sizing_mode="stretch_width"),
            self.disaggregated.pane,
            self.encode_pane,
            sizing_mode="stretch_width",
            margin=0,
        )

    def layout(self) -> pn.viewable.Viewable:
        return pn.Column(
            self.summary,
            self.table.pane,
            self.explainer.layout,
            pn.Row(self.hits, self.regret, sizing_mode="stretch_width"),
            self.load,
            self.note,
            self.split_pane,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        rows = result["routers"]
        names = [r["router"] for r in rows]
        self.hits.x_range.factors = names
        self.regret.x_range.factors = names
        self.bars.data = {
            "router": names,
            "hit_rate": [r["prefix_hit_rate"] for r in rows],
            "regret": [r["regret"]["total_tokens"] for r in rows],
        }
        single = result["single_engine"]
        self.single.location = single["prefix_hit_rate"]
        first = names[0]
        series = result["series"][first]
        self.load.title.text = f"{tr('requests outstanding on each replica')}: {first}"
        n = len(series["outstanding"])
        self.load_lines.data = {
            "t": [series["t"]] * n,
            "load": series["outstanding"],
            "replica": [str(i) for i in range(n)],
            "color": [Category10_10[i % 10] for i in range(n)],
        }
        self.legend.items = [LegendItem(label=str(i), renderers=[self.lines], index=i) for i in range(n)]
        self.legend.visible = n <= LEGEND_REPLICAS
        gpu = result["scenario"]
        self.summary.text = (
            f"{result['replicas']} {tr('replicas')} x {result['mode']}, {gpu['model']}, {lab.tp} x "
            f"{gpu['gpu']} {tr('per replica')}, {result['submitted']:,} "
            f"{tr('requests')}; {tr('the single engine')}: {tr('prefix hit rate')} "
            f"{percent(single['prefix_hit_rate'])}, {tr('throughput (tokens/s)')} "
            f"{number(single['throughput_tok_s'], 4)}"
        )
        self.table.show(*router_rows(rows, result["per_replica"]))
        self.explainer.show(lab.explain(result), explained_labels(), "throughput_tok_s")
        self.note.text = (
            ""
            if result["shared_prefixes"]
            else tr("this workload shares no prefix: routers differ only in load balance")
        )
        split = result.get("disaggregation")
        self.split_pane.visible = bool(split)
        if split:
            self.disaggregated.show(*disaggregation_rows(split))
        encode = split.get("disaggregated", {}).get("encode") if split else None
        self.encode_pane.visible = encode is not None
        if encode is not None:
            self.encode_table.show(*encode_rows(encode))


def disaggregation_rows(d: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The co-located fleet, then each split of the same GPUs into prefill + decode replicas (the
    one chosen marked), and whether it pays."""
    header = [
        tr("fleet"),
        "GPU",
        "TTFT p50 / p99 (ms)",
        "TPOT p50 / p99 (ms)",
        tr("SLO attainment"),
        tr("throughput (tokens/s)"),
        tr("KV transfer p50 / p99 (ms)"),
        tr("pays?"),
    ]

    def row(name: str, r: dict[str, Any], transfer: str, pays: str) -> list[str]:
        return [
            name,
            str(r["gpus"]),
            f"{ms(r['ttft_s']['p50'])} / {ms(r['ttft_s']['p99'])}",
            f"{ms(r['tpot_s']['p50'])} / {ms(r['tpot_s']['p99'])}",
            percent(r["slo_attainment"]),
            number(r["throughput_tok_s"], 4),
            transfer,
            pays,
        ]

    rows = [row(tr("co-located"), d["co_located"], "", "")]
    for s in d["splits"]:
        mark = " ←" if s["prefill_replicas"] == d["prefill_replicas"] else ""
        encode = s.get("encode_replicas", 0)
        if not s["prefill_replicas"]:  # the encode pool before a co-located fleet
            name = f"{tr('encode')} {encode} + {tr('co-located')} {s['decode_replicas']}"
        else:
            pools = (*((encode,) if encode else ()), s["prefill_replicas"], s["decode_replicas"])
            name = f"{tr('disaggregated')} {' + '.join(map(str, pools))}"
        transfer = s.get("transfer_s")
        rows.append(
            row(
                name + mark,
                s,
                f"{ms(transfer['p50'])} / {ms(transfer['p99'])}" if transfer else "",
                yes_no(s["pays"]),
            )
        )
    return header, rows


def encode_rows(e: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Each encode replica of the chosen disaggregated run: requests, images its encoder computed and
    found cached, the encoder's busy time and the embeddings' bytes sent."""
    header = [
        tr("encode replica"),
        tr("requests"),
        tr("images encoded"),
        tr("encoder cache hits"),
        tr("encoder busy (ms)"),
        tr("embeddings sent (MB)"),
    ]
    rows = [
        [
            str(i),
            f"{r['requests']:,}",
            f"{r['images']:,}",
            f"{r['hits']:,}",
            ms(r["busy_s"]),
            number(r["embedding_bytes"] / 1e6, 4),
        ]
        for i, r in enumerate(e["replicas"])
    ]
    return header, rows
