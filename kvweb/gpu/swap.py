"""Copying a request's KV over the host link, to CPU memory and back (part of `CostModel`).

A swap moves each GPU's share of the KV over that GPU's own host link, all GPUs at once: bytes /
link bandwidth, plus an overhead per copy. How many copies a block takes is `swap_copies`: one
(the lecture), or one per layer for K and one for V (vLLM V0's CacheEngine._swap). Its
alternative, recomputing the KV, is a prefill: `recompute_cost` on the roofline.
"""

from __future__ import annotations

import math

from kvweb.gpu.kv_bytes import KVBytes
from kvweb.gpu.specs import GPUSpec

# How a swap copies a block over the host link: once (the lecture), or once per layer for K
# and once for V (vLLM V0's CacheEngine._swap: 2 x layers small copies per block).
SWAP_COPIES = ("per-block", "per-layer-kv")


class Swap(KVBytes):
    """Seconds of a swap over the host link; a part of `CostModel` (its fields below)."""

    gpu: GPUSpec
    link_bandwidth: float | None
    swap_copies: str
    block_overhead_s: float

    @property
    def link(self) -> float:
        return self.gpu.link_bandwidth if self.link_bandwidth is None else self.link_bandwidth

    @property
    def copies_per_block(self) -> int:
        return 1 if self.swap_copies == "per-block" else 2 * self.model.layers

    def swap_cost(self, n_tokens: int, block_size: int) -> float:
        """One direction over the host link: bytes / link + an overhead per copy. Every GPU of
        the group moves its own share over its own link at the same time."""
        copies = math.ceil(n_tokens / block_size) * self.copies_per_block
        return n_tokens * self.kv_bytes_per_token_per_gpu / self.link + copies * self.block_overhead_s

    def swap_roundtrip_cost(self, n_tokens: int, block_size: int) -> float:
        return 2 * self.swap_cost(n_tokens, block_size)
