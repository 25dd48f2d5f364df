"""Lab `prefix-hash`: the radix tree against vLLM's chained block hashes, same workload and pool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import param

from kvweb.prefix.cache_schedule import PrefixCache, RadixServer, simulate, summary
from kvweb.budget import Estimate, work
from kvweb.lab import ParamError, Progress, no_progress
from kvweb.memo import Memo
from kvweb.labs.cache_schedule import CapacityLab
from kvweb.prefix.prefix_hash import PrefixHashCache
from kvweb.serving.memory.paged_memory import BLOCK_SIZE

BLOCK_SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CACHES: dict[str, Callable[[int, int], PrefixCache]] = {
    "radix_paged": RadixServer,
    "hash": PrefixHashCache,
}  # whole blocks only

# Remembered across runs (least recently used dropped first), shared by every session; callers only
# read them. A widget change reruns only what it touches: `block_size` the two runs at the new size,
# `capacity` the sizes whose pool it changes, `alpha` nothing (neither order here reads it).
_RUNS: Memo[dict[str, Any]] = Memo(128)  # (workload, cache, blocks in the pool, block size, policy, queue) -> summary


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
    block_size = param.Integer(BLOCK_SIZE, bounds=(1, 256), doc="tokens per block (hash) and per radix page")

    def check(self) -> None:
        super().check()
        if self.capacity < self.block_size:
            raise ParamError(
                f"capacity: {self.capacity} tokens hold no block of {self.block_size}; allowed: at least block_size"
            )

    def estimate(self) -> Estimate:
        """The radix tree, and both caches at `block_size` and at every size of the sweep."""
        caches = [
            (1, False),
            (self.block_size, False),
            (self.block_size, True),
            *((b, name == "hash") for b in BLOCK_SWEEP for name in CACHES if b <= self.capacity),
        ]
        peeking = self.policy == "lspf"
        return work(
            *(part for b, hashed in caches for part in self.served_work(b, peeking, self.queue, hashed)),
            lower=("queue", *self.lengths()),
            higher=("block_size",),
        )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        requests, workload = self.requests(), self.workload_key()

        def served(name: str, block: int) -> dict[str, Any]:
            """The summary of serving the workload on cache `name` with blocks of `block` tokens.
            Either cache is a pool of capacity // block blocks: its whole state."""
            key = (workload, name, self.capacity // block, block, self.policy, self.queue)
            return _RUNS.get(
                key,
                lambda: summary(
                    simulate(requests, CACHES[name](self.capacity, block), self.policy, self.queue, self.alpha)
                ),
            )

        runs = {"radix": served("radix_paged", 1), **{name: served(name, self.block_size) for name in CACHES}}
        sizes = [b for b in BLOCK_SWEEP if b <= self.capacity]
        swept: dict[str, list[float]] = {name: [] for name in CACHES}
        for i, block in enumerate(sizes):
            progress(i / len(sizes), f"block size {block}")
            for name in CACHES:
                swept[name].append(served(name, block)["hit_rate"])
        swept["radix"] = [runs["radix"]["hit_rate"]] * len(sizes)
        return {
            "block_size": self.block_size,
            "radix_hit_rate": runs["radix"]["hit_rate"],
            "radix_paged_hit_rate": runs["radix_paged"]["hit_rate"],
            "hash_hit_rate": runs["hash"]["hit_rate"],
            "runs": runs,
            "block_sweep": {"block_size": sizes, "hit_rate": swept},
        }
