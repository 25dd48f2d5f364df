"""Part 1, the paper GPU: what a GPU and a model are (`specs`, each layer's attention type in
`layers`, a model from a Hugging Face config.json in `hf_config`) and what a step costs on them
(`cost`, a roofline with the lecture's assumptions, over `tp` tensor-parallel GPUs at a chosen
weight and KV precision; its parts `weights`, `kv_bytes`, `capacity`, `counts`, `allreduce`,
`roofline` and `swap`). Shown by the labs `roofline`, `layer-memory` and `recovery`; every lab
that prices work (engine, max-rate, sweep, prefill-savings) uses it.
"""

from kvweb.gpu.cost import TP_SIZES, CostModel, decode_step_cost, prefill_cost, recompute_cost, swap_cost
from kvweb.gpu.kv_bytes import KV_PRECISIONS
from kvweb.gpu.specs import GPUS, MODELS, GPUSpec, LLMSpec
from kvweb.gpu.swap import SWAP_COPIES
from kvweb.gpu.weights import WEIGHT_PRECISIONS

__all__ = [
    "GPUS",
    "KV_PRECISIONS",
    "MODELS",
    "SWAP_COPIES",
    "TP_SIZES",
    "WEIGHT_PRECISIONS",
    "CostModel",
    "GPUSpec",
    "LLMSpec",
    "decode_step_cost",
    "prefill_cost",
    "recompute_cost",
    "swap_cost",
]
