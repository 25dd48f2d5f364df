"""Radix cache throughput: match + insert + evict on a long synthetic multi-turn trace.

    .venv/bin/python -m bench.radix_cache [--sessions 200 --turns 10 --capacity 60000 --rounds 3]

The trace is `cache_workload.multi_turn` (every prompt = the whole conversation so far + a
new question), served in a seeded random interleaving of the sessions, each turn after the
previous one. Each request matches its prompt, then inserts prompt + output, evicting
least recently used leaves beyond `capacity` tokens. Two caches serve the same trace:
`RadixServer` (kvweb's RadixCache: token runs on edges compared with numpy, a slot pool)
and a straightforward per-token trie written below (one dict node per token, LRU over leaf
tokens with the same leaf set and heap). Throughput = (prompt + output tokens) / second,
best of `rounds`. Goal: the radix cache clearly faster than the per-token trie.
"""

from __future__ import annotations

import argparse
import heapq
import time

import numpy as np

from kvweb.prefix.cache_schedule import RadixServer
from kvweb.prefix.cache_workload import Request, multi_turn


class TokenNode:
    __slots__ = ("children", "parent", "token", "last_access")

    def __init__(self, parent: TokenNode | None, token: int) -> None:
        self.children: dict[int, TokenNode] = {}
        self.parent = parent
        self.token = token
        self.last_access = 0

    def __lt__(self, other: TokenNode) -> bool:
        return id(self) < id(other)


class TokenTrie:
    """The baseline: a trie with one node per token, LRU eviction of leaf tokens."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.root = TokenNode(None, -1)
        self.size = 0
        self.clock = 0
        self.leaves: set[TokenNode] = set()

    def serve(self, request: Request) -> int:
        self.clock += 1
        node, matched = self.root, 0
        for token in request.prompt.tolist():
            child = node.children.get(token)
            if child is None:
                break
            node, matched = child, matched + 1
        tokens = request.tokens.tolist()
        if len(tokens) > self.capacity:
            return matched
        node = self.root
        for token in tokens:
            child = node.children.get(token)
            if child is None:
                child = TokenNode(node, token)
                node.children[token] = child
                self.leaves.discard(node)
                self.leaves.add(child)
                self.size += 1
            child.last_access = self.clock
            node = child
        self.evict(self.size - self.capacity)
        return matched

    def evict(self, n: int) -> None:
        heap = [(leaf.last_access, leaf) for leaf in self.leaves]
        heapq.heapify(heap)
        while n > 0 and heap:
            _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            del parent.children[leaf.token]
            self.leaves.discard(leaf)
            self.size -= 1
            n -= 1
            if not parent.children and parent is not self.root:
                self.leaves.add(parent)
                heapq.heappush(heap, (parent.last_access, parent))


def interleaved(requests: list[Request], seed: int) -> list[Request]:
    """Sessions' turns in a random interleaving, each session's turns in order."""
    rng = np.random.default_rng(seed)
    sessions: dict[int, list[Request]] = {}
    for r in requests:
        sessions.setdefault(r.group, []).append(r)
    queues = [list(reversed(turns)) for turns in sessions.values()]
    order = []
    while queues:
        i = int(rng.integers(len(queues)))
        order.append(queues[i].pop())
        if not queues[i]:
            queues.pop(i)
    return order


def run(cache: RadixServer | TokenTrie, trace: list[Request]) -> tuple[float, int]:
    start = time.perf_counter()
    hits = sum(cache.serve(r) for r in trace)
    return time.perf_counter() - start, hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--system-len", type=int, default=200)
    ap.add_argument("--question-len", type=int, default=50)
    ap.add_argument("--answer-len", type=int, default=100)
    ap.add_argument("--capacity", type=int, default=60_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    trace = interleaved(
        multi_turn(args.sessions, args.turns, args.system_len, args.question_len, args.answer_len, 0, seed=0), seed=1
    )
    tokens = sum(len(r.tokens) for r in trace)
    prompt = sum(len(r.prompt) for r in trace)
    print(f"trace: {len(trace)} requests, {tokens:,} tokens (prompt + output), capacity {args.capacity:,}")
    results = {}
    makers = {"radix cache": lambda: RadixServer(args.capacity), "per-token trie": lambda: TokenTrie(args.capacity)}
    for name, make in makers.items():
        best, hits = min(run(make(), trace) for _ in range(args.rounds))
        results[name] = best
        print(f"{name:15s} {best:7.3f} s  {tokens / best:12,.0f} tokens/s  hit rate {hits / prompt:.3f}")
    print(f"speed-up: {results['per-token trie'] / results['radix cache']:.1f}x")


if __name__ == "__main__":
    main()
