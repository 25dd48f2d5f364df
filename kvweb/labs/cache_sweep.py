"""Lab `cache-sweep`: hit rate against cache capacity for every scheduling order."""
from __future__ import annotations

from typing import Any

import param

from kvweb.prefix.cache_schedule import POLICIES, capacity_grid, sweep
from kvweb.labs.cache_schedule import QueueLab
from kvweb.lab import Progress, no_progress


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

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        requests = self.requests()
        capacities = capacity_grid(requests, self.points)
        result = sweep(requests, capacities, POLICIES, self.queue, self.alpha, progress=progress)
        result["longest_request"] = int(max(len(r.tokens) for r in requests))
        result["shortest_request"] = int(min(len(r.tokens) for r in requests))
        return result
