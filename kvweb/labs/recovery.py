"""Lab `recovery`: bringing back one preempted request by swap or by recompute."""

from __future__ import annotations

from typing import Any

import param

from kvweb.gpu import GPUS, MODELS
from kvweb.budget import Estimate, constant
from kvweb.lab import Progress, no_progress
from kvweb.labs.paper_gpu import PaperGPULab

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class RecoveryLab(PaperGPULab):
    lab_name = "recovery"
    title = "Swap vs recompute: the cost of one preemption"
    summary = (
        "A preempted request of N tokens comes back either by swapping its KV blocks out to "
        "host memory and back over the host link (bytes / link + a fixed cost per copy) or by "
        "recomputing its KV with one prefill. swap_s counts both directions, swap_in_s only the "
        "way back. Decimal units: 1 GB = 1e9 B."
    )

    model = param.Selector(
        objects=list(MODELS), default="llama-3-8b", doc="model (sets KV bytes per token and prefill cost)"
    )
    gpu = param.Selector(objects=list(GPUS), default="H100-SXM", doc="GPU of the per-block-size table")
    tokens = param.Integer(2048, bounds=(1, 1_000_000), doc="KV tokens of the preempted request")

    def check(self) -> None:
        self.cost_model(self.gpu, MODELS[self.model])  # a weight precision the model cannot take: a ParamError

    def rows(self, gpu: str) -> list[dict[str, Any]]:
        """Swap against recompute at every block size; none where the model does not fit."""
        cm = self.cost_model(gpu, MODELS[self.model])
        if not cm.fits:
            return []
        recompute = cm.recompute_cost(self.tokens)
        rows = []
        for bs in BLOCK_SIZES:
            swap_in = cm.swap_cost(self.tokens, bs)
            swap = cm.swap_roundtrip_cost(self.tokens, bs)
            rows.append(
                {
                    "block_size": bs,
                    "swap_s": swap,
                    "swap_in_s": swap_in,
                    "recompute_s": recompute,
                    "faster": "swap" if swap < recompute else "recompute",
                }
            )
        return rows

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: a handful of formulas."""
        return constant(0.1)

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        cm = self.cost_model(self.gpu, MODELS[self.model])
        by_gpu = [{"gpu": g, "rows": rows, "fits": bool(rows)} for g in GPUS for rows in [self.rows(g)]]
        result = {
            **cm.fit(),
            "kv_bytes": self.tokens * cm.kv_bytes_per_token,
            "link_bandwidth": cm.link,
            "copies_per_block": cm.copies_per_block,
            "by_gpu": by_gpu,
            "units": "decimal (1 GB = 1e9 B)",
        }
        if not cm.fits:
            return result
        chosen = next(entry["rows"] for entry in by_gpu if entry["gpu"] == self.gpu)
        return {
            **result,
            "per_block_size": chosen,
            "swap_s": {r["block_size"]: r["swap_s"] for r in chosen},
            "recompute_s": cm.recompute_cost(self.tokens),
        }
