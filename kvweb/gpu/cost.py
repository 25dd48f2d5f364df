"""The paper GPU's cost model: a roofline for LLM serving (SPEC section 1), over `tp` GPUs.

`CostModel` is the one value the labs and the schedulers pass around: the assumptions every cost
depends on, each with a stated default. The defaults are the lecture's paper GPU: one GPU, 16-bit
weights and KV, compute efficiency 0.7, 0.5 ms per step, and an OPT-13B-like model whose LM head
is not tied to the embedding. Decimal units throughout (1 GB = 1e9 bytes).

What it computes is in its parts, one module each, each reading the assumptions it names:
- kvweb/gpu/weights.py `Weights`: the weights' bytes, per GPU and read by a step (precision, MoE);
- kvweb/gpu/kv_bytes.py `KVBytes`: the KV cache's bytes per token, layer and request;
- kvweb/gpu/capacity.py `Capacity`: the memory left beside the weights, the KV it holds, `fit()`;
- kvweb/gpu/counts.py `StepCounts`: a prefill's or a decode step's FLOPs and bytes on one GPU;
- kvweb/gpu/allreduce.py `AllReduce`: the tensor-parallel all-reduces' time;
- kvweb/gpu/roofline.py `Roofline`: a step's time from its work, the costs the schedulers ask for;
- kvweb/gpu/swap.py `Swap`: copies over the host link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvweb.gpu.capacity import Capacity
from kvweb.gpu.kv_bytes import KV_PRECISIONS
from kvweb.gpu.roofline import Roofline
from kvweb.gpu.specs import GPUSpec, LLMSpec
from kvweb.gpu.swap import SWAP_COPIES, Swap
from kvweb.gpu.weights import WEIGHT_PRECISIONS, PrecisionError, precision_refusal

TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class CostModel(Capacity, Roofline, Swap):
    """The assumptions every cost depends on, each with a stated default (the lecture's); its
    methods are its parts' (the module's docstring), mixed in so that a subclass
    (kvweb/gpu/measured_cost.py) overrides any of them for all the others.

    Work and capacity are per GPU of the tensor-parallel group: all `tp` GPUs do the same
    share of every step at the same time."""

    gpu: GPUSpec
    model: LLMSpec
    mem_util: float = 0.9  # like vLLM's gpu_memory_utilization
    compute_eff: float = 0.7
    memory_eff: float = 0.8
    step_overhead_s: float = 0.5e-3
    block_overhead_s: float = 10e-6  # per copy over the host link
    link_bandwidth: float | None = None  # host link, B/s; None: the GPU's own
    swap_copies: str = "per-block"  # one of SWAP_COPIES
    ignore_weights: bool = False  # what-if: the weights take no memory (a model too big still runs)
    tp: int = 1  # tensor-parallel GPUs, one of TP_SIZES
    weight_precision: str = "16-bit"  # one of WEIGHT_PRECISIONS
    kv_precision: str = "16-bit"  # one of KV_PRECISIONS
    interconnect_bandwidth: float | None = None  # GPU to GPU, one direction, B/s; None: the GPU's NVLink
    allreduce_latency_s: float = 10e-6  # fixed cost of each all-reduce
    attention_dp: bool = False  # SGLang's data-parallel attention: each GPU holds its own requests' cache whole

    def __post_init__(self) -> None:
        for name, allowed in (
            ("swap_copies", SWAP_COPIES),
            ("tp", TP_SIZES),
            ("weight_precision", WEIGHT_PRECISIONS),
            ("kv_precision", KV_PRECISIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}")
        refusal = precision_refusal(self.model, self.weight_precision)
        if refusal:
            raise PrecisionError(refusal)


def prefill_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, **assumptions: float) -> float:
    return CostModel(gpu, model, **assumptions).prefill_cost(n_tokens)


def decode_step_cost(
    model: LLMSpec, gpu: GPUSpec, batch: int, context_lengths: Sequence[int] | int, **assumptions: float
) -> float:
    """`context_lengths`: one length shared by the whole batch, or one per sequence."""
    total = context_lengths * batch if isinstance(context_lengths, int) else sum(context_lengths)
    return CostModel(gpu, model, **assumptions).decode_step_cost(batch, total)


def swap_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, block_size: int, per_block_overhead: float = 10e-6) -> float:
    return CostModel(gpu, model, block_overhead_s=per_block_overhead).swap_cost(n_tokens, block_size)


def recompute_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, **assumptions: float) -> float:
    return CostModel(gpu, model, **assumptions).recompute_cost(n_tokens)
