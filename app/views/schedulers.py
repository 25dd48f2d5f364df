"""View of the `schedulers` lab: one memory map per mode (papers' engine, vLLM V1, SGLang),
animated over simulated time, the figures of the three side by side in a table, and the prefix
hit rate, batch and memory over time. With the host-memory tier on (vLLM V1 and SGLang), the hit
rate's dotted lines are the share the tier served, a figure shows what it holds, and the table gives
hits by tier, bytes over the host link and the TTFT without the tier.

A map cell is a KV block (vLLM) or a run of token slots (SGLang): blue while a running request
holds it, purple while running requests read it from the prefix cache (blocks a request hit or
shares with another; radix-tree nodes locked by running requests), green when it holds the KV of
a finished or preempted request that nobody holds but a later request can still reuse, white
when free, orange while a running request holds it ahead of its KV (vLLM V1's speculative decoding:
slots for the drafts and lookahead, kept after the drafts are rejected; SGLang frees its draft and
verify slots within the step, so its map shows none, and the step's line says how many its last
decode step took and freed). For a model whose layers
are not all alike a mode's KV cache groups get a map each
(`GroupMap` in the trace): vLLM V1's one pool drawn once per group, another group's blocks grey,
so a window group's blocks are seen freed as it slides while a full group's grow. With LoRA
adapters a line gives the KV left beside the adapters' slots, the step's line the adapters in GPU
slots and the requests waiting for a slot, and a band under each mode's map its `max_loras` slots,
each named by the adapter the trace has in it at the step (SGLang's base model takes one too). A
mode not run gets a short title and its reason written in its empty map (a phone's narrow map cuts
a long title).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import panel as pn
from bokeh.models import ColumnDataSource, CustomJSHover, HoverTool, Label, Legend, LegendItem, Range1d, Span
from bokeh.plotting import figure

from app.i18n import tr
from app.text import LiveText, plain
from app.view import (
    Explainer,
    LabView,
    TextTable,
    columns,
    figures_rows,
    padded_end,
    serving_rows,
    set_range,
    steady_ticks,
)
from app.views.drawing import CELL, LAYER_NAMES, Cells, indexed_color, legend_below, request_hover
from kvweb.jsonable import number
from kvweb.lab import Lab
from kvweb.prefix.modes import MODES
from kvweb.serving.loop.continuous_batching import AHEAD, CACHED, OTHER, SHARED
from kvweb.serving.memory.lora import TARGETS

HITS_HEIGHT = 230  # pixels of the hit-rate figure without a host tier
KEY_HEIGHT = 64  # pixels of the maps' key, two rows
STATES = (
    ("running", "#4c78a8"),
    ("running, from the prefix cache", "#9467bd"),
    ("cached, reusable", "#54a24b"),
    ("free", "#ffffff"),
    ("another group's", "#cfcfcf"),
    ("held ahead for draft tokens (lookahead)", "#f58518"),
)
WHOLE_POOL = 4  # the states a map of the whole pool has (not OTHER, which only a group's map has)
LOOKAHEAD = 5  # blocks held ahead of a request's KV: speculative decoding only
MAP_HEIGHT = 320  # pixels of a mode's map (a mode not run: NOT_RUN_HEIGHT, its reason inside)
NOT_RUN_HEIGHT = 110
MAP_WIDTH = 300  # pixels a map takes at least: narrower pages put the maps one under another
SLOTS_A_ROW = 4  # LoRA adapter slots side by side under a map, each wide enough for its adapter's name
SLOT_COLORS = ("#f2b8d8", "#c5b0d5", "#ffd8a8", "#b7dfe8", "#dbdb8d", "#c7e9c0", "#fdd0a2", "#d9d9d9")  # by adapter
LOADED = "#d62728"  # the outline of a slot whose adapter was loaded since the frame before


def state_codes(owners: np.ndarray) -> np.ndarray:
    """Each cell's index in STATES: a request id is running, the other owners say which state."""
    codes = np.where(owners >= 0, 0, 3).astype(np.int8)
    codes[owners == SHARED] = 1
    codes[owners == CACHED] = 2
    codes[owners == OTHER] = 4
    codes[owners == AHEAD] = LOOKAHEAD
    return codes


def ms(d: dict[str, Any], key: str) -> str:
    """A distribution's figure (seconds) in whole milliseconds."""
    return f"{1e3 * (d[key] or 0):.0f}"


def figures_table(modes: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The modes' figures: a row per figure, a column per mode ("-" for a mode not run)."""
    common = serving_rows()
    rows = [
        common["throughput"],
        common["requests"],
        common["slo"],
        (tr("TTFT p50 / p90 / p99 (ms)"), lambda m: " / ".join(ms(m["ttft_s"], k) for k in ("p50", "p90", "p99"))),
        (tr("TPOT p50 / p90 / p99 (ms)"), lambda m: " / ".join(ms(m["tpot_s"], k) for k in ("p50", "p90", "p99"))),
        (tr("inter-token latency p99 / max (ms)"), lambda m: f"{ms(m['itl_s'], 'p99')} / {ms(m['itl_s'], 'max')}"),
        (tr("prefix hit rate (prompt tokens)"), lambda m: f"{100 * m['prefix_hit_rate']:.1f} %"),
        (tr("memory held by running requests (time avg)"), lambda m: f"{100 * m['occupied_frac']:.1f} %"),
        (tr("KV / held (utilisation)"), lambda m: f"{100 * m['utilisation']:.1f} %"),
        (tr("cached, reusable (time avg)"), lambda m: f"{100 * m['cached_frac']:.1f} %"),
        (
            tr("at the end: held by requests / cached, reusable"),
            lambda m: f"{100 * m['end_usage_frac']:.1f} % / {100 * m['end_cached_frac']:.1f} %",
        ),
        common["batch"],
        (tr("most requests at once"), lambda m: f"{m['max_batch']:,}"),
        common["preemptions"],
        common["recomputed"],
        (tr("of them found cached again"), lambda m: f"{m['resumed_hit_tokens']:,}"),
        *(host_tier_rows() if any("host_tier" in m for m in modes) else ()),
        *(spec_rows() if any("spec" in m for m in modes) else ()),
        *(lora_rows() if any("lora" in m for m in modes) else ()),
        *(encoder_rows() if any("encoder" in m for m in modes) else ()),
        (tr("max rate within the SLO (requests/s)"), lambda m: number(m["max_rate"], 3) if "max_rate" in m else "-"),
        common["time"],
        common["finished"],
    ]
    by_mode = {m["mode"]: m for m in modes}
    return figures_rows(rows, [by_mode.get(m) for m in MODES], list(MODES))


def explained_labels() -> dict[str, str]:
    """The names of the figures a learner can open the arithmetic of (SchedulersLab.explain)."""
    return {
        "throughput_tok_s": tr("throughput (tokens/s)"),
        "step_s": tr("mean step (s)"),
        "ttft_p50": "TTFT p50 (s)",
        "tpot_p50": "TPOT p50 (s)",
        "prefix_hit_rate": tr("prefix hit rate (prompt tokens)"),
        "kv_capacity_tokens": f"{tr('KV capacity')} ({tr('tokens')})",
    }


def step_costs(modes: list[dict[str, Any]]) -> str:
    """Where the modes' step times come from: each engine's measured kernels, or the roofline."""
    sources = dict.fromkeys(m["step_cost"] for m in modes if "step_cost" in m)
    return "; ".join(sources) or tr(
        "the paper GPU's roofline (assumed efficiencies: cost_model=measured for kernels measured on real GPUs)"
    )


def host_tier_rows() -> list[tuple[str, Any]]:
    """The host tier's rows, shown when it is on ("-" for a mode without one): prompt tokens by where they came from,
    bytes over the host link, and the TTFT beside the same run without the tier."""

    def tier(show: Any) -> Any:
        return lambda m: show(m["host_tier"]) if "host_tier" in m else "-"

    return [
        (
            tr("host tier: prompt tokens from GPU / host / computed"),
            tier(lambda h: f"{h['gpu_hit_tokens']:,} / {h['host_hit_tokens']:,} / {h['computed_tokens']:,}"),
        ),
        (
            tr("host tier: GB written / loaded over the host link"),
            tier(lambda h: f"{h['stored_bytes'] / 1e9:,.1f} / {h['loaded_bytes'] / 1e9:,.1f}"),
        ),
        (tr("host tier: seconds of loads (steps wait for them)"), tier(lambda h: f"{h['load_s']:.3f}")),
        (
            tr("TTFT p50 / p99 without the host tier (ms)"),
            tier(lambda h: " / ".join(ms(h["ttft_s_without"], k) for k in ("p50", "p99"))),
        ),
    ]


def spec_rows() -> list[tuple[str, Any]]:
    """Speculative decoding's rows ("-" for a mode that does not model it): tokens a decoding request
    keeps a step, the drafts accepted, and the KV capacity held ahead for lookahead."""

    def spec(show: Any) -> Any:
        return lambda m: show(m["spec"]) if "spec" in m else "-"

    return [
        (tr("speculative decoding: tokens kept per request a step"), spec(lambda d: f"{d['tokens_per_step']:.2f}")),
        (
            tr("speculative decoding: draft tokens accepted"),
            spec(lambda d: f"{d['accepted']:,} / {d['drafted']:,} ({100 * d['accepted_frac']:.1f} %)"),
        ),
        (tr("KV held ahead for lookahead, whole blocks (time avg)"), spec(lambda d: f"{100 * d['ahead_frac']:.2f} %")),
    ]


def spec_text(modes: list[dict[str, Any]], kv_blocks: int) -> str:
    """One line per mode that ran speculative decoding: its drafts, what they kept, the capacity lost
    ahead, and the drafter's weights and the blocks left beside its layers (`kv_blocks`: the GPU's
    without it)."""
    return "\n".join(
        f"{m['mode']}: "
        + tr(
            "speculative decoding, {0} draft tokens a step (acceptance {1}): {2} tokens a step, "
            "{3} % of the KV capacity held ahead for lookahead (time avg)"
        ).format(
            m["spec"]["spec_tokens"],
            ", ".join(f"{r:g}" for r in m["spec"]["acceptance"]),
            f"{m['spec']['tokens_per_step']:.2f}",
            f"{100 * m['spec']['ahead_frac']:.2f}",
        )
        + "; "
        + tr(
            "the {0} drafter ({1} GB of weights a GPU) keeps its layers' KV in the same blocks: {2} blocks instead of {3}"
        ).format(
            m["spec"]["drafter"],
            f"{m['spec']['drafter_weight_bytes'] / 1e9:.2f}",
            f"{m['spec']['kv_blocks']:,}",
            f"{kv_blocks:,}",
        )
        for m in modes
        if "kv_blocks" in m.get("spec", {})
    )


def slot_spec_text(modes: list[dict[str, Any]], kv_tokens: int) -> str:
    """One line per mode on token slots (SGLang) that ran speculative decoding: its drafts, what
    they kept, the draft and verify slots it took and freed in the same step (nothing held ahead),
    and the slots left beside the drafter's layers (`kv_tokens`: the GPU's without it)."""
    return "\n".join(
        f"{m['mode']}: "
        + tr(
            "speculative decoding, {0} draft tokens a step (acceptance {1}): {2} tokens a step; each decode "
            "step takes {0} slots a request for the drafts (handed back once drafted) and {3} to verify, and "
            "frees the rejected ones in the same step: {4} of {5} verify slots, so none is held ahead of a "
            "request's KV; the drafter's layers keep their KV at the same slot indices: {6} token slots "
            "instead of {7}"
        ).format(
            d["spec_tokens"],
            ", ".join(f"{r:g}" for r in d["acceptance"]),
            f"{d['tokens_per_step']:.2f}",
            d["spec_tokens"] + 1,
            f"{d['rejected_slots']:,}",
            f"{d['verify_slots']:,}",
            f"{d['kv_slots']:,}",
            f"{kv_tokens:,}",
        )
        for m in modes
        if "kv_slots" in (d := m.get("spec", {}))
    )


def lora_rows() -> list[tuple[str, Any]]:
    """LoRA adapters' rows ("-" for a mode that does not model them): the KV blocks beside the
    adapters' slots (SGLang's token slots), and the adapters loaded over the host link with the
    seconds steps waited."""

    def lora(show: Any) -> Any:
        return lambda m: show(m["lora"]) if "lora" in m else "-"

    def kv(d: dict[str, Any]) -> str:
        return f"{d['kv_blocks']:,}" if "kv_blocks" in d else tr("{0} token slots").format(f"{d['kv_tokens']:,}")

    return [
        (tr("KV blocks beside the LoRA adapters' slots"), lora(kv)),
        (
            tr("LoRA adapters loaded over the host link / seconds"),
            lora(lambda d: f"{d['loads']:,} / {d['load_s']:.3f}"),
        ),
    ]


def lora_text(modes: list[dict[str, Any]], kv_blocks: int, kv_tokens: int) -> str:
    """One line per mode that served LoRA adapters: the adapters, the slots' bytes and the KV they
    leave, vLLM's in blocks (`kv_blocks`: the GPU's without them), SGLang's in token slots
    (`kv_tokens`), SGLang's base model in a slot of its own."""
    vllm = tr(
        "{0} LoRA adapters of rank {1} on {2}; max_loras {3}: {3} slots of {4} MB beside the KV cache, "
        "{5} blocks instead of {6}"
    )
    sglang = tr(
        "{0} LoRA adapters of rank {1} on {2}; max_loras_per_batch {3}: {3} slots of {4} MB beside the KV "
        "cache (the base model counts as an adapter and starts in one of them), {5} token slots instead of {6}"
    )
    return "\n".join(
        f"{m['mode']}: "
        + (vllm if "kv_blocks" in d else sglang).format(
            d["loras"],
            d["rank"],
            ", ".join(TARGETS[d["targets"]]),
            d["max_loras"],
            f"{d['slot_bytes'] / 1e6:,.1f}",
            f"{d.get('kv_blocks', d.get('kv_tokens')):,}",
            f"{kv_blocks if 'kv_blocks' in d else kv_tokens:,}",
        )
        for m in modes
        if (d := m.get("lora"))
    )


def encoder_rows() -> list[tuple[str, Any]]:
    """Images' rows ("-" for a mode that does not model them): the encoder cache's hits against the
    embeddings the encoder computed, and the chunks cut for the encoder and the images evicted."""

    def encoder(show: Any) -> Any:
        return lambda m: show(m["encoder"]) if "encoder" in m else "-"

    return [
        (tr("encoder cache hits / embeddings computed"), encoder(lambda d: f"{d['hits']:,} / {d['computed']:,}")),
        (
            tr("chunks cut for the encoder / images evicted"),
            encoder(lambda d: f"{d['cut_chunks']:,} / {d['evicted']:,}"),
        ),
    ]


def encoder_text(modes: list[dict[str, Any]]) -> str:
    """One line per mode that served images: the images, the encoder budget and the cache's size."""
    return "\n".join(
        f"{m['mode']}: "
        + tr(
            "{0} images of {1} tokens in each request, drawn from {2} distinct images; encoder budget {3} "
            "embeddings a step, encoder cache {4} embeddings"
        ).format(
            d["images"],
            f"{d['image_tokens']:,}",
            f"{d['image_pool']:,}",
            f"{d['encoder_budget']:,}",
            f"{d['encoder_cache']:,}",
        )
        for m in modes
        if (d := m.get("encoder"))
    )


def sweep_text(sweep: dict[str, dict[str, Any]]) -> str:
    """One line per mode swept over draft lengths: the k with the lowest TPOT p50 against none."""
    lines = []
    for mode, s in sweep.items():
        tpot, rates, best = {p["k"]: p["tpot_p50_s"] for p in s["points"]}, s["acceptance"], s["best_k"]
        why = (
            tr("the longest tried: a longer draft may pay still")
            if best == max(tpot)
            else tr("a longer draft costs each step more than its accepted tokens save")
        )
        lines.append(
            f"{mode}: "
            + tr(
                "draft lengths 0 to {0} at acceptance {1}: the lowest TPOT p50 is at k = {2} ({3} ms, {4} ms "
                "without drafts); {5}"
            ).format(
                max(tpot),
                f"{rates[0]:g}" if len(set(rates)) == 1 else ", ".join(f"{r:g}" for r in rates),
                best,
                f"{1000 * tpot[best]:.2f}",
                f"{1000 * tpot[0]:.2f}",
                why,
            )
        )
    return "\n".join(lines)


def sweep_figure() -> tuple[Any, dict[str, ColumnDataSource], ColumnDataSource]:
    """TPOT p50 against the draft length k, a line of points per speculative mode in its colour, each
    mode's best k starred."""
    points = {
        m: ColumnDataSource({"k": [], "tpot_ms": []}, name=f"schedulers-spec-sweep-{m}")
        for m, info in MODES.items()
        if info.speculative
    }
    best = ColumnDataSource({"k": [], "tpot_ms": []}, name="schedulers-spec-sweep-best")
    fig = figure(
        title=tr("TPOT p50 (ms) against draft tokens per step"),
        height=200,
        sizing_mode="stretch_width",
        toolbar_location=None,
        tools="",
        x_axis_label=tr("draft tokens per step (k)"),
        visible=False,
        name="schedulers-spec-sweep-figure",
    )
    for m, source in points.items():
        fig.line("k", "tpot_ms", source=source, line_width=2, color=MODES[m].color)
        fig.scatter("k", "tpot_ms", source=source, size=6, color=MODES[m].color)
    fig.scatter("k", "tpot_ms", source=best, size=14, marker="star", color="#222222")
    fig.xaxis.ticker.desired_num_ticks = 8
    return fig, points, best


def kv_groups_text(groups: list[dict[str, Any]]) -> str:
    """vLLM V1's KV cache groups, one line each: what a request of the maximum length holds in each
    (empty for a model whose layers are all alike)."""
    if not groups:
        return ""
    lines = [tr("vLLM V1's KV cache groups, one pool of blocks of {0} tokens").format(groups[0]["block_size"])]
    for i, g in enumerate(groups):
        kind = tr(LAYER_NAMES[g["kind"]]) + (f" ({g['window']:,} {tr('tokens')})" if g["window"] else "")
        lines.append(
            f"{i}: {kind}, {g['layers']} {tr('layers')}: "
            + tr("{0} blocks per request of the maximum length").format(f"{g['blocks_per_max_request']:,}")
        )
    return "\n".join(lines)


def group_label(i: int, group: dict[str, Any]) -> str:
    """A KV cache group (or pool) by number, kind, window and layers: "0: sliding window (128 tokens), 12 layers"."""
    window = f" ({group['window']:,} {tr('tokens')})" if group["window"] else ""
    return f"{i}: {tr(LAYER_NAMES[group['kind']])}{window}, {group['layers']} {tr('layers')}"


def groups_note(mode: str, groups: list[dict[str, Any]]) -> str:
    """One line beside a mode's group maps: what the learner sees in them."""
    kinds = {g["kind"] for g in groups}
    if not groups[0]["shared"]:  # SGLang's pools
        parts = [f"{mode}: " + tr("a pool of its own for each kind of layer, drawn one each")]
        if "sliding" in kinds:
            parts.append(
                tr(
                    "the full pool holds every token of a request; the window pool only its last window or "
                    "a little more (the older slots are freed every window's worth of decode steps), and no "
                    "tombstone's (its full slots stay cached)"
                )
            )
        if "linear" in kinds:
            parts.append(
                tr(
                    "the state pool holds one state per running request, and the cached states where a "
                    "prefill or a request ended"
                )
            )
        return "; ".join(parts)
    parts = [
        f"{mode}: "
        + tr("one pool of blocks, drawn once per KV cache group: each group's blocks by state, another group's grey")
    ]
    if "sliding" in kinds:
        parts.append(
            tr(
                "a sliding-window group frees the blocks before its last window as the request grows "
                "(green while still cached)"
            )
        )
    if kinds & {"full", "latent"}:
        parts.append(tr("a full-attention group's blocks grow with the request"))
    if "linear" in kinds:
        parts.append(tr("a linear group holds one block of state per request"))
    return "; ".join(parts)


def cell_figure(cells: Cells, **kwargs: Any) -> tuple[Any, Any]:
    """A figure of memory cells without axes: each cell outlined and pale, filled in its state's
    colour as far as it is written; returns the figure and the outlines' renderer (for hover). A
    cell's state is its index in STATES, coloured in the page (`Cells` sends only numbers)."""
    fig = figure(
        height=320,
        sizing_mode="stretch_width",
        tools="save",
        toolbar_location="above",
        x_range=Range1d(0, 1),
        y_range=Range1d(-1, 0),
        **kwargs,
    )
    fig.axis.visible = False
    fig.grid.visible = False
    color = indexed_color("state", [c for _, c in STATES])
    held = fig.quad(
        left="left",
        right="right",
        top="top",
        bottom="bottom",
        source=cells.source,
        fill_color=color,
        fill_alpha=0.25,
        line_color="#bbbbbb",
        line_width=0.5,
    )
    fig.quad(
        left="left",
        right="right",
        top="fill_top",
        bottom="bottom",
        source=cells.source,
        fill_color=color,
        line_color=None,
    )
    return fig, held


def adapter_name(adapter: int) -> str:
    """A LoRA adapter as a person reads it (vLLM's `LoRARequest` name in the recorded runs), an empty
    slot (0), or SGLang's base model (-1), which takes a slot of its own."""
    return f"lora-{adapter}" if adapter > 0 else tr("base model") if adapter else tr("empty")


def slots_heading(lora: dict[str, Any], block_size: int) -> str:
    """The adapter slots' band's heading: how many, their bytes and the tokens of KV as many bytes hold
    (and in blocks of `block_size`; 0: a pool of token slots)."""
    tokens = f"{lora['slot_kv_tokens']:,.0f}"
    if not block_size:
        return tr("LoRA adapter slots: {0} x {1} MB, each the KV of {2} tokens").format(
            lora["max_loras"], f"{lora['slot_bytes'] / 1e6:,.1f}", tokens
        )
    return tr("LoRA adapter slots: {0} x {1} MB, each the KV of {2} tokens ({3} blocks)").format(
        lora["max_loras"], f"{lora['slot_bytes'] / 1e6:,.1f}", tokens, f"{lora['slot_kv_tokens'] / block_size:,.3g}"
    )


def wrapped(text: str, width: int = 30) -> str:
    """`text` in lines of at most `width` columns (a CJK character takes two), broken after a space
    or a CJK character."""
    lines, line, cols, cut = [], "", 0, 0
    for ch in text:
        w = 2 if ch >= "\u2e80" else 1
        if cols + w > width and cut:
            lines.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
            cols, cut = sum(2 if c >= "\u2e80" else 1 for c in line), 0
        line += ch
        cols += w
        if ch == " " or ch >= "\u2e80":
            cut = len(line)
    return "\n".join([*lines, line])


class StateMap:
    """One mode's KV memory (or one KV cache group's) as a grid of cells coloured by state; `draw`
    shows one frame."""

    def __init__(self, mode: str) -> None:
        self.cells = Cells(f"schedulers-{mode}-cells", "state", "owner")
        self.figure, held = cell_figure(self.cells, min_width=MAP_WIDTH, name=f"schedulers-{mode}-map")
        # LoRA adapters' slots (vLLM V1): a band under the pool, a box per slot named by its adapter
        self.slots = ColumnDataSource(
            columns(*CELL, "x", "y", "slot", "name", "bytes", "color", "outline", "loaded"),
            name=f"schedulers-{mode}-lora-slots",
        )
        boxes = self.figure.quad(
            *CELL, source=self.slots, fill_color="color", line_color="outline", line_width=2, name=f"{mode}-lora"
        )
        self.figure.text(
            "x", "y", "name", source=self.slots, text_font_size="11px", text_align="center", text_baseline="middle"
        )
        # the slots' heading, or why a mode was not run (in its empty map: a phone's narrow map cuts a long title)
        self.note = Label(x=0, y=0, text="", text_font_size="11px", text_color="#444444", name=f"{mode}-map-note")
        self.figure.add_layout(self.note)
        self.figure.add_tools(
            HoverTool(
                renderers=[held],
                tooltips=[("", "@state{state}"), (tr("request"), "@owner{request}"), (tr("KV"), "@written %")],
                formatters={
                    "@state": CustomJSHover(args={"names": [tr(s) for s, _ in STATES]}, code="return names[value]"),
                    "@owner": request_hover("-"),
                },
            ),
            HoverTool(
                renderers=[boxes],
                tooltips=[
                    (tr("LoRA adapter slot"), "@slot"),
                    (tr("adapter"), "@name"),
                    (tr("bytes"), "@bytes{0,0}"),
                    ("", "@loaded"),
                ],
            ),
        )
        self.columns = 1
        self.rows = 0
        self.line = 1.0

    def reset(self, title: str, cells: int, slots: int = 0, heading: str = "") -> None:
        """A grid of `cells` under `title`, and a band of `slots` LoRA adapter slots under `heading`."""
        self.columns = min(32, max(8, int(cells**0.5 + 0.999)))
        self.rows = -(-cells // self.columns)
        self.line = max(1.0, (self.rows + 1) / 22)  # grid rows a line of the band takes: 12-14 px however many rows
        band = self.line * (1.3 + 1.8 * -(-slots // SLOTS_A_ROW)) if slots else 0.0
        self.figure.title.text = title
        self.figure.height = MAP_HEIGHT
        self.figure.x_range.start, self.figure.x_range.end = -0.2, self.columns + 0.2
        self.figure.y_range.start, self.figure.y_range.end = -self.rows - band - 0.2, 0.2
        self.note.x, self.note.y, self.note.text = 0, -self.rows - 0.95 * self.line, heading
        self.note.text_baseline = "bottom"

    def not_run(self, title: str, reason: str) -> None:
        """A mode not run: an empty map, low, its title short and the reason inside, in lines a
        narrow map keeps whole."""
        self.reset(title, 0)
        self.figure.height = NOT_RUN_HEIGHT
        self.figure.x_range.start, self.figure.x_range.end = 0, 1
        self.figure.y_range.start, self.figure.y_range.end = 0, 1
        self.note.x, self.note.y, self.note.text = 0.02, 0.9, wrapped(reason)
        self.note.text_baseline = "top"
        self.cells.show(
            1, np.zeros(0, dtype=np.int32), state=np.zeros(0, dtype=np.int8), owner=np.zeros(0, dtype=np.int32)
        )

    def draw_slots(self, adapters: list[int], before: list[int], slot_bytes: int) -> None:
        """The adapter slots at a step: each box named by the adapter in it (0: empty), coloured by
        the adapter, and outlined red with what it replaced where `before` (the frame before's) differs."""
        width = self.columns / min(len(adapters), SLOTS_A_ROW)
        data: dict[str, list] = columns(*self.slots.data)
        for i, (adapter, was) in enumerate(zip(adapters, before)):
            row, col = divmod(i, SLOTS_A_ROW)
            top = -self.rows - self.line * (1.2 + 1.8 * row)
            box = (col * width + 0.05, (col + 1) * width - 0.05, top, top - 1.5 * self.line)
            loaded = (
                tr("loaded since the last frame, in place of {0}").format(adapter_name(was))
                if adapter != was and adapter > 0
                else ""
            )
            shown = (
                *box,
                (box[0] + box[1]) / 2,
                top - 0.75 * self.line,
                i + 1,
                adapter_name(adapter),
                slot_bytes,
                SLOT_COLORS[adapter % len(SLOT_COLORS)] if adapter > 0 else "#ffffff",
                LOADED if loaded else "#888888",
                loaded,
            )
            for key, item in zip(data, shown):
                data[key].append(item)
        self.slots.data = data

    def draw(self, frame: dict[str, Any]) -> np.ndarray:
        """Show one frame and return its cells' states."""
        owners = np.asarray(frame["owner"], dtype=np.int32)
        states = state_codes(owners)
        self.cells.show(self.columns, np.asarray(frame["written"], dtype=np.int32), state=states, owner=owners)
        return states


class GroupMaps:
    """A mode's maps of its KV cache groups (or pools) in one figure, for a model whose layers are not
    all alike: a band per group, one under another, each the pool's cells under the group's name;
    hidden otherwise. (One figure made with the view: a figure added to a drawn page later can miss
    the data sent with it.)"""

    COLUMNS = 64  # cells a row: a band is a strip of the pool, as wide as the page

    def __init__(self, mode: str) -> None:
        self.cells = Cells(f"schedulers-{mode}-groups-cells", "state", "owner", "group")
        self.figure, held = cell_figure(self.cells, visible=False, name=f"schedulers-{mode}-groups")
        self.titles = ColumnDataSource(columns("x", "y", "text"), name=f"schedulers-{mode}-groups-titles")
        self.figure.text("x", "y", "text", source=self.titles, text_font_size="11px", text_baseline="middle")
        self.group_names = CustomJSHover(args={"names": []}, code="return names[value]")
        self.figure.add_tools(
            HoverTool(
                renderers=[held],
                tooltips=[
                    (tr("group"), "@group{group}"),
                    ("", "@state{state}"),
                    (tr("request"), "@owner{request}"),
                    (tr("KV"), "@written %"),
                ],
                formatters={
                    "@group": self.group_names,
                    "@owner": request_hover("-"),
                    "@state": CustomJSHover(args={"names": [tr(s) for s, _ in STATES]}, code="return names[value]"),
                },
            )
        )
        self.slots = np.zeros(0, dtype=np.int64)
        self.group = np.zeros(0, dtype=np.int8)
        self.width = 1  # cells a row

    def reset(self, mode: str, groups: list[dict[str, Any]], cells: list[int]) -> None:
        """Bands for these groups, of these cells each (none: hidden)."""
        self.figure.visible = bool(groups)
        if not groups:
            return
        self.width = min(self.COLUMNS, max(cells))
        rows = -(-max(cells) // self.width) + 1  # a band's cells under a row for its title
        slots, titles = [], columns("x", "y", "text")
        for g, n in enumerate(cells):
            i = np.arange(n)
            slots.append((g * rows + 1) * self.width + i)
            titles["x"].append(0)
            titles["y"].append(-g * rows - 0.45)
            titles["text"].append(group_label(g, groups[g]))
        self.slots = np.concatenate(slots)
        self.group = np.repeat(np.arange(len(cells), dtype=np.int8), cells)
        self.titles.data = titles
        self.group_names.args = {
            "names": [
                f"{group_label(g, group)}; {tr('one cell')} = {group['cell_tokens']:,} "
                f"{tr('states') if group['unit'] == 'state slot' else tr('tokens')}"
                for g, group in enumerate(groups)
            ]
        }
        total_rows = len(groups) * rows
        self.figure.title.text = f"{mode}: " + (
            tr("each KV cache group's map") if groups[0]["shared"] else tr("each pool's map")
        )
        self.figure.height = 60 + min(12, 640 // total_rows) * total_rows
        self.figure.x_range.start, self.figure.x_range.end = -0.2, self.width + 0.2
        self.figure.y_range.start, self.figure.y_range.end = -total_rows - 0.2, 0.2

    def draw(self, groups: list[dict[str, Any]]) -> None:
        """Show one frame's group maps."""
        owners = np.concatenate([np.asarray(g["owner"], dtype=np.int32) for g in groups])
        written = np.concatenate([np.asarray(g["written"], dtype=np.int32) for g in groups])
        self.cells.show(self.width, written, self.slots, state=state_codes(owners), owner=owners, group=self.group)


class SchedulersView(LabView):
    labs = ("schedulers",)
    animated = True

    def __init__(self) -> None:
        super().__init__()
        self.player.interval = 250
        self.header = LiveText(css_class="kv-schedulers-header")  # (changes with the GPU and scenario: no page layout)
        self.table = TextTable("schedulers-figures", "kv-schedulers-table", max_rows=40)  # every row in view
        self.explainer = Explainer("kv-schedulers-explain")  # a headline figure's formula, per mode
        self.paper = plain(css_class="kv-schedulers-paper")
        self.groups = plain(css_class="kv-schedulers-groups")  # vLLM V1's KV cache groups (hybrid models)
        self.checked = plain(css_class="kv-schedulers-checked")
        self.step_text = LiveText(css_class="kv-schedulers-step")
        self.maps = {m: StateMap(m) for m in MODES}
        # Models whose layers are not all alike: each KV cache group's (or pool's) map, for the modes that keep
        # their kinds of layer apart
        self.group_maps = {m: GroupMaps(m) for m, mode in MODES.items() if mode.layers_apart}
        self.tiered = [m for m, mode in MODES.items() if mode.tiered]  # the modes a host-memory tier can serve
        self.group_note = plain(css_class="kv-schedulers-group-note")
        self.grouped: list[bool] = []  # whether each run mode has group maps
        # The maps' key: a strip of its own above them, so no map loses room to it.
        self.key = figure(
            height=KEY_HEIGHT,
            sizing_mode="stretch_width",
            toolbar_location=None,
            tools="",
            x_range=Range1d(0, 1),
            y_range=Range1d(0, 1),
            outline_line_color=None,
        )
        self.key.axis.visible = False
        self.key.grid.visible = False
        swatches = ColumnDataSource(dict(zip(CELL, ([2], [3], [2], [3]))))  # off the strip: only the legend shows it
        self.key_items = [
            LegendItem(
                label=tr(name),
                renderers=[self.key.quad(*CELL, source=swatches, fill_color=color, line_color="#888888")],
            )
            for name, color in STATES
        ]
        self.key_items[WHOLE_POOL].visible = False  # another group's: shown with group maps only
        self.key_items[LOOKAHEAD].visible = False  # held ahead: shown with speculative decoding only
        self.spec = plain(css_class="kv-schedulers-spec")  # speculative decoding's lines (vLLM V1, SGLang)
        self.lora = plain(css_class="kv-schedulers-lora")  # LoRA adapters' line (vLLM V1)
        self.adapters: dict[str, dict[str, Any]] = {}  # each mode's LoRA figures (none: no adapters)
        self.images = plain(css_class="kv-schedulers-images")  # images' line (vLLM V1)
        self.encoders: dict[str, dict[str, Any]] = {}  # each mode's encoder figures (none: no images)
        # The encoder cache's strip under the maps: the embeddings held at the step, of the cache's size
        self.encoder_source = ColumnDataSource({"held": [0.0]}, name="schedulers-encoder-cache")
        self.encoder_strip = figure(
            title=tr("encoder cache (embeddings held)"),
            height=70,
            sizing_mode="stretch_width",
            toolbar_location=None,
            tools="",
            x_range=Range1d(0, 1),
            y_range=Range1d(0, 1),
            visible=False,
            name="schedulers-encoder-strip",
        )
        self.encoder_strip.quad(left=0, right="held", bottom=0, top=1, source=self.encoder_source, color="#2ca02c")
        self.encoder_strip.yaxis.visible = False
        self.encoder_strip.grid.visible = False
        self.sweep = plain(css_class="kv-schedulers-sweep")  # the draft-length sweep's line
        self.sweep_figure, self.sweep_points, self.sweep_best = sweep_figure()
        self.ahead = False  # whether a run mode's maps may hold blocks ahead
        self.slot_steps: dict[str, dict[str, list[int]]] = {}  # SGLang's draft and verify slots at each frame
        self.key.add_layout(
            Legend(
                items=self.key_items,
                orientation="horizontal",
                ncols=2,
                location="center",
                border_line_alpha=0,
                label_text_font_size="12px",
                background_fill_alpha=0,
            )
        )
        self.curves = {
            m: ColumnDataSource(columns("t", "hit_rate", "batch", "held", "cached"), name=f"schedulers-curves-{m}")
            for m in MODES
        }
        self.tier_curves = {
            m: ColumnDataSource(columns("t", "host_hit_rate", "held"), name=f"schedulers-host-tier-{m}")
            for m in self.tiered
        }
        tools = "xpan,xwheel_zoom,reset,save"
        time = Range1d(0, 1)  # the three share it; every range is set in `update` (`set_range`)
        self.hits = figure(
            title=tr("prefix hit rate so far (% of prompt tokens)"),
            height=HITS_HEIGHT,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(0, 1),
            x_axis_label=tr("simulated time (s)"),
        )
        self.batch = figure(
            title=tr("batch (requests per step)"),
            height=230,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(0, 1),
            x_axis_label=tr("simulated time (s)"),
        )
        self.memory = figure(
            title=tr("KV memory, % of capacity: held by running requests (solid), cached and reusable (dashed)"),
            height=230,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(0, 1),
            x_axis_label=tr("simulated time (s)"),
        )
        items: dict[str, list[LegendItem]] = {"hits": [], "batch": [], "memory": []}
        for m in MODES:
            src, color = self.curves[m], MODES[m].color
            items["hits"].append(
                LegendItem(label=m, renderers=[self.hits.line("t", "hit_rate", source=src, color=color, line_width=2)])
            )
            items["batch"].append(
                LegendItem(label=m, renderers=[self.batch.line("t", "batch", source=src, color=color, line_width=2)])
            )
            items["memory"].append(
                LegendItem(
                    label=m,
                    renderers=[
                        self.memory.line("t", "held", source=src, color=color, line_width=2),
                        self.memory.line("t", "cached", source=src, color=color, line_width=2, line_dash="dashed"),
                    ],
                )
            )
        self.host = figure(
            title=tr("host tier: KV held, % of its size"),
            height=200,
            sizing_mode="stretch_width",
            tools=tools,
            x_range=time,
            y_range=Range1d(0, 1),
            x_axis_label=tr("simulated time (s)"),
            visible=False,
            name="schedulers-host-tier-figure",
        )
        self.host_hits = [
            LegendItem(
                label=f"{m}: {tr('from the host tier')}",
                visible=False,
                renderers=[
                    self.hits.line(
                        "t",
                        "host_hit_rate",
                        source=self.tier_curves[m],
                        color=MODES[m].color,
                        line_width=2,
                        line_dash="dotted",
                    )
                ],
            )
            for m in self.tiered
        ]
        items["hits"] += self.host_hits
        items["host"] = [
            LegendItem(
                label=m,
                renderers=[self.host.line("t", "held", source=self.tier_curves[m], color=MODES[m].color, line_width=2)],
            )
            for m in self.tiered
        ]
        for fig, key, digits in (
            (self.hits, "hits", 3),
            (self.host, "host", 3),
            (self.batch, "batch", 4),
            (self.memory, "memory", 3),
        ):
            legend_below(fig, items[key])
            steady_ticks(fig, digits)  # (percentages up to 100; batches up to max_seqs, 1024)
        self.now = [Span(location=0, dimension="height", line_color="#444444", line_dash="dotted") for _ in range(4)]
        for fig, span in zip((self.hits, self.host, self.batch, self.memory), self.now):
            fig.add_layout(span)
        self.frames: list[list[dict[str, Any]]] = []
        self.names: list[str] = []  # the modes run (a mode that cannot serve the model is left out)
        self.timeline: dict[str, Any] = {"t": [], "frames": []}

    def layout(self) -> pn.viewable.Viewable:
        # side by side where the page is wide enough, one under another on a phone (each map at least MAP_WIDTH)
        maps = pn.Row(*(self.maps[m].figure for m in MODES), sizing_mode="stretch_width")
        return pn.Column(
            self.header,
            self.table.pane,
            self.explainer.layout,
            self.groups,
            self.spec,
            self.sweep,
            self.sweep_figure,
            self.lora,
            self.images,
            self.paper,
            self.checked,
            self.player,
            self.step_text,
            self.key,
            maps,
            self.encoder_strip,
            self.group_note,
            # one under another: two side by side leave a phone's band names cut off
            pn.Column(*(g.figure for g in self.group_maps.values()), sizing_mode="stretch_width"),
            self.hits,
            self.host,
            self.batch,
            self.memory,
            sizing_mode="stretch_width",
        )

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        scenario, modes = result["scenario"], result["modes"]
        capacity = scenario["kv_capacity_tokens"]
        self.frames = [m["trace"]["frames"] for m in modes]
        self.names = [m["mode"] for m in modes]
        self.timeline = result["timeline"]
        self.ahead = any("spec" in m for m in modes)
        self.adapters = {m["mode"]: m["lora"] for m in modes if "lora" in m}
        self.encoders = {m["mode"]: m["encoder"] for m in modes if "encoder" in m}
        refused = (
            tr("it does not model speculative decoding")
            if self.ahead
            else tr("it does not model LoRA adapters")
            if self.adapters
            else tr("it does not model images")
            if self.encoders
            else tr("its KV pool holds every layer alike")
        )
        for mode in result.get("refused", {}):
            self.maps[mode].not_run(f"{mode}: {tr('not run')}", refused)
            self.curves[mode].data = columns("t", "hit_rate", "batch", "held", "cached")
        self.groups.text = kv_groups_text(result.get("kv_groups") or [])
        self.spec.text = "\n".join(
            t for t in (spec_text(modes, result["kv_blocks"]), slot_spec_text(modes, capacity)) if t
        )
        self.slot_steps = {m["mode"]: m["spec"]["at_frames"] for m in modes if "at_frames" in m.get("spec", {})}
        sweep = result.get("spec_sweep", {})
        self.sweep.text = sweep_text(sweep)
        self.sweep_figure.visible = bool(sweep)
        self.lora.text = lora_text(modes, result["kv_blocks"], scenario["kv_capacity_tokens"])
        self.images.text = encoder_text(modes)
        self.encoder_strip.visible = bool(self.encoders)
        if self.encoders:
            set_range(self.encoder_strip.x_range, max(d["encoder_cache"] for d in self.encoders.values()))
        for m in modes:  # titles before new data: in the page a title after data waits a task (handler.js)
            trace = m["trace"]
            cells = len(trace["frames"][0]["owner"]) if trace["frames"] else 0
            unit = tr("token slots") if MODES[m["mode"]].cell == "token" else tr("block")
            lora = m.get("lora")
            self.maps[m["mode"]].reset(
                f"{m['mode']}: {tr('one cell')} = {trace['cell_tokens']} {tr('tokens')} ({unit})",
                cells,
                lora["max_loras"] if lora else 0,
                slots_heading(lora, 0 if MODES[m["mode"]].cell == "token" else result["block_size"]) if lora else "",
            )
        for mode, drawn in self.maps.items():  # (after the titles) no slots left from a run with adapters
            if mode not in self.adapters and len(drawn.slots.data["left"]):
                drawn.slots.data = columns(*drawn.slots.data)
        self._show_groups(modes)
        curves = []
        for m in modes:
            c = m["trace"]["curves"]
            zero = [0.0] * len(c["t"])
            data = {  # number arrays, sent as bytes
                "t": np.asarray(c["t"], dtype=float),
                "batch": np.asarray(c["batch"], dtype=float),
                "held": 100 / capacity * np.asarray(c["occupied"], dtype=float),
                "hit_rate": 100 * np.asarray(c.get("hit_rate", zero), dtype=float),
                "cached": 100 / capacity * np.asarray(c.get("cached", zero), dtype=float),
            }
            self.curves[m["mode"]].data = data
            curves.append(data)
        self._show_tier({m["mode"]: m for m in modes if "host_tier" in m})
        set_range(self.hits.x_range, max((d["t"][-1] for d in curves if len(d["t"])), default=0.0))
        set_range(self.hits.y_range, padded_end(*(d["hit_rate"] for d in curves)))
        set_range(self.batch.y_range, padded_end(*(d["batch"] for d in curves)))
        set_range(self.memory.y_range, padded_end(*(d["held"] for d in curves), *(d["cached"] for d in curves)))
        self.table.show(*figures_table(modes))
        # after the maps' titles; nothing sent while no sweep is drawn
        if sweep or any(source.data["k"] for source in self.sweep_points.values()):
            best = []
            for mode, source in self.sweep_points.items():
                swept = sweep.get(mode, {"points": [], "best_k": 0})
                best += [p for p in swept["points"] if p["k"] == swept["best_k"]]
                source.data = {
                    "k": [p["k"] for p in swept["points"]],
                    "tpot_ms": [1000 * p["tpot_p50_s"] for p in swept["points"]],
                }
            self.sweep_best.data = {"k": [p["k"] for p in best], "tpot_ms": [1000 * p["tpot_p50_s"] for p in best]}
        self.explainer.show(lab.explain(result), explained_labels(), "throughput_tok_s")
        settings = (
            f"{tr('token budget')} (vLLM V1) {result['token_budget']}, {tr('chunk size')} (SGLang) "
            f"{result['chunk_size']}, {tr('block size')} {result['block_size']}; "
            + tr("maximum concurrency for {0} tokens per request").format(f"{result['max_len']:,}")
            + f": {result['max_concurrency']:.2f}x"
        )
        sessions = (
            f"; {tr('chat sessions start at rate / turns per second')}: {lab.rate:g} / {lab.turns} = "
            f"{lab.rate / lab.turns:.3g}"
            if lab.workload == "multi-turn"
            else ""
        )
        about = (
            tr(scenario["about"])
            if lab.model == "scenario"
            else f"{tr('model')} {scenario['model']}, {scenario['gpu']}"
        )
        self.header.text = (
            f"{tr('scenario')} {scenario['name']}: {about}; {capacity} "
            f"{tr('tokens of KV')} ({tr(scenario['units'])})\n{result['submitted']} "
            f"{tr('requests')}{sessions}; {settings}\n{tr('step times')}: {step_costs(modes)}"
        )
        self.paper.text = tr(result["paper"])
        self.checked.text = tr(result["checked"])
        self.set_steps(len(self.timeline["t"]))

    def _show_groups(self, modes: list[dict[str, Any]]) -> None:
        """Each run mode's KV cache group maps (hidden for a model of one kind of layer) and the line about them."""
        run = {m["mode"]: m["trace"] for m in modes}
        self.grouped = [bool(m["trace"].get("groups")) for m in modes]
        for mode, maps in self.group_maps.items():
            trace = run.get(mode, {})
            frames = trace.get("frames") or [{}]
            maps.reset(mode, trace.get("groups", []), [len(g["owner"]) for g in frames[0].get("groups", [])])
        self.group_note.text = "\n".join(
            groups_note(m["mode"], m["trace"]["groups"]) for m, grouped in zip(modes, self.grouped) if grouped
        )
        self.key_items[WHOLE_POOL].visible = any(self.grouped)
        self.key_items[LOOKAHEAD].visible = self.ahead
        self.key.height = KEY_HEIGHT + 20 * (any(self.grouped) or self.ahead)  # a third row of the key

    def _show_tier(self, tiered: dict[str, dict[str, Any]]) -> None:
        """The host tier's curves of the modes that have one (none: the figure hides)."""
        self.host.visible = bool(tiered)
        self.hits.height = HITS_HEIGHT + 50 * bool(tiered)  # room for the two legend rows more
        for m, item in zip(self.tiered, self.host_hits):
            item.visible = m in tiered
            if m not in tiered:
                self.tier_curves[m].data = columns("t", "host_hit_rate", "held")
                continue
            tier = tiered[m]["host_tier"]
            self.tier_curves[m].data = {
                "t": np.asarray(tiered[m]["trace"]["curves"]["t"], dtype=float),
                "host_hit_rate": 100 * np.asarray(tier["curves"]["host_hit_rate"], dtype=float),
                "held": 100 / tier["capacity_tokens"] * np.asarray(tier["curves"]["held_tokens"], dtype=float),
            }
        if tiered:
            set_range(self.host.y_range, padded_end(*(self.tier_curves[m].data["held"] for m in tiered)))

    def show_step(self, index: int) -> None:
        times = self.timeline["t"]
        if not times:
            return
        index = min(index, len(times) - 1)
        t = times[index]
        lines = [f"t = {t:.1f} s"]
        for mode, frames, at, grouped in zip(self.names, self.frames, self.timeline["frames"], self.grouped):
            frame = frames[at[index]]
            counts = np.bincount(self.maps[mode].draw(frame), minlength=len(STATES))
            shown = [*range(WHOLE_POOL), *((LOOKAHEAD,) if self.ahead else ())]
            lines.append(f"{mode}: " + ", ".join(f"{tr(STATES[i][0])} {counts[i]}" for i in shown))
            if mode in self.adapters:
                lora = self.adapters[mode]
                self.maps[mode].draw_slots(
                    lora["slots"][at[index]], lora["slots"][max(at[index] - 1, 0)], lora["slot_bytes"]
                )
                lines.append(
                    f"{mode}: "
                    + tr("LoRA adapters: {0} in GPU slots, requests waiting for a slot: {1}").format(
                        lora["in_slots"][at[index]], lora["skipped"][at[index]]
                    )
                )
            if mode in self.slot_steps:
                slots = self.slot_steps[mode]
                lines.append(
                    f"{mode}: "
                    + tr(
                        "its last decode step took {0} slots for drafts (handed back once drafted) and {1} to "
                        "verify, and freed the {2} rejected in the same step"
                    ).format(*(f"{slots[k][at[index]]:,}" for k in ("drafts", "verify", "rejected")))
                )
            if mode in self.encoders:
                encoder = self.encoders[mode]
                held = encoder["held"][at[index]]
                lines.append(
                    f"{mode}: "
                    + tr("encoder cache: {0} of {1} embeddings held, {2} hits").format(
                        f"{held:,}", f"{encoder['encoder_cache']:,}", f"{encoder['hits_at'][at[index]]:,}"
                    )
                )
                self.encoder_source.data = {"held": [float(held)]}
            if grouped:
                self.group_maps[mode].draw(frame["groups"])
        for span in self.now:
            span.location = t
        self.step_text.text = "\n".join(lines)
