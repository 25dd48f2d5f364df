"""`PaperGPULab`: the cost model's assumptions as parameters, one definition for every lab that
prices work on the paper GPU (roofline, engine, max-rate, sweep, recovery, prefill-savings).

Defaults are `CostModel`'s own (the lecture's paper GPU: one GPU, 16-bit weights and KV), shown
in the units people type. The tensor-parallel size and the two precisions are choices people make
(shown beside each lab's own parameters); the rest are assumptions (folded away in the app).
"""

from __future__ import annotations

from typing import Any

import param

from kvweb.gpu import GPUS, KV_PRECISIONS, SWAP_COPIES, TP_SIZES, WEIGHT_PRECISIONS, CostModel, LLMSpec
from kvweb.gpu.measured_cost import roofline
from kvweb.lab import PAPER_GPU, Lab

_D = CostModel.__dataclass_fields__  # the defaults, read once from the cost model itself


class PaperGPULab(Lab):
    """The paper GPU's assumptions (no lab_name: not a lab by itself)."""

    tp = param.Selector(
        objects=list(TP_SIZES),
        default=_D["tp"].default,
        doc="tensor-parallel GPUs: weights, query heads and KV heads split over them (KV heads "
        "replicated when fewer than tp), two all-reduces per layer",
    )
    weight_precision = param.Selector(
        objects=list(WEIGHT_PRECISIONS),
        default=_D["weight_precision"].default,
        doc="weights: 16-bit (2 B), fp8 or int8 (1 B), int4 (0.5 B); fp8 computes at the "
        "GPU's FP8 peak where it has one (H100, H200), the rest at the 16-bit peak",
    )
    kv_precision = param.Selector(
        objects=list(KV_PRECISIONS),
        default=_D["kv_precision"].default,
        doc="KV cache: 16-bit (2 B per element) or fp8 (1 B)",
    )

    mem_util = param.Number(
        _D["mem_util"].default,
        bounds=(0.05, 1.0),
        precedence=PAPER_GPU,
        doc="usable fraction of HBM (vLLM's gpu_memory_utilization)",
    )
    compute_eff = param.Number(
        _D["compute_eff"].default, bounds=(0.01, 1.0), precedence=PAPER_GPU, doc="fraction of peak FLOP/s reached"
    )
    memory_eff = param.Number(
        _D["memory_eff"].default, bounds=(0.01, 1.0), precedence=PAPER_GPU, doc="fraction of HBM bandwidth reached"
    )
    step_overhead_ms = param.Number(
        round(_D["step_overhead_s"].default * 1e3, 9),
        bounds=(0.0, 100.0),
        precedence=PAPER_GPU,
        doc="fixed cost of every step (launches, scheduling)",
    )
    block_overhead_us = param.Number(
        round(_D["block_overhead_s"].default * 1e6, 9),
        bounds=(0.0, 1000.0),
        precedence=PAPER_GPU,
        doc="fixed cost of each copy over the host link",
    )
    host_link_gb_s = param.Number(
        0.0,
        bounds=(0.0, 1000.0),
        precedence=PAPER_GPU,
        doc="host link bandwidth in GB/s; 0: the GPU's own (25 for A100, 50 for H100 and H200)",
    )
    swap_copies = param.Selector(
        objects=list(SWAP_COPIES),
        default=_D["swap_copies"].default,
        precedence=PAPER_GPU,
        doc="per-block: one copy per block (the lecture); per-layer-kv: one per layer for K "
        "and one for V, 2 x layers copies per block (vLLM V0)",
    )
    interconnect_gb_s = param.Number(
        0.0,
        bounds=(0.0, 10000.0),
        precedence=PAPER_GPU,
        doc="GPU-to-GPU bandwidth per GPU, one direction, in GB/s; 0: the GPU's NVLink "
        "(300 for A100, 450 for H100 and H200)",
    )
    allreduce_latency_us = param.Number(
        round(_D["allreduce_latency_s"].default * 1e6, 9),
        bounds=(0.0, 1000.0),
        precedence=PAPER_GPU,
        doc="fixed cost of each all-reduce (2 per layer when tp > 1)",
    )
    ignore_weights = param.Boolean(
        False,
        precedence=PAPER_GPU,
        doc="what-if: leave the weight bytes out of memory, so a model too big for the GPU "
        "is priced anyway (the result says so)",
    )

    def cost_model(self, gpu: str, model: LLMSpec) -> CostModel:
        return roofline(GPUS[gpu], model, self.assumptions())

    def assumptions(self) -> dict[str, Any]:
        """The parameters as `CostModel` keyword arguments (SI units)."""
        return {
            "mem_util": self.mem_util,
            "compute_eff": self.compute_eff,
            "memory_eff": self.memory_eff,
            "step_overhead_s": self.step_overhead_ms / 1e3,
            "block_overhead_s": self.block_overhead_us / 1e6,
            "link_bandwidth": self.host_link_gb_s * 1e9 or None,
            "swap_copies": self.swap_copies,
            "ignore_weights": self.ignore_weights,
            "tp": self.tp,
            "weight_precision": self.weight_precision,
            "kv_precision": self.kv_precision,
            "interconnect_bandwidth": self.interconnect_gb_s * 1e9 or None,
            "allreduce_latency_s": self.allreduce_latency_us / 1e6,
        }
