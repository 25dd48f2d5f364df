"""Lab `cache-sweep`: hit rate against cache capacity for every scheduling order."""

from __future__ import annotations

from typing import Any

import param

from kvweb.prefix.cache_schedule import POLICIES, capacity_grid, policy_hit_rate, sweep
from kvweb.labs.cache_schedule import QueueLab
from kvweb.budget import Estimate, work
from kvweb.lab import Progress, no_progress
from kvweb.memo import Memo

# Remembered across runs (least recently used dropped first), shared by every session; each a
# pure function of its key. A widget change reruns only what it touches: `alpha` only the aging
# order's runs, `queue` all but the offline optimum, `points` the capacities not tried before.
# The workload's requests are remembered by `WorkloadLab.requests`.
_GRIDS: Memo[list[int]] = Memo(16)  # (workload, points) -> capacities
_RATES: Memo[float] = Memo(1024)  # (workload, capacity, policy, queue, alpha) -> hit rate (a float each)


class CacheSweep(QueueLab):
    lab_name = "cache-sweep"
    title = "Cache capacity sweep"
    summary = (
        "The same workload served at capacities from half the shortest request up to its "
        "distinct tokens (nothing ever evicted), in every order and offline in depth-first "
        "order. Below the longest request little or nothing hits; with room for everything "
        "the order stops mattering."
    )

    points = param.Integer(8, bounds=(2, 12), doc="capacities tried (geometrically spaced)")

    def estimate(self) -> Estimate:
        """Every order, and the offline optimum, at every capacity."""
        runs = [self.served_work(peeking=p in ("lspf", "aging"), queue=self.queue) for p in (*POLICIES, "optimal")]
        return work(
            *((n * self.points, unit) for run in runs for n, unit in run), lower=("queue", "points", *self.lengths())
        )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        workload = self.workload_key()
        requests = self.requests()
        capacities = _GRIDS.get((workload, self.points), lambda: capacity_grid(requests, self.points))

        def rate_of(capacity: int, policy: str) -> float:
            key = (
                workload,
                capacity,
                policy,
                None if policy == "optimal" else self.queue,
                self.alpha if policy == "aging" else None,
            )
            return _RATES.get(key, lambda: policy_hit_rate(requests, capacity, policy, self.queue, self.alpha))

        result = sweep(requests, capacities, POLICIES, self.queue, self.alpha, progress=progress, rate_of=rate_of)
        result["longest_request"] = int(max(len(r.tokens) for r in requests))
        result["shortest_request"] = int(min(len(r.tokens) for r in requests))
        return result
