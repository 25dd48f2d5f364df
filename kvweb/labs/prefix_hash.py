"""Lab `prefix-hash`: the radix tree against vLLM's chained block hashes, same workload and pool."""
from __future__ import annotations

from typing import Any

import param

from kvweb.cache_schedule import PrefixCache, RadixServer, simulate, summary
from kvweb.lab import ParamError, Progress, no_progress
from kvweb.labs.cache_schedule import CapacityLab
from kvweb.prefix_hash import PrefixHashCache


class PrefixHash(CapacityLab):
    lab_name = "prefix-hash"
    title = "Radix tree vs chained block hashes"
    summary = (
        "vLLM's automatic prefix caching hashes each full block together with the hash of the "
        "block before it, and reuses only whole blocks; the radix tree reuses any prefix down to "
        "the token. Same workload, same pool, same order; the radix tree with pages of the block "
        "size shows how much of the gap is the block granularity."
    )

    policy = param.Selector(objects=["fcfs", "lspf"], default="fcfs", doc="order in which waiting requests are served")
    block_size = param.Integer(16, bounds=(1, 256), doc="tokens per block (hash) and per radix page")

    def check(self) -> None:
        super().check()
        if self.capacity < self.block_size:
            raise ParamError(f"capacity: {self.capacity} tokens hold no block of {self.block_size}; "
                             f"allowed: at least block_size")

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        requests = self.requests()
        caches: dict[str, PrefixCache] = {
            "radix": RadixServer(self.capacity),
            "radix_paged": RadixServer(self.capacity, self.block_size),
            "hash": PrefixHashCache(self.capacity, self.block_size),
        }
        runs = {}
        for i, (name, cache) in enumerate(caches.items()):
            progress(i / len(caches), f"serving on {name}")
            runs[name] = summary(simulate(requests, cache, self.policy, self.queue, self.alpha))
        return {
            "block_size": self.block_size,
            "radix_hit_rate": runs["radix"]["hit_rate"],
            "radix_paged_hit_rate": runs["radix_paged"]["hit_rate"],
            "hash_hit_rate": runs["hash"]["hit_rate"],
            "runs": runs,
        }
