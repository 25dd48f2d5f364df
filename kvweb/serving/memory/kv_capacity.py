"""The KV cache's size as vLLM reports it at start-up (vllm/v1/core/kv_cache_utils.py): the GPU's
KV blocks, the KV cache groups of a model whose layers are not all alike, and the "Maximum
concurrency" line: how many requests of the model's maximum length the blocks hold at once.
"""

from __future__ import annotations

from typing import Any

from kvweb.gpu.cost import CostModel
from kvweb.serving.memory.hybrid_kv import kv_layout


def kv_cache_groups(cost: CostModel, block_size: int, max_len: int) -> list[dict[str, Any]] | None:
    """vLLM V1's KV cache groups for a model whose layers are not all alike (None otherwise):
    each group's kind, layers and the blocks one request decoding at the maximum length holds in it."""
    layout = kv_layout(cost, block_size)
    if not layout.hybrid:
        return None
    bs = layout.block_size
    whole = -(-max_len // bs)
    # a window group holds the blocks its last `kept` tokens span (vLLM's start-up line counts a
    # window group's blocks for a whole prefill chunk, more)
    return [
        {
            "kind": g.kind,
            "layers": g.layers,
            "window": g.kept + 1 if g.kind == "sliding" else 0,
            "block_size": bs,
            "blocks_per_max_request": min(whole, -(-(g.kept - 1) // bs) + 1) if g.windowed else whole,
        }
        for g in layout.groups
    ]


def kv_blocks(cost: CostModel, block_size: int) -> int:
    """The GPU's KV blocks (vLLM's, of every group's layers for a hybrid model)."""
    layout = kv_layout(cost, block_size)
    return layout.blocks(cost) if layout.hybrid else cost.kv_capacity_blocks(block_size)


def max_concurrency(cost: CostModel, block_size: int, max_len: int) -> float:
    """What vLLM logs at start-up as "Maximum concurrency for max_len tokens per request": the
    GPU's KV blocks over the blocks one request of the model's maximum length takes. Requests
    are shorter and take blocks only as they grow, so more of them run at once (`max_batch`)."""
    groups = kv_cache_groups(cost, block_size, max_len)
    if groups:  # every group's blocks, of the one pool
        return kv_blocks(cost, block_size) / sum(g["blocks_per_max_request"] for g in groups)
    per_request = -(-max_len // block_size)
    return cost.kv_capacity_blocks(block_size) / per_request
