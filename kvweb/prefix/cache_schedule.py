"""Cache-aware scheduling (SPEC 5): which waiting request to serve next.

A server handles one request at a time. Requests arrive into a waiting queue of bounded
size (the rest wait outside, in arrival order); each step the policy picks one, which
matches its prompt against the cache, then inserts prompt + output, evicting least
recently used leaves when the pool is full. Orders: first come first served, longest
shared prefix first (SGLang's `lpm`), `dfs-rank` (an online policy: the waiting request that
comes first in the offline depth-first order of the prompts' prefix tree, whatever is cached
now), and aging (match length + alpha x steps waited), which bounds starvation. The offline
depth-first order itself, every request served back to back, is `optimal`.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kvweb.prefix.cache_workload import Request, dfs_order
from kvweb.gpu import CostModel
from kvweb.prefix.radix_cache import RadixCache

POLICIES = ("fcfs", "lspf", "dfs-rank", "aging")


class PrefixCache(Protocol):
    """What the scheduler needs from a prefix cache."""

    def peek(self, prompt: np.ndarray) -> int: ...
    def serve(self, request: Request) -> int: ...
    @property
    def cached(self) -> int: ...


class RadixServer:
    """Serves requests on a RadixCache of `capacity` tokens: match, lock, allocate the
    uncached rest (evicting as needed), insert prompt + output, unlock.

    `cache_answers=False` inserts only the prompt and frees the answer's slots, as an engine
    that caches prompts alone would: a chat's next turn, whose prompt holds that answer, then
    matches only up to it."""

    def __init__(self, capacity: int, page_size: int = 1, cache_answers: bool = True) -> None:
        if not cache_answers and page_size != 1:
            raise ValueError("cache_answers=False needs one-token pages (an answer may start inside a page)")
        self.cache = RadixCache(capacity, page_size)
        self.cache_answers = cache_answers

    def peek(self, prompt: np.ndarray) -> int:
        return self.cache.match_length(prompt, remember=True)

    def serve(self, request: Request) -> int:
        """Returns the prompt tokens found in the cache. A request longer than the whole
        pool runs without leaving anything cached."""
        tokens = request.tokens
        match = self.cache.match_prefix(request.prompt, remember=True)
        self.cache.lock(match.node)
        fresh = self.cache.alloc(len(tokens) - match.length)
        if fresh is not None:
            kept = tokens if self.cache_answers else request.prompt
            cut = len(kept) - match.length
            self.cache.extend(match, kept, fresh[:cut])
            if cut < len(fresh):
                self.cache.pool.free(fresh[cut:])
        self.cache.unlock(match.node)
        return match.length

    @property
    def cached(self) -> int:
        return self.cache.cached_size


@dataclass(frozen=True)
class Served:
    rid: int
    group: int
    step: int  # when service began
    prompt_len: int
    matched: int  # prompt tokens read from the cache
    wait: int  # steps spent in the waiting queue
    cached: int  # tokens in the cache after this request


@dataclass
class _Waiting:
    request: Request
    entered: int
    order: int  # queue entry order: first come first served


def _scores(
    policy: str, server: PrefixCache, rank: dict[int, int], alpha: float, now: int, waiting: list[_Waiting]
) -> list[float]:
    """The priority of each waiting request, in queue order (peeks at the cache in that order)."""
    if policy == "fcfs":
        return [-w.order for w in waiting]
    if policy == "dfs-rank":
        return [-rank[w.request.rid] for w in waiting]
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
    matches = list(map(server.peek, [w.request.prompt for w in waiting]))
    if policy == "lspf":
        return matches
    return [m + alpha * (now - w.entered) for m, w in zip(matches, waiting)]  # aging


def simulate(
    requests: Sequence[Request], server: PrefixCache, policy: str, queue: int = 32, alpha: float = 1.0
) -> list[Served]:
    """Serve every request, one per step, in the order the policy picks from the queue.
    Ties go to the request that entered the queue first."""
    rank = {requests[i].rid: pos for pos, i in enumerate(dfs_order(list(requests)))} if policy == "dfs-rank" else {}
    by_rid = {r.rid: r for r in requests}
    next_turns: dict[int, list[Request]] = {}
    arrivals: list[tuple[int, int]] = []
    for r in requests:
        if r.after is None:
            arrivals.append((r.arrival, r.rid))
        else:
            next_turns.setdefault(r.after, []).append(r)
    heapq.heapify(arrivals)
    outside: deque[Request] = deque()
    waiting: list[_Waiting] = []
    served: list[Served] = []
    now = entries = 0
    while len(served) < len(requests):
        while arrivals and arrivals[0][0] <= now:
            outside.append(by_rid[heapq.heappop(arrivals)[1]])
        while outside and len(waiting) < queue:
            waiting.append(_Waiting(outside.popleft(), now, entries))
            entries += 1
        if not waiting:
            now = arrivals[0][0]  # idle until the next arrival
            continue
        scores = _scores(policy, server, rank, alpha, now, waiting)
        w = waiting.pop(scores.index(max(scores)))  # `waiting` is in entry order: ties go to the first
        matched = server.serve(w.request)
        served.append(
            Served(w.request.rid, w.request.group, now, len(w.request.prompt), matched, now - w.entered, server.cached)
        )
        now += 1
        for turn in next_turns.get(w.request.rid, ()):
            heapq.heappush(arrivals, (now + turn.delay, turn.rid))
    return served


def serve_in_order(requests: Sequence[Request], order: Sequence[int], server: PrefixCache) -> list[Served]:
    """Serve requests back to back in a fixed order, ignoring arrivals (offline)."""
    served = []
    for step, i in enumerate(order):
        r = requests[i]
        matched = server.serve(r)
        served.append(Served(r.rid, r.group, step, len(r.prompt), matched, 0, server.cached))
    return served


def optimal(requests: Sequence[Request], capacity: int, page_size: int = 1, cache_answers: bool = True) -> list[Served]:
    """The offline depth-first order on the same cache: the best hit rate when the cache
    holds at least the longest request (SGLang's theorem), an upper bound to compare with."""
    return serve_in_order(requests, dfs_order(list(requests)), RadixServer(capacity, page_size, cache_answers))


def hit_rate(served: Sequence[Served]) -> float:
    total = sum(s.prompt_len for s in served)
    return sum(s.matched for s in served) / total if total else 0.0


def summary(served: Sequence[Served], points: int = 200) -> dict:
    """Headline figures and sampled running curves (hit rate, wait, cache size) per step."""
    matched = np.cumsum([s.matched for s in served])
    prompt = np.cumsum([s.prompt_len for s in served])
    waits = np.array([s.wait for s in served])
    idx = np.unique(np.linspace(0, len(served) - 1, min(points, len(served))).round().astype(int))
    return {
        "hit_rate": hit_rate(served),
        "max_wait": int(waits.max(initial=0)),
        "mean_wait": float(waits.mean()) if len(waits) else 0.0,
        "curve": {
            "served": (idx + 1).tolist(),
            "step": [served[i].step for i in idx],
            "hit_rate": (matched[idx] / np.maximum(prompt[idx], 1)).tolist(),
            "wait": waits[idx].tolist(),
            "cached": [served[i].cached for i in idx],
        },
    }


def capacity_grid(requests: Sequence[Request], points: int) -> list[int]:
    """Capacities from half the shortest request up to the workload's distinct tokens (a
    cache that never evicts), spaced geometrically."""
    everything = RadixServer(sum(len(r.tokens) for r in requests))
    for r in requests:
        everything.serve(r)
    low = max(1, min(len(r.tokens) for r in requests) // 2)
    high = max(low, everything.cached)
    return sorted(set(np.geomspace(low, high, points).round().astype(int).tolist()))


def policy_hit_rate(
    requests: Sequence[Request], capacity: int, policy: str, queue: int, alpha: float, page_size: int = 1
) -> float:
    """The hit rate of one policy (or "optimal", the offline optimum) at one cache capacity.
    Only "aging" reads `alpha`, and "optimal" does not read `queue` either."""
    served = (
        optimal(requests, capacity, page_size)
        if policy == "optimal"
        else simulate(requests, RadixServer(capacity, page_size), policy, queue, alpha)
    )
    return hit_rate(served)


def sweep(
    requests: Sequence[Request],
    capacities: Sequence[int],
    policies: Sequence[str],
    queue: int,
    alpha: float,
    page_size: int = 1,
    progress: Callable[[float, str], None] | None = None,
    rate_of: Callable[[int, str], float] | None = None,
) -> dict:
    """Hit rate of each policy, and of the offline optimum, at each cache capacity.
    `rate_of(capacity, policy)`, when given, stands for `policy_hit_rate` on these arguments
    (a caller that remembers runs)."""
    rates: dict[str, list[float]] = {p: [] for p in (*policies, "optimal")}
    runs = len(capacities) * len(rates)
    for c, capacity in enumerate(capacities):
        for p, policy in enumerate(rates):
            if progress:
                progress((c * len(rates) + p) / runs, f"capacity {capacity}: {policy}")
            rates[policy].append(
                rate_of(capacity, policy)
                if rate_of
                else policy_hit_rate(requests, capacity, policy, queue, alpha, page_size)
            )
    return {"capacity": list(capacities), "hit_rate": rates}


def prefill_seconds(served: Sequence[Served], cost: CostModel) -> tuple[float, float]:
    """Prefill time of these requests without a cache and with the hits they got.

    A hit still leaves the uncached suffix to compute, attending to the cached prefix,
    and at least one token (for the logits): time saved is below the hit rate.
    """
    none = sum(cost.prefill_cost(s.prompt_len) for s in served)
    with_cache = 0.0
    for s in served:
        cached = min(s.matched, s.prompt_len - 1)
        with_cache += cost.prefill_cost(s.prompt_len - cached, cached)
    return none, with_cache
