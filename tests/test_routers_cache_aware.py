"""SGLang's cache-aware router on a weak match (kvweb/fleet/routers.py): since SGLang PR #14650 (Dec
2025, "cache-aware router should pick min load instead of min tenant size") a request whose longest
match is at most `cache_threshold` of its text goes to the least loaded worker, not to the tenant with
the smallest tree. Hand-built cases where the two differ."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvweb.fleet.routers import CacheAware
from kvweb.serving.load.workload import Request


@dataclass
class Loaded:
    """A replica as the cache-aware router reads it: its outstanding requests only."""

    load: int = 0

    def outstanding(self) -> int:
        return self.load


def req(tokens: list[int], t: float = 0.0) -> Request:
    return Request(0, t, len(tokens), 1, np.array(tokens + [0], dtype=np.int64))


def seq(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def views(*loads: int) -> list[Loaded]:
    return [Loaded(n) for n in loads]


def test_a_miss_goes_to_the_least_loaded_replica_not_the_smallest_tree():
    router = CacheAware(3)
    assert router.route(req(seq(1, 10)), views(0, 9, 9)) == 0  # a miss: the least loaded, replica 0
    assert router.route(req(seq(100, 20)), views(9, 0, 9)) == 1
    assert router.tree.size == [10, 20, 0]  # replica 2 has the smallest tree ...
    # ... but replica 1 the fewest outstanding requests (balanced: 9 - 1 = 8 is not above 64)
    assert router.route(req(seq(300, 10)), views(5, 1, 9)) == 1 and router.reason == "least loaded"
    assert router.tree.size == [10, 30, 0]
    # equal loads: the lowest index (Rust's min_by_key keeps the first), whatever the trees hold
    assert router.route(req(seq(500, 10)), views(3, 3, 3)) == 0 and router.tree.size == [20, 30, 0]


def test_a_weak_match_goes_to_the_least_loaded_and_a_strong_one_to_its_tenant():
    router = CacheAware(3)
    a = seq(1, 10)
    router.route(req(a), views(0, 4, 4))  # replica 0 holds a
    weak = a[:3] + seq(50, 7)  # 3 of 10 = 0.3, not above the threshold
    assert router.route(req(weak), views(2, 6, 1)) == 2 and router.reason == "least loaded"
    strong = a[:6] + seq(60, 4)  # 0.6: replica 0's, though it is not the least loaded
    assert router.route(req(strong), views(7, 6, 1)) == 0 and router.reason == "match"
