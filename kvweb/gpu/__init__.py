"""Part 1, the paper GPU: what a GPU and a model are (`specs`) and what a step costs on them
(`cost`, a roofline with the lecture's assumptions). Shown by the labs `roofline` and
`recovery`; every lab that prices work (engine, max-rate, sweep, prefill-savings) uses it.
"""
from kvweb.gpu.cost import (
    SWAP_COPIES, CostModel, decode_step_cost, prefill_cost, recompute_cost, swap_cost,
)
from kvweb.gpu.specs import GPUS, MODELS, GPUSpec, LLMSpec

__all__ = ["GPUS", "MODELS", "SWAP_COPIES", "CostModel", "GPUSpec", "LLMSpec",
           "decode_step_cost", "prefill_cost", "recompute_cost", "swap_cost"]
