"""The guided tour: the lecture's story, each step opening the lab that shows it.

Memory is the bottleneck -> paging -> sharing -> preemption -> prefix reuse -> constrained
decoding -> today's engines -> today's models. Every button opens a lab with its parameters exactly as a share URL would.
"""

from __future__ import annotations

from dataclasses import dataclass

import panel as pn

from app.i18n import tr
from app.pages import Page
from app.widgets import link_button


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    links: tuple[tuple[str, dict[str, str]], ...]  # (button label, URL query)


INTRO = (
    "A walk through the lecture in eight steps. Each step opens a lab with its parameters set; "
    "change them, press play, and come back here for the next step."
)

STEPS: tuple[Step, ...] = (
    Step(
        "Memory is the bottleneck",
        "A 13B model on a 40 GB GPU leaves about 12 000 tokens of KV cache beside its weights, and a decode "
        "step is bound by memory bandwidth: the batch size, and so the throughput, is set by how many "
        "sequences' KV fits. Reserving the maximum length per request wastes most of that memory.",
        (
            (
                "Open the paper GPU: OPT-13B on an A100-40GB",
                {"lab": "roofline", "model": "opt-13b-like", "gpu": "A100-40GB"},
            ),
            ("Open fragmentation: waste of reservations", {"lab": "fragmentation", "mean_size": "2048"}),
        ),
    ),
    Step(
        "Paging",
        "vLLM stores KV in fixed-size blocks mapped by a block table, like virtual memory pages. A block is "
        "taken only when the last one is full, so at most one block per sequence is partly empty, and the "
        "output is exactly the same as with a contiguous cache.",
        (
            ("Open block tables", {"lab": "block-tables"}),
            (
                "Open the engine: paged vs Max reservation (scenario A)",
                {"lab": "engine", "scenario": "A", "memory": "paged", "compare": "max", "requests": "300"},
            ),
        ),
    ),
    Step(
        "Sharing",
        "Several sequences can point at the same physical blocks. Parallel sampling forks the prompt's block "
        "table; a sequence that writes into a shared block copies it first (copy-on-write). Beam search forks "
        "and frees beams through the same mechanism.",
        (
            ("Open parallel sampling (n = 4)", {"lab": "parallel-sampling", "n": "4"}),
            ("Open beam search (width 4)", {"lab": "beam-search", "width": "4"}),
        ),
    ),
    Step(
        "Preemption",
        "When paged memory runs out, the latest-arrived request is preempted with all its blocks and brought "
        "back later by recomputing its KV or by swapping it to host memory and back. An admission watermark "
        "keeps some blocks free and cuts preemptions.",
        (
            (
                "Open the engine overloaded, no watermark, swap",
                {
                    "lab": "engine",
                    "scenario": "A",
                    "rate": "10",
                    "watermark": "0",
                    "preemption": "swap",
                    "compare": "none",
                    "step": "2",
                },
            ),
            (
                "Open swap vs recompute for Llama-3-70B (what-if: its weights do not fit one GPU)",
                {"lab": "recovery", "model": "llama-3-70b", "gpu": "H100-SXM", "ignore_weights": "true"},
            ),
        ),
    ),
    Step(
        "Prefix reuse",
        "SGLang keeps finished requests' KV in a radix tree: a new request reuses the longest cached prefix "
        "and prefills only the rest, with identical output. Serving the waiting request with the longest "
        "shared prefix first (LSPF) keeps the hit rate near the optimum.",
        (
            ("Open the radix cache on the mini model", {"lab": "radix-demo", "step": "2"}),
            (
                "Open cache-aware scheduling: FCFS vs LSPF",
                {"lab": "cache-schedule", "workload": "few-shot", "policy": "lspf"},
            ),
        ),
    ),
    Step(
        "Constrained decoding",
        "A regular expression compiled to a DFA masks the characters the model may write, so every output "
        "matches. Where only one character is legal, a compressed FSM appends the whole chain in one forward "
        "(jump-forward).",
        (
            ("Open the compressed FSM on a form", {"lab": "fsm", "preset": "form", "step": "0"}),
            ("Open the ambiguous pattern [a-z]{1,8}and[0-9]", {"lab": "fsm", "preset": "ambiguous", "step": "8"}),
        ),
    ),
    Step(
        "Today's engines",
        "vLLM V1 and SGLang keep paged blocks and the radix tree but schedule differently: one token budget per "
        "step lets a long prompt be prefilled in chunks between decode steps, and a finished request's KV stays "
        "in memory, reusable, until the memory is needed, found again by chained block hashes (vLLM) or the radix "
        "tree (SGLang). In multi-turn chat most of each prompt is then already cached; in ShareGPT-like traffic "
        "nothing is shared and the three engines serve alike.",
        (
            ("Open today's schedulers on multi-turn chat", {"lab": "schedulers", "workload": "multi-turn"}),
            ("Open them on ShareGPT-like traffic (nothing shared)", {"lab": "schedulers", "workload": "sharegpt"}),
        ),
    ),
    Step(
        "Today's models",
        "The models served in 2026 keep less memory per token than the lecture's: DeepSeek-V3 keeps one thin "
        "latent per token and layer (MLA), gpt-oss and Gemma 3 keep only a window of recent tokens in most layers, "
        "and Qwen3-Next keeps a fixed state in three layers of four. A request's memory no longer grows the same in "
        "every layer, and the same GPU holds many more long requests.",
        (
            (
                "Open gpt-oss-120b layer by layer on 8 H200s",
                {"lab": "layer-memory", "model": "gpt-oss-120b", "gpu": "H200", "tp": "8"},
            ),
            (
                "Open DeepSeek-V3 in FP8 on 8 H200s with data-parallel attention",
                {
                    "lab": "layer-memory",
                    "model": "deepseek-v3",
                    "gpu": "H200",
                    "tp": "8",
                    "weight_precision": "fp8",
                    "attention_dp": "true",
                },
            ),
        ),
    ),
)


class TourPage(Page):
    name = "tour"
    label = "Guided tour"

    def __init__(self, navigate) -> None:  # noqa: ANN001
        super().__init__(navigate)
        parts: list = [pn.pane.Markdown(f"## {tr('Guided tour')}\n\n{tr(INTRO)}", sizing_mode="stretch_width")]
        for i, step in enumerate(STEPS):
            buttons = [
                link_button(
                    tr(label), f"kv-tour-{i}-{j}", lambda query=query, i=i: self.navigate({**query, "tour": str(i + 1)})
                )
                for j, (label, query) in enumerate(step.links)
            ]
            parts.append(
                pn.pane.Markdown(f"### {i + 1}. {tr(step.title)}\n\n{tr(step.text)}", sizing_mode="stretch_width")
            )
            parts.append(pn.Row(*buttons))
        self._layout = pn.Column(*parts, sizing_mode="stretch_width", max_width=900, css_classes=["kv-tour"])

    def layout(self) -> pn.viewable.Viewable:
        return self._layout
