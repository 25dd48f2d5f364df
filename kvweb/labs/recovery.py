"""Lab `recovery`: bringing back one preempted request by swap or by recompute."""
from __future__ import annotations

from typing import Any

import param

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.lab import Lab, Progress, no_progress

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class RecoveryLab(Lab):
    lab_name = "recovery"
    title = "Swap vs recompute: the cost of one preemption"
    summary = ("A preempted request of N tokens comes back either by swapping its KV blocks out to "
               "host memory and back over the host link (bytes / link + a fixed cost per block) or by "
               "recomputing its KV with one prefill. swap_s counts both directions, swap_in_s only the "
               "way back. Decimal units: 1 GB = 1e9 B.")

    model = param.Selector(objects=list(MODELS), default="llama-3-8b", doc="model (sets KV bytes per token and prefill cost)")
    gpu = param.Selector(objects=list(GPUS), default="H100-SXM", doc="GPU of the per-block-size table")
    tokens = param.Integer(2048, bounds=(1, 1_000_000), doc="KV tokens of the preempted request")
    block_overhead_us = param.Number(10.0, bounds=(0.0, 1000.0), doc="fixed cost per block copied over the host link")

    def cost(self, gpu: str) -> CostModel:
        return CostModel(GPUS[gpu], MODELS[self.model], block_overhead_s=self.block_overhead_us / 1e6)

    def rows(self, gpu: str) -> list[dict[str, Any]]:
        cm = self.cost(gpu)
        recompute = cm.recompute_cost(self.tokens)
        rows = []
        for bs in BLOCK_SIZES:
            swap_in = cm.swap_cost(self.tokens, bs)
            swap = cm.swap_roundtrip_cost(self.tokens, bs)
            rows.append({"block_size": bs, "swap_s": swap, "swap_in_s": swap_in, "recompute_s": recompute,
                         "faster": "swap" if swap < recompute else "recompute"})
        return rows

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        by_gpu = [{"gpu": g, "rows": self.rows(g)} for g in GPUS]
        chosen = next(entry["rows"] for entry in by_gpu if entry["gpu"] == self.gpu)
        cm = self.cost(self.gpu)
        return {
            "per_block_size": chosen,
            "swap_s": {r["block_size"]: r["swap_s"] for r in chosen},
            "recompute_s": cm.recompute_cost(self.tokens),
            "kv_bytes": self.tokens * cm.model.kv_bytes_per_token,
            "link_bandwidth": cm.gpu.link_bandwidth,
            "by_gpu": by_gpu,
            "units": "decimal (1 GB = 1e9 B)",
        }
