"""Seeded operation sequences on a radix cache, shared by the SGLang recorder (record_sglang.py,
in the SGLang venv) and the replay test (tests/test_parity_sglang.py, plain CPython): both sides
build the same operations from these definitions. Standard library only.

An operation is a list whose first item names it:
  ["insert", tokens]              a request with nothing cached: take len(tokens) slots, insert, free copies
  ["match", tokens, h]            match_prefix(tokens); the last node is kept as handle h
  ["lock", h] / ["unlock", h]     inc_lock_ref / dec_lock_ref of handle h's node
  ["finish", h, tokens, prompt]   handle h (locked, a prefix of tokens) ran: take slots for the rest,
                                  insert tokens, free copies, split at the prompt boundary (SGLang's
                                  release_kv_cache -> checkpoint(split_prompt=True)), unlock h
  ["evict", n]                    evict(n)
  ["hold", n, name] / ["drop", name]   a running request takes n slots outside the tree / frees them
Every allocation first evicts the pool's shortfall (SGLang's evict_to_free_tokens).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Protocol

KINDS = ("random", "shared", "fewshot", "multiturn", "pressure", "midsplit")
SEEDS = (1, 2, 3, 4)
PAGE_SIZES = (1, 4)
VOCAB = 64


def workloads() -> list[dict[str, Any]]:
    """Every workload: 6 kinds x 4 seeds x page sizes 1 and 4."""
    return [_workload(kind, seed, page) for kind in KINDS for seed in SEEDS for page in PAGE_SIZES]


def digest(items: list[dict[str, Any]]) -> str:
    """A fingerprint of the operations, so that a replay notices definitions that moved since recording."""
    return hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()[:16]


class _Gen:
    """Draws requests for one workload and keeps the handles valid (lock before finish, unlock once)."""

    def __init__(self, kind: str, seed: int, page: int) -> None:
        self.rng = random.Random(f"{kind}/{seed}/{page}")
        self.kind = kind
        self.ops: list[list[Any]] = []
        self.locked: list[tuple[int, list[int]]] = []  # (handle, prompt) matched and locked, not finished
        self.seen: list[list[int]] = []  # token runs cached so far (for prompts that reuse them)
        self.holds: list[str] = []
        self.next_handle = 0
        self.heads = [self.run(self.rng.randint(8, 40)) for _ in range(3)]  # system prompts / few-shot examples

    def run(self, n: int) -> list[int]:
        return [self.rng.randrange(VOCAB) for _ in range(n)]

    def prompt(self) -> list[int]:
        rng, kind = self.rng, self.kind
        if kind == "random":
            return self.run(rng.randint(3, 40))
        if kind == "shared" or kind == "pressure":
            return rng.choice(self.heads) + self.run(rng.randint(1, 24))
        if kind == "fewshot":
            shots = rng.sample(self.heads, rng.randint(1, 3))
            return [t for shot in shots for t in shot] + self.run(rng.randint(2, 12))
        if kind == "multiturn" and self.seen and rng.random() < 0.7:
            return rng.choice(self.seen) + self.run(rng.randint(2, 16))
        if kind == "midsplit" and self.seen and rng.random() < 0.8:
            base = rng.choice(self.seen)
            cut = rng.randint(1, len(base))  # a prefix ending inside an edge, then new tokens
            return base[:cut] + self.run(rng.randint(0, 10))
        return self.run(rng.randint(4, 30))

    def step(self) -> None:
        rng = self.rng
        r = rng.random()
        if r < 0.15:
            tokens = self.prompt()
            self.ops.append(["insert", tokens])
            self.seen.append(tokens)
        elif r < 0.45 or not self.locked:
            # a prefill round: the policy matches the waiting requests, then admission locks some of them
            batch = []
            for _ in range(rng.choice((1, 1, 2, 3, 4))):
                batch.append((self.next_handle, self.prompt()))
                self.ops.append(["match", batch[-1][1], self.next_handle])
                self.next_handle += 1
            rng.shuffle(batch)
            for h, tokens in batch:
                if rng.random() < 0.85:
                    self.ops.append(["lock", h])
                    self.locked.append((h, tokens))
        elif r < 0.75:
            h, prompt = self.locked.pop(rng.randrange(len(self.locked)))
            tokens = prompt + self.run(rng.randint(0, 20))
            self.ops.append(["finish", h, tokens, len(prompt)])
            self.seen.append(tokens)
        elif r < 0.82:
            h, _ = self.locked.pop(rng.randrange(len(self.locked)))
            self.ops.append(["unlock", h])  # aborted / retracted before finishing
        elif r < 0.9 or self.kind == "pressure":
            if self.holds and rng.random() < 0.5:
                self.ops.append(["drop", self.holds.pop(rng.randrange(len(self.holds)))])
            else:
                name = f"r{len(self.ops)}"
                self.ops.append(["hold", rng.randint(4, 60), name])
                self.holds.append(name)
        else:
            self.ops.append(["evict", rng.randint(1, 40)])


def _workload(kind: str, seed: int, page: int) -> dict[str, Any]:
    gen = _Gen(kind, seed, page)
    steps = 70 if kind == "pressure" else 55
    for _ in range(steps):
        gen.step()
    pool = {"pressure": 160, "random": 400}.get(kind, 260)
    return {"name": f"{kind}-{seed}-p{page}", "page_size": page, "pool": pool, "ops": gen.ops}


class Cache(Protocol):
    """What `replay` asks of a radix cache: SGLang's (record_sglang.py) or kvweb's (the test)."""

    root: Any

    def match(self, tokens: list[int]) -> tuple[int, Any]: ...  # (matched length, last node)
    def lock(self, node: Any) -> None: ...
    def unlock(self, node: Any) -> None: ...
    def alloc(self, n: int) -> Any: ...  # slots for n tokens after evicting the shortfall, or None
    def free(self, slots: Any) -> None: ...
    def path_slots(self, node: Any) -> Any: ...  # the slots of root..node
    def insert(
        self, tokens: list[int], parts: list[Any], own: int
    ) -> int: ...  # slots in parts; frees copies past own and the tail
    def split(self, tokens: list[int]) -> None: ...  # insert a cached prefix again: splits its last edge
    def evict(self, n: int) -> int: ...
    def sizes(self) -> tuple[int, int, int, int]: ...  # evictable, protected, free slots, tokens evicted so far
    def children(self, node: Any) -> list[Any]: ...
    def key(self, node: Any) -> list[int]: ...
    def lock_ref(self, node: Any) -> int: ...
    def stamp(self, node: Any) -> Any: ...  # the LRU stamp


def replay(work: dict[str, Any], cache: Cache) -> list[list[Any]]:
    """Run a workload's operations on `cache`; one observation per operation:
    [result, tokens evicted, evictable, protected, free, node count, sorted edge lengths, shape digest,
     evictable leaves oldest first (path digests), cached length of every run inserted so far
     (only after an operation that evicted, else None)]."""
    page = work["page_size"]
    handles: dict[int, tuple[Any, int]] = {}
    holds: dict[str, Any] = {}
    inserted: list[list[int]] = []
    out = []
    for op in work["ops"]:
        kind = op[0]
        evicted0 = cache.sizes()[3]
        if kind == "insert":
            slots = cache.alloc(len(op[1]))
            result = None if slots is None else cache.insert(op[1], [slots], 0)
            inserted.append(op[1])
        elif kind == "match":
            result, node = cache.match(op[1])
            handles[op[2]] = (node, result)
        elif kind == "lock":
            cache.lock(handles[op[1]][0])
            result = None
        elif kind == "unlock":
            cache.unlock(handles.pop(op[1])[0])
            result = None
        elif kind == "finish":
            result = _finish(cache, page, *handles.pop(op[1]), op[2], op[3])
            inserted.append(op[2])
        elif kind == "hold":
            holds[op[2]] = cache.alloc(op[1])
            result = holds[op[2]] is not None
        elif kind == "drop":
            slots = holds.pop(op[1])
            if slots is not None:
                cache.free(slots)
            result = None
        elif kind == "evict":
            result = cache.evict(op[1])
        else:
            raise ValueError(f"unknown operation {kind}")
        evictable, protected, free, evicted = cache.sizes()
        shape = _shape(cache)
        out.append(
            [
                result,
                evicted - evicted0,
                evictable,
                protected,
                free,
                len(shape),
                sorted(len(n[1]) for n in shape),
                _digest(shape),
                _lru(cache),
                [_cached(cache, run, page) for run in inserted] if evicted > evicted0 else None,
            ]
        )
    return out


def _finish(cache: Cache, page: int, node: Any, matched: int, tokens: list[int], prompt: int) -> int | None:
    """SGLang's release of a finished request (release_kv_cache -> checkpoint): insert prompt + output,
    split the leaf at the prompt boundary, match the key again and move the lock there, then unlock."""
    fresh = cache.alloc(len(tokens) - matched)
    if fresh is None:
        cache.unlock(node)
        return None
    already = cache.insert(tokens, [cache.path_slots(node), fresh], matched)
    whole, cut = len(tokens) // page * page, prompt // page * page
    if 0 < cut < whole:
        cache.split(tokens[:cut])
    _, last = cache.match(tokens)
    cache.lock(last)
    cache.unlock(node)
    cache.unlock(last)
    return already


def _shape(cache: Cache) -> list[tuple[int, list[int], int]]:
    """Every node but the root: (start position, edge tokens, lock count), in a canonical order."""
    nodes, stack = [], [(cache.root, 0)]
    while stack:
        node, start = stack.pop()
        for child in cache.children(node):
            key = cache.key(child)
            nodes.append((start, key, cache.lock_ref(child)))
            stack.append((child, start + len(key)))
    return sorted(nodes)


def _digest(value: Any) -> str:
    return hashlib.sha1(json.dumps(value).encode()).hexdigest()[:10]


def _lru(cache: Cache) -> list[str]:
    """The unlocked leaves (the eviction candidates), least recently used first, by path digest."""
    leaves, stack = [], [(cache.root, [])]
    while stack:
        node, path = stack.pop()
        for child in cache.children(node):
            run = path + cache.key(child)
            if cache.children(child):
                stack.append((child, run))
            elif cache.lock_ref(child) == 0:
                leaves.append((cache.stamp(child), _digest(run)))
    return [name for _, name in sorted(leaves)]


def _cached(cache: Cache, tokens: list[int], page: int) -> int:
    """How many leading tokens of `tokens` the tree holds (whole pages), without touching it."""
    node, i = cache.root, 0
    while True:
        for child in cache.children(node):
            key = cache.key(child)
            if key[:page] == tokens[i : i + page]:
                k = 0
                while k < len(key) and i + k < len(tokens) and key[k] == tokens[i + k]:
                    k += 1
                k -= k % page
                if k < len(key):
                    return i + k
                node, i = child, i + k
                break
        else:
            return i


def rounds() -> list[dict[str, Any]]:
    """Prefill rounds for SGLang's scheduling policy (SchedulePolicy.calc_priority, then PrefillAdder
    over the ordered waiting queue): a tree state, running requests, a waiting queue and budgets;
    then the rounds with LoRA adapters (`lora_rounds`)."""
    return [*_plain_rounds(), *lora_rounds()]


def lora_rounds() -> list[dict[str, Any]]:
    """Prefill rounds with LoRA adapters (0: the base model, SGLang's lora_id None; a: "lora{a}") and
    `max_loras` (max_loras_per_batch 1-3): the runs cached under an adapter, and the running and
    waiting requests' adapters. Prompts come from a few heads and runs cached whole, each request's
    adapter drawn apart from its prompt, so the same tokens are cached under one adapter and asked
    for under another; budgets are mostly large, so the adapters decide who is admitted."""
    out = []
    for seed in range(1, 17):
        rng = random.Random(f"lora-round/{seed}")
        heads = [[rng.randrange(VOCAB) for _ in range(rng.randint(20, 60))] for _ in range(3)]
        cached: list[list[Any]] = []

        def prompt() -> list[int]:
            if rng.random() < 0.3 and cached:
                return list(rng.choice(cached)[1])
            return rng.choice(heads) + [rng.randrange(VOCAB) for _ in range(rng.randint(1, 30))]

        for _ in range(rng.randint(1, 5)):
            cached.append([rng.randrange(4), prompt()])
        pool = rng.choice((1200, 2400))
        out.append(
            {
                "name": f"lora-round-{seed}",
                "pool": pool,
                "policy": "lpm" if seed % 4 else "fcfs",
                "ratio": rng.choice((0.7, 0.098)),
                "max_prefill": rng.choice((16384, 16384, 120)),
                "chunk": rng.choice((8192, 8192, 100)),
                "max_running": rng.choice((256, 256, 5)),
                "max_loras": rng.choice((1, 2, 2, 3)),
                "cached": cached,
                "held": rng.randint(0, pool // 8),
                "running": [
                    [rng.randint(1, 40), out_, rng.randint(0, min(20, out_ - 1)), rng.randrange(4)]
                    for out_ in (rng.randint(1, 200) for _ in range(rng.randint(0, 2)))
                ],
                "waiting": [[prompt(), rng.randint(1, 300), rng.randrange(4)] for _ in range(rng.randint(3, 10))],
            }
        )
    return out


def _plain_rounds() -> list[dict[str, Any]]:
    """The rounds without adapters (see `rounds`)."""
    out = []
    for seed in range(1, 41):
        rng = random.Random(f"round/{seed}")
        heads = [[rng.randrange(VOCAB) for _ in range(rng.randint(20, 60))] for _ in range(3)]

        def prompt() -> list[int]:
            r = rng.random()
            if r < 0.2 and cached:
                return list(rng.choice(cached))  # a prompt cached whole
            if r < 0.7:
                return rng.choice(heads) + [rng.randrange(VOCAB) for _ in range(rng.randint(1, 30))]
            return [rng.randrange(VOCAB) for _ in range(rng.randint(2, 60))]

        cached: list[list[int]] = []
        for _ in range(rng.randint(0, 5)):
            cached.append(prompt())
        pool = rng.choice((300, 600, 1200))
        out.append(
            {
                "name": f"round-{seed}",
                "pool": pool,
                "policy": "lpm" if seed % 4 else "fcfs",
                "ratio": rng.choice((0.7, 0.4, 0.098)),
                "max_prefill": rng.choice((16384, 120)),
                "chunk": rng.choice((8192, 64, 100)),
                "max_running": rng.choice((256, 4)),
                "cached": cached,
                "held": rng.randint(0, pool // 4),
                "running": [
                    [rng.randint(1, 40), out_, rng.randint(0, min(20, out_ - 1))]
                    for out_ in (rng.randint(1, 200) for _ in range(rng.randint(0, 3)))
                ],
                "waiting": [[prompt(), rng.randint(1, 300)] for _ in range(rng.randint(1, 8))],
            }
        )
    return out
