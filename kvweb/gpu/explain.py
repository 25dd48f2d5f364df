"""Where a roofline figure comes from: its formula with the values put in, so a learner can open
the arithmetic behind "11,969 tokens of KV" or "a decode step of 43 ms" (the roofline lab's view
shows these beside its table).

Each `Explanation` holds the terms the cost model used and the figure they give; `text` writes
them out. The values are the cost model's own (`CostModel`), so the formula reproduces the figure
(tests/test_explain.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvweb.gpu.cost import CostModel
from kvweb.gpu.kv_bytes import KV_PRECISIONS

Term = tuple[str, float, str]  # name, value, unit


@dataclass(frozen=True)
class Explanation:
    figure: str
    formula: str  # in the terms' names
    terms: tuple[Term, ...]
    value: float
    unit: str
    source: tuple[str, tuple[float | str, ...]]  # a template and its values

    def text(self, translate: Callable[[str], str] = str) -> str:
        """The formula, then each term's value, then the figure, then the source: plain text, every
        word through `translate` (the app's language)."""
        t = translate
        values = "; ".join(f"{t(name)} = {_shown(v)}{' ' + t(unit) if unit else ''}" for name, v, unit in self.terms)
        return (
            f"{t(self.figure)} = {t(self.formula)}\n{values}\n= {_shown(self.value)} {t(self.unit)}\n"
            f"{t(self.source[0]).format(*(v if isinstance(v, str) else f'{v:g}' for v in self.source[1]))}"
        )


def _shown(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 or value == int(value) else f"{value:.4g}"


def roofline_source(cost: CostModel) -> tuple[str, tuple[float, ...]]:
    return (
        "source: the paper roofline's assumptions: compute efficiency {0}, memory efficiency {1}, {2} ms a step, "
        "{3} of HBM usable",
        (cost.compute_eff, cost.memory_eff, cost.step_overhead_s * 1e3, cost.mem_util),
    )


def memory(cost: CostModel) -> dict[str, Explanation]:
    """KV bytes per token, weights, memory left for KV and KV capacity, on one GPU of the group."""
    m, kv, source = cost.model, KV_PRECISIONS[cost.kv_precision], roofline_source(cost)
    tp = 1 if cost.attention_dp else cost.tp
    grows = [(a, n) for a, n in m.groups if not a.window]
    per_token = Explanation(
        "KV per token, one GPU",
        "Σ over the layer kinds that grow with every token: layers × K and V elements per "
        "layer on one GPU, × bytes per element",
        (
            *((f"{a.kind} layers", n, "") for a, n in grows),
            *((f"K and V elements per {a.kind} layer", a.kv_elements_per_gpu(tp), "") for a, _ in grows),
            ("bytes per element", kv, "B"),
        ),
        cost.kv_bytes_per_token_per_gpu,
        "B",
        source,
    )
    embedding = m.embedding_params
    split = cost._expert_bytes_per_param != cost._bytes_per_param  # MXFP4: the experts at their own precision
    weights = Explanation(
        "weights, one GPU",
        "((parameters − embedding and LM head − routed experts) × bytes per parameter + routed experts × bytes per "
        "expert parameter + embedding and LM head × 2 B) ÷ tp"
        if split
        else "((parameters − embedding and LM head) × bytes per parameter + embedding and LM head × 2 B) ÷ tp",
        (
            ("parameters", m.params, ""),
            ("embedding and LM head", embedding, ""),
            *((("routed experts", cost._routed_params, ""),) if split else ()),
            ("bytes per parameter", cost._bytes_per_param, "B"),
            *((("bytes per expert parameter", cost._expert_bytes_per_param, "B"),) if split else ()),
            ("tp", cost.tp, ""),
        ),
        cost.weight_bytes_per_gpu,
        "B",
        source,
    )
    left = Explanation(
        "memory left for KV, one GPU",
        "HBM × mem_util − weights, one GPU",
        (
            ("HBM", cost.gpu.hbm_bytes, "B"),
            ("mem_util", cost.mem_util, ""),
            ("weights, one GPU", 0 if cost.ignore_weights else cost.weight_bytes_per_gpu, "B"),
        ),
        cost.kv_bytes_free_per_gpu,
        "B",
        source,
    )
    capacity = Explanation(
        "KV capacity",
        "⌊memory left for KV, one GPU ÷ KV per token, one GPU⌋",
        (
            ("memory left for KV, one GPU", cost.kv_bytes_free_per_gpu, "B"),
            ("KV per token, one GPU", cost.kv_bytes_per_token_per_gpu, "B"),
        ),
        cost.kv_capacity_tokens,
        "tokens",
        source,
    )
    return {
        "kv_bytes_per_token_per_gpu": per_token,
        "weight_bytes_per_gpu": weights,
        "kv_bytes_free_per_gpu": left,
        "kv_capacity_tokens": capacity,
    }


def step(cost: CostModel, what: str, counts: tuple[float, float], allreduce_s: float, seconds: float) -> Explanation:
    """A step on the roofline, priced `seconds` by the cost model: the slower of compute and memory
    for its (FLOPs, bytes), plus its all-reduces and the overhead (the same sum to rounding)."""
    flops, nbytes = counts
    return Explanation(
        what,
        "max(FLOPs ÷ (peak × compute efficiency), bytes ÷ (bandwidth × memory efficiency)) + all-reduces + "
        "step overhead",
        (
            ("FLOPs", flops, ""),
            ("peak", cost.peak_flops, "FLOP/s"),
            ("compute efficiency", cost.compute_eff, ""),
            ("bytes", nbytes, "B"),
            ("bandwidth", cost.gpu.hbm_bandwidth, "B/s"),
            ("memory efficiency", cost.memory_eff, ""),
            ("all-reduces", allreduce_s, "s"),
            ("step overhead", cost.step_overhead_s, "s"),
        ),
        seconds,
        "s",
        roofline_source(cost),
    )


def times(cost: CostModel, tokens: int, batch: int, context: int) -> dict[str, Explanation]:
    """A prefill of `tokens`, a decode step of `batch` sequences of `context` tokens, its throughput."""
    prefill = step(
        cost, "prefill of N tokens", cost.prefill_counts(tokens), cost.allreduce_time(tokens), cost.prefill_cost(tokens)
    )
    decode = step(
        cost,
        "one decode step",
        cost.decode_counts(batch, batch * context),
        cost.allreduce_time(batch),
        cost.decode_step_cost(batch, batch * context),
    )
    throughput = Explanation(
        "decode throughput",
        "batch ÷ one decode step",
        (("batch", batch, "sequences"), ("one decode step", decode.value, "s")),
        batch / decode.value,
        "tokens/s",
        decode.source,
    )
    return {"prefill_s": prefill, "decode_step_s": decode, "decode_tokens_per_s": throughput}
