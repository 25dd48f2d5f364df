"""Lab `prefix-hash`: the radix tree against vLLM's chained block hashes, same workload and pool."""
from __future__ import annotations

from typing import Any

import param

from kvweb.prefix.cache_schedule import PrefixCache, RadixServer, Served, hit_rate, simulate, summary
from kvweb.lab import ParamError, Progress, no_progress
from kvweb.labs.cache_schedule import CapacityLab
from kvweb.prefix.prefix_hash import PrefixHashCache

BLOCK_SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class PrefixHash(CapacityLab):
    lab_name = "prefix-hash"
    title = "Radix tree vs chained block hashes"
    summary = (
        "vLLM's automatic prefix caching hashes each full block together with the hash of the "
        "block before it, and reuses only whole blocks; the radix tree reuses any prefix down to "
        "the token. Same workload, same pool, same order; the radix tree with pages of the block "
        "size shows how much of the gap is the block granularity. The sweep repeats both at "
        "block sizes from 1 to 256 tokens."
    )

    policy = param.Selector(objects=["fcfs", "lspf"], default="lspf", doc="order in which waiting requests are served")
    block_size = param.Integer(16, bounds=(1, 256), doc="tokens per block (hash) and per radix page")

    def check(self) -> None:
        super().check()
        if self.capacity < self.block_size:
            raise ParamError(f"capacity: {self.capacity} tokens hold no block of {self.block_size}; "
                             f"allowed: at least block_size")

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        requests = self.requests()

        def serve(cache: PrefixCache) -> list[Served]:
            return simulate(requests, cache, self.policy, self.queue, self.alpha)

        runs = {"radix": summary(serve(RadixServer(self.capacity)))}
        runs.update((name, summary(serve(cache))) for name, cache in self.blocked(self.block_size).items())
        sizes = [b for b in BLOCK_SWEEP if b <= self.capacity]
        swept: dict[str, list[float]] = {"radix_paged": [], "hash": []}
        for i, block in enumerate(sizes):
            progress(i / len(sizes), f"block size {block}")
            for name, cache in self.blocked(block).items():
                swept[name].append(runs[name]["hit_rate"] if block == self.block_size else hit_rate(serve(cache)))
        swept["radix"] = [runs["radix"]["hit_rate"]] * len(sizes)
        return {
            "block_size": self.block_size,
            "radix_hit_rate": runs["radix"]["hit_rate"],
            "radix_paged_hit_rate": runs["radix_paged"]["hit_rate"],
            "hash_hit_rate": runs["hash"]["hit_rate"],
            "runs": runs,
            "block_sweep": {"block_size": sizes, "hit_rate": swept},
        }

    def blocked(self, block: int) -> dict[str, PrefixCache]:
        """The two caches that reuse whole blocks only."""
        return {"radix_paged": RadixServer(self.capacity, block), "hash": PrefixHashCache(self.capacity, block)}
