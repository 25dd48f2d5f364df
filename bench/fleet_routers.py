"""Benchmark: what one routing decision costs, per router (the fleet routes every arrival).

Run: .venv/bin/python -m bench.fleet_routers [--replicas 8] [--requests 1000] [--prompt 2000]
(figures go to docs/fleet.md by hand)

A few-shot-like workload: `--groups` shared prefixes of 3/4 of the prompt, a distinct tail each.
Every replica is an SGLang replica with a real radix cache; each decision is `decide` (regret
measured too), then the prompt is inserted in the chosen replica's cache, so the caches grow as
a fleet's would (nothing finishes or is evicted: a bound on the tree walks). CPU seconds of this
process per decision, and the summed regret as a check that the routers differ.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kvweb.fleet.regret import decide
from kvweb.fleet.routers import ROUTERS
from kvweb.prefix.radix_cache import RadixCache
from kvweb.serving.load.workload import Request


class Replica:
    def __init__(self, size: int) -> None:
        self.tree = RadixCache(size)
        self.load = 0

    def outstanding(self) -> int:
        return self.load

    def waiting(self) -> int:
        return self.load // 2

    def prefix_match(self, tokens: np.ndarray, adapter: int = 0) -> int:
        return self.tree.peek_length(tokens)

    def prefill_tokens(self) -> int:
        return 0

    def decode_blocks(self) -> int:
        return self.load

    def adapters(self) -> None:
        return None

    def take(self, tokens: np.ndarray) -> None:
        m = self.tree.match_prefix(tokens)
        self.tree.insert(tokens, np.concatenate([m.slots, self.tree.alloc(len(tokens) - m.length)]))
        self.load += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--prompt", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=16)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    shared = args.prompt * 3 // 4
    prefixes = rng.integers(0, 32000, (args.groups, shared))
    requests = [
        Request(
            i,
            i * 0.1,
            args.prompt,
            1,
            np.concatenate([prefixes[rng.integers(args.groups)], rng.integers(0, 32000, args.prompt - shared + 1)]),
        )
        for i in range(args.requests)
    ]
    print(f"{args.replicas} replicas, {args.requests} requests of {args.prompt} tokens, {args.groups} prefixes")
    for name, make in ROUTERS.items():
        replicas = [Replica(args.requests * args.prompt) for _ in range(args.replicas)]
        router = make(args.replicas)
        spent, regret = 0.0, 0
        for r in requests:
            t = time.process_time()
            d = decide(router, r, replicas)
            spent += time.process_time() - t
            regret += d.regret
            replicas[d.replica].take(r.tokens[: r.prompt])
        print(f"{name:18} {1e6 * spent / len(requests):8.0f} us/decision  regret {regret:,} tokens")


if __name__ == "__main__":
    main()
