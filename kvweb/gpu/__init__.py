"""Part 1, the paper GPU: what a GPU and a model are (`specs`, each layer's attention type in
`layers`, a model from a Hugging Face config.json in `hf_config`) and what a step costs on them
(`cost`, a roofline with the lecture's assumptions, over `tp` tensor-parallel GPUs at a chosen
weight and KV precision). Shown by the labs `roofline`, `layer-memory` and `recovery`; every lab
that prices work (engine, max-rate, sweep, prefill-savings) uses it.
"""
from kvweb.gpu.cost import (
    KV_PRECISIONS, SWAP_COPIES, TP_SIZES, WEIGHT_PRECISIONS, CostModel, decode_step_cost, prefill_cost,
    recompute_cost, swap_cost,
)
from kvweb.gpu.specs import GPUS, MODELS, GPUSpec, LLMSpec

__all__ = ["GPUS", "KV_PRECISIONS", "MODELS", "SWAP_COPIES", "TP_SIZES", "WEIGHT_PRECISIONS", "CostModel",
           "GPUSpec", "LLMSpec", "decode_step_cost", "prefill_cost", "recompute_cost", "swap_cost"]
