"""Lab `prefill-savings`: cache hits turned into prefill seconds on the paper GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import param

from kvweb.prefix.cache_schedule import RadixServer, hit_rate, prefill_seconds, simulate
from kvweb.gpu import GPUS, MODELS
from kvweb.budget import Estimate, work
from kvweb.lab import Progress, no_progress
from kvweb.labs.cache_schedule import CapacityLab
from kvweb.labs.paper_gpu import PaperGPULab


class PrefillSavings(CapacityLab, PaperGPULab):
    lab_name = "prefill-savings"
    title = "Prefill time saved by the radix cache"
    summary = (
        "The workload served in FCFS and in longest-shared-prefix-first order, each prompt's "
        "prefill costed on the paper GPU with its cached prefix. Time saved is below the hit "
        "rate: the uncached suffix still attends to the whole prefix, and a short prefill is "
        "memory-bound (it reads all the weights however few tokens it computes)."
    )

    gpu = param.Selector(objects=list(GPUS), default="H100-SXM", doc="GPU of the cost model")
    model = param.Selector(objects=list(MODELS), default="llama-3-8b", doc="model of the cost model")

    def check(self) -> None:
        super().check()
        self.cost_model(self.gpu, MODELS[self.model])  # a weight precision the model cannot take: a ParamError

    def estimate(self) -> Estimate:
        """The fcfs and lspf servings."""
        return work(
            *self.served_work(peeking=False), *self.served_work(queue=self.queue), lower=("queue", *self.lengths())
        )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        cost = self.cost_model(self.gpu, MODELS[self.model])
        result: dict[str, Any] = {**cost.fit(), "units": "seconds of prefill, summed over the requests"}
        if not cost.fits:
            return result
        requests = self.requests()
        for i, policy in enumerate(("fcfs", "lspf")):
            progress(i / 2, f"serving in {policy} order")
            served = simulate(requests, RadixServer(self.capacity), policy, self.queue, self.alpha)
            none, cached = prefill_seconds(served, cost)
            result["prefill_s_no_cache"] = none
            result[f"prefill_s_{policy}"] = cached
            result[f"hit_rate_{policy}"] = hit_rate(served)
            result[f"time_saved_{policy}"] = 1 - cached / none
        longest = max(len(r.prompt) for r in requests)
        suffix = np.unique(np.geomspace(1, longest, 24).round().astype(int)).tolist()
        result["suffix_curve"] = {  # one prompt of the longest length, the rest of it cached
            "prompt_len": longest,
            "uncached": suffix,
            "prefill_s": [cost.prefill_cost(n, longest - n) for n in suffix],
            "floor_s": cost.step_time(*cost.decode_work(0, 0)),  # one read of the weights + step overhead
        }
        return result
