"""The paper GPU's cost model: a roofline for LLM serving (SPEC section 1).

Decimal units throughout (1 GB = 1e9 bytes). A step costs
max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency))
plus a fixed per-step overhead, so a short prefill can never be cheaper than one
read of the weights. The defaults are the lecture's paper GPU: compute efficiency 0.7,
0.5 ms per step, and an OPT-13B-like model whose LM head is not tied to the embedding.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvweb.gpu.specs import GPUSpec, LLMSpec


# How a swap copies a block over the host link: once (the lecture), or once per layer for K
# and once for V (vLLM V0's CacheEngine._swap: 2 x layers small copies per block).
SWAP_COPIES = ("per-block", "per-layer-kv")


@dataclass(frozen=True)
class CostModel:
    """The assumptions every cost depends on, each with a stated default (the lecture's)."""

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

    def __post_init__(self) -> None:
        if self.swap_copies not in SWAP_COPIES:
            raise ValueError(f"swap_copies must be one of {', '.join(SWAP_COPIES)}")

    @property
    def usable_bytes(self) -> float:
        return self.mem_util * self.gpu.hbm_bytes

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV that fit beside the weights (0 when the weights alone do not fit)."""
        free = self.usable_bytes - (0 if self.ignore_weights else self.model.weight_bytes)
        return max(0, int(free // self.model.kv_bytes_per_token))

    @property
    def fits(self) -> bool:
        """Whether this model can run here at all: its weights and at least one token of KV."""
        return self.kv_capacity_tokens > 0

    def fit(self) -> dict[str, object]:
        """Whether the configuration can run, with one plain sentence when it cannot (or when it
        is a what-if); every lab that prices work reports this beside its figures."""
        m, g = self.model, self.gpu
        weights, usable = f"{m.weight_bytes / 1e9:.1f} GB", f"{self.usable_bytes / 1e9:.1f} GB"
        note = None
        if not self.fits:
            note = (f"{m.name} does not fit on one {g.name}: its weights take {weights} and {usable} is usable "
                    f"({self.mem_util:.0%} of {g.hbm_bytes / 1e9:g} GB), so nothing is priced as if it ran; "
                    "ignore_weights=true prices it as a what-if")
        elif self.ignore_weights:
            real = "fits" if replace(self, ignore_weights=False).fits else "does not fit"
            note = (f"what-if: the weights of {m.name} ({weights}) are left out of {g.name}'s {usable}; "
                    f"for real it {real}")
        return {"fits": self.fits, "fit_note": note, "weight_bytes": m.weight_bytes,
                "usable_bytes": self.usable_bytes, "kv_capacity_tokens": self.kv_capacity_tokens}

    def kv_capacity_blocks(self, block_size: int) -> int:
        return self.kv_capacity_tokens // block_size

    def step_time(self, flops: float, bytes_moved: float) -> float:
        compute = flops / (self.gpu.peak_flops * self.compute_eff)
        memory = bytes_moved / (self.gpu.hbm_bandwidth * self.memory_eff)
        return max(compute, memory) + self.step_overhead_s

    # -- work counts -------------------------------------------------------
    def _attention_flops(self, query_context_pairs: float) -> float:
        """QK^T and AV: 2 matmuls x 2 FLOPs per multiply-add, per (query, key) pair."""
        m = self.model
        return 4.0 * m.layers * m.heads * m.head_dim * query_context_pairs

    def _linear_flops(self, tokens: float, logits: float) -> float:
        m = self.model
        return 2.0 * m.layers * m.layer_params * tokens + 2.0 * m.d_model * m.vocab * logits

    def prefill_work(self, n_tokens: int, cached: int = 0) -> tuple[float, float]:
        """(FLOPs, bytes) to prefill n tokens after `cached` tokens already in the cache.

        Causal attention: token i attends to cached + i keys. Logits only for the last token.
        """
        n, c = n_tokens, cached
        pairs = n * c + n * (n + 1) / 2
        flops = self._linear_flops(n, 1) + self._attention_flops(pairs)
        kv = self.model.kv_bytes_per_token
        bytes_moved = self.model.weight_bytes + (n + c) * kv
        return flops, bytes_moved

    def decode_work(self, batch: int, total_context: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one decode step for `batch` sequences holding `total_context`
        tokens between them: weights read once, every sequence's KV read once."""
        flops = self._linear_flops(batch, batch) + self._attention_flops(total_context)
        bytes_moved = self.model.weight_bytes + total_context * self.model.kv_bytes_per_token
        return flops, bytes_moved

    # -- public costs ------------------------------------------------------
    def prefill_cost(self, n_tokens: int, cached: int = 0) -> float:
        return self.step_time(*self.prefill_work(n_tokens, cached))

    def decode_step_cost(self, batch: int, total_context: int) -> float:
        return self.step_time(*self.decode_work(batch, total_context))

    @property
    def link(self) -> float:
        return self.gpu.link_bandwidth if self.link_bandwidth is None else self.link_bandwidth

    @property
    def copies_per_block(self) -> int:
        return 1 if self.swap_copies == "per-block" else 2 * self.model.layers

    def swap_cost(self, n_tokens: int, block_size: int) -> float:
        """One direction over the host link: bytes / link + an overhead per copy."""
        copies = math.ceil(n_tokens / block_size) * self.copies_per_block
        return n_tokens * self.model.kv_bytes_per_token / self.link + copies * self.block_overhead_s

    def swap_roundtrip_cost(self, n_tokens: int, block_size: int) -> float:
        return 2 * self.swap_cost(n_tokens, block_size)

    def recompute_cost(self, n_tokens: int) -> float:
        """Recompute drops the KV and prefills prompt + generated tokens in one go."""
        return self.prefill_cost(n_tokens)

    def intensity(self, flops: float, bytes_moved: float) -> float:
        return flops / bytes_moved

    def attainable_flops(self, intensity: float) -> float:
        return min(self.gpu.peak_flops * self.compute_eff, intensity * self.gpu.hbm_bandwidth * self.memory_eff)

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where the roofline turns from memory- to compute-bound."""
        return self.gpu.peak_flops * self.compute_eff / (self.gpu.hbm_bandwidth * self.memory_eff)


def prefill_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, **assumptions: float) -> float:
    return CostModel(gpu, model, **assumptions).prefill_cost(n_tokens)


def decode_step_cost(model: LLMSpec, gpu: GPUSpec, batch: int, context_lengths: Sequence[int] | int, **assumptions: float) -> float:
    """`context_lengths`: one length shared by the whole batch, or one per sequence."""
    total = context_lengths * batch if isinstance(context_lengths, int) else sum(context_lengths)
    return CostModel(gpu, model, **assumptions).decode_step_cost(batch, total)


def swap_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, block_size: int, per_block_overhead: float = 10e-6) -> float:
    return CostModel(gpu, model, block_overhead_s=per_block_overhead).swap_cost(n_tokens, block_size)


def recompute_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, **assumptions: float) -> float:
    return CostModel(gpu, model, **assumptions).recompute_cost(n_tokens)
