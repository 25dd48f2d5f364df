"""Regret: for one routing decision, the prefix tokens another replica's real cache held beyond
the chosen replica's. A router that guesses (round robin, the approximate tree) or trades cache
for load (balancing, costs, queue scores) pays for it here; the exact prefix router pays only
when its queue score overrode the prefix score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvweb.fleet.replica_view import ReplicaView
from kvweb.fleet.routers import Router, prompt_of
from kvweb.serving.load.workload import Request


@dataclass(frozen=True)
class Decision:
    """One routing decision, read against every replica's cache as it was when it was made."""

    request: int  # request id
    replica: int  # the replica chosen
    reason: str  # the router's rule that chose it
    matched: int  # prompt tokens the chosen replica had cached
    best: int  # the most any replica had cached

    @property
    def regret(self) -> int:
        return self.best - self.matched


def decide(router: Router, request: Request, replicas: Sequence[ReplicaView]) -> Decision:
    """Route `request` and measure the decision: what the fleet calls at each arrival, before it
    enqueues the request on the replica chosen."""
    prompt = prompt_of(request)
    matches = [r.prefix_match(prompt, request.adapter, request.images) for r in replicas]
    i = router.route(request, replicas)
    return Decision(request.id, i, router.reason, matches[i], max(matches))
