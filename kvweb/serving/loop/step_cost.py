"""A step's work on the paper GPU, priced without calling the cost model per sequence.

A decode step's (FLOPs, bytes) are affine in (batch, total context): the coefficients are read
off `CostModel.decode_work` once, so a simulator adds up a whole batch in two multiplications.
Prefill chunks go through `CostModel.prefill_work`; the weights are read once per step, so a
chunk adds its bytes beyond them.
"""

from __future__ import annotations

from kvweb.gpu.cost import CostModel

Coefficients = tuple[float, float, float, float, float, float]


def decode_coefficients(cost: CostModel) -> Coefficients:
    """(FLOPs at batch 0, per sequence, per context token, bytes at batch 0 (the weights),
    per sequence, per context token). A window layer's reads are priced per sequence, a whole
    window each (the most it reads: exact for sequences at least a window long), and a linear
    layer's state (read and written) per sequence; only full and latent layers read per token."""
    f0, b0 = cost.decode_work(0, 0)
    f2, b2 = cost.decode_work(0, 1)
    window = max(a.window for a, _ in cost.model.groups)
    if window:  # one sequence of a window's context: every window layer reads all of it
        fw, bw = cost.decode_work(1, window)
        f1, b1 = fw - (f2 - f0) * window, bw - (b2 - b0) * window
    else:
        f1, b1 = cost.decode_work(1, 0)
    return f0, f1 - f0, f2 - f0, b0, b1 - b0, b2 - b0


def chunk_work(cost: CostModel, weights: float, tokens: int, cached: int) -> tuple[float, float]:
    """(FLOPs, bytes beyond the weights) of prefilling `tokens` after `cached` tokens of KV."""
    flops, nbytes = cost.prefill_work(tokens, cached)
    return flops, nbytes - weights
