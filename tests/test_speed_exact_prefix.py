"""Speed-ups of the prefix-cache labs that must change nothing (issue 12): the quick paths of the
scheduler, the radix tree and the block-hash cache give, to the last bit, what the plain
computations give, and every result a lab remembers equals a fresh one."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.memo import clear_memos
from kvweb.parsing import make
from kvweb.labs import cache_schedule as workload_lab, prefix_hash
from kvweb.prefix.cache_schedule import POLICIES, PrefixCache, RadixServer, Served, _Waiting, simulate
from kvweb.prefix.cache_workload import Request, dfs_order, few_shot, multi_turn
from kvweb.prefix.prefix_hash import PrefixHashCache
from kvweb.prefix.radix_cache import Match, RadixCache, TokenPool, TreeNode, _prefix_len
from kvweb.serving.memory.prefix_caching import chain_hashes


# -- the plain computations the quick paths replace ----------------------------------------------
def _priority(
    policy: str, server: PrefixCache, rank: dict[int, int], alpha: float, now: int
) -> Callable[[_Waiting], float]:
    if policy == "fcfs":
        return lambda w: -w.order
    if policy == "lspf":
        return lambda w: server.peek(w.request.prompt)
    if policy == "dfs-rank":
        return lambda w: -rank[w.request.rid]
    if policy == "aging":
        return lambda w: server.peek(w.request.prompt) + alpha * (now - w.entered)
    raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")


def plain_simulate(
    requests: Sequence[Request], server: PrefixCache, policy: str, queue: int, alpha: float
) -> list[Served]:
    """`simulate` as it was: the pick is a max over (score, -entry order)."""
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
            now = arrivals[0][0]
            continue
        score = _priority(policy, server, rank, alpha, now)
        pick = max(range(len(waiting)), key=lambda i: (score(waiting[i]), -waiting[i].order))
        w = waiting.pop(pick)
        matched = server.serve(w.request)
        served.append(
            Served(w.request.rid, w.request.group, now, len(w.request.prompt), matched, now - w.entered, server.cached)
        )
        now += 1
        for turn in next_turns.get(w.request.rid, ()):
            heapq.heappush(arrivals, (now + turn.delay, turn.rid))
    return served


class PlainPool(TokenPool):
    """Pages turned into slots, and freed, the general way for every page size."""

    def alloc(self, n_tokens: int) -> np.ndarray | None:
        k = self.pages_for(n_tokens)
        if k > self._n_free:
            return None
        pages = self._free[self._n_free - k : self._n_free][::-1].astype(np.int64)
        self._n_free -= k
        self._in_use[pages] = True
        p = self.page_size
        return (pages[:, None] * p + np.arange(p)).ravel()[:n_tokens]

    def free(self, slots: np.ndarray) -> None:
        pages = slots[:: self.page_size] // self.page_size
        if not self._in_use[pages].all():
            raise ValueError("freeing a slot that is not in use")
        self._in_use[pages] = False
        self._free[self._n_free : self._n_free + len(pages)] = pages
        self._n_free += len(pages)


class PlainRadix(RadixCache):
    """Edges compared token by token, never as bytes."""

    def __init__(self, size: int, page_size: int = 1) -> None:
        super().__init__(size, page_size)
        self.pool = PlainPool(size, page_size)

    def _common(self, node: TreeNode, run: np.ndarray, i: int, data: bytes) -> int:
        k = _prefix_len(node.key, run[i:])
        return k - k % self.page_size

    def match_length(self, tokens: np.ndarray, remember: bool = False) -> int:
        return super().match_length(tokens)  # every walk taken afresh

    def match_prefix(self, tokens: np.ndarray, remember: bool = False) -> Match:
        return super().match_prefix(tokens)

    def extend(self, match: Match, tokens: np.ndarray, fresh: np.ndarray) -> int:
        return self.insert(tokens, np.concatenate([match.slots, fresh]))  # the match walked again


def plain_radix(capacity: int, page: int) -> RadixServer:
    server = RadixServer(capacity, page)
    server.cache = PlainRadix(capacity, page)
    return server


def plain_chain(tokens: np.ndarray, block: int) -> list:
    out: list = []
    chain_hashes(np.asarray(tokens, dtype=np.int64), block, out, len(tokens) // block)
    return out


class PlainHash(PrefixHashCache):
    """Every peek looks the whole chain up again; every chain is hashed afresh."""

    def peek(self, prompt: np.ndarray) -> int:
        return len(self.lookup(plain_chain(prompt, self.block_size))) * self.block_size

    def serve(self, request: Request) -> int:
        tokens = request.tokens
        hashes = plain_chain(tokens, self.block_size)
        hit = self.lookup(hashes[: len(request.prompt) // self.block_size])
        self.touch(hit)
        need = -(-len(tokens) // self.block_size) - len(hit)
        if need > len(self.free):
            self.release(hit)
            return len(hit) * self.block_size
        blocks = hit + self.take(need)
        self.register(blocks, hashes, len(hit), len(hashes))
        self.release(blocks)
        return len(hit) * self.block_size


# -- the quick paths against them ------------------------------------------------------------------
WORKLOADS = {
    "few-shot": few_shot(4, 6, 12, 40, 6, 5, 0),
    "few-shot-rr": few_shot(3, 5, 0, 9, 2, 3, 1, "round-robin"),
    "multi-turn": multi_turn(6, 4, 10, 6, 5, 2, 0),
}


@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("policy", ["fcfs", "lspf", "dfs-rank", "aging"])
@pytest.mark.parametrize("capacity", [70, 160, 5000])
@pytest.mark.parametrize("page", [1, 4])
def test_the_radix_schedule_is_the_plain_one(workload: str, policy: str, capacity: int, page: int) -> None:
    requests = WORKLOADS[workload]
    quick = simulate(requests, RadixServer(capacity, page), policy, 3, 2.0)
    assert quick == plain_simulate(requests, plain_radix(capacity, page), policy, 3, 2.0)
    assert any(s.matched for s in quick) or capacity == 70  # the cache is exercised


@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("policy", ["fcfs", "lspf"])
@pytest.mark.parametrize("capacity", [48, 160, 5000])
@pytest.mark.parametrize("block", [1, 2, 8])
def test_the_block_hash_schedule_is_the_plain_one(workload: str, policy: str, capacity: int, block: int) -> None:
    requests = WORKLOADS[workload]
    quick = simulate(requests, PrefixHashCache(capacity, block), policy, 4, 0.0)
    assert quick == plain_simulate(requests, PlainHash(capacity, block), policy, 4, 0.0)


def test_every_peek_is_the_whole_lookup() -> None:
    """Peeks between serves (evictions cut runs short, inserts grow them) against a fresh lookup."""
    requests = WORKLOADS["few-shot"]
    cache = PrefixHashCache(160, 2)
    rounds = []
    for r in requests:
        answers = [cache.peek(other.prompt) for other in requests]
        assert answers == [len(cache.lookup(plain_chain(o.prompt, 2))) * 2 for o in requests]
        rounds.append(answers)
        cache.serve(r)
    assert any(a < b for before, after in zip(rounds, rounds[1:]) for b, a in zip(before, after))  # cut short
    assert any(a > b for before, after in zip(rounds, rounds[1:]) for b, a in zip(before, after))  # grown


def test_a_remembered_chain_is_the_chain() -> None:
    tokens = WORKLOADS["multi-turn"][5].tokens
    for block in (1, 3, 16):
        assert PrefixHashCache(100, block).hashes(tokens) == plain_chain(tokens, block)
    assert PrefixHashCache(100, 3).hashes(tokens) != PrefixHashCache(100, 4).hashes(tokens)[: len(tokens) // 3]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.lists(st.lists(st.integers(0, 2), max_size=12), max_size=25), st.integers(6, 40))
def test_a_node_s_bytes_are_its_edge(page: int, inserts: list[list[int]], size: int) -> None:
    """`TreeNode.raw` follows every split and eviction, and a match and its extension give the
    plain ones (the extension: an insert of all the slots, the match walked again)."""
    cache, plain = RadixCache(size, page), PlainRadix(size, page)
    for tokens in inserts:
        done = []
        for c in (cache, plain):
            m = c.match_prefix(tokens[: len(tokens) * 2 // 3])  # a prompt, then its output
            c.lock(m.node)
            fresh = c.alloc(len(tokens) - m.length)
            done.append(None if fresh is None else c.extend(m, tokens, fresh))
            c.unlock(m.node)
        assert done[0] == done[1]
        assert cache.describe(tokens) == plain.describe(tokens)
        stack = [cache.root]
        while stack:
            node = stack.pop()
            assert node.raw == node.key.tobytes()
            stack.extend(node.children.values())


programs = st.lists(
    st.one_of(
        st.tuples(st.just("serve"), st.integers(0, 7)),
        st.tuples(st.just("peek"), st.integers(0, 7)),
        st.tuples(st.just("evict"), st.integers(1, 12)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(4, 40),
    st.lists(st.lists(st.integers(0, 2), max_size=10), min_size=8, max_size=8),
    programs,
)
def test_a_remembered_walk_is_the_walk(page: int, size: int, prompts: list[list[int]], program: list) -> None:
    """Peeks at the same arrays between serves and evictions: the remembered walks give the plain
    walks' matches and leave the same tree (splits, stamps)."""
    arrays = [np.array(p, dtype=np.int64) for p in prompts]
    cache, plain = RadixCache(size, page), PlainRadix(size, page)
    for op, arg in program:
        if op == "peek":
            assert cache.match_length(arrays[arg], remember=True) == plain.match_length(arrays[arg])
        matches = [c.match_prefix(arrays[arg], remember=True) for c in (cache, plain)] if op == "serve" else []
        if matches:
            assert (matches[0].length, matches[0].slots.tolist(), matches[0].node.id) == (
                matches[1].length,
                matches[1].slots.tolist(),
                matches[1].node.id,
            )
        for c, m in zip((cache, plain), matches or [None, None]):
            if op == "serve":
                c.lock(m.node)
                fresh = c.alloc(len(arrays[arg]) - m.length)
                if fresh is not None:
                    c.extend(m, arrays[arg], fresh)
                c.unlock(m.node)
            elif op == "evict":
                c.evict(arg)
        assert cache.describe() == plain.describe()
    if sum(op == "peek" for op, _ in program) > 10:
        assert cache._walks  # the walks were remembered


def test_a_remembered_walk_is_taken_again_after_each_change_on_it() -> None:
    """Each change that alters a walk: its end evicted, a node on it split, a child added at its
    end that takes it further, a first child of the root (when nothing matched); and a child that
    does not take it further, which leaves it as it was."""
    a, b, c, d, e = (np.array(t) for t in ([1, 2, 3, 4], [1, 2, 9], [1, 2, 3, 4, 5], [7], [1, 2, 3, 4, 6]))
    cache, plain = RadixCache(14), PlainRadix(14)

    def step(op: str, tokens: np.ndarray) -> None:
        if op == "peek":
            assert cache.match_length(tokens, remember=True) == plain.match_length(tokens)
        if op == "serve":
            ms = [x.match_prefix(tokens, remember=True) for x in (cache, plain)]
            assert [(m.length, m.slots.tolist(), m.node.id) for m in ms] == [
                (m.length, m.slots.tolist(), m.node.id) for m in ms[::-1]
            ]
            for x, m in zip((cache, plain), ms):
                x.lock(m.node)
                x.extend(m, tokens, x.alloc(len(tokens) - m.length))
                x.unlock(m.node)
        for x in (cache, plain):
            if op == "evict":
                x.evict(len(tokens))
        assert cache.describe() == plain.describe()

    for op, tokens in [
        ("peek", d),
        ("serve", a),
        ("peek", a),
        ("peek", c),
        ("peek", a),  # remembered
        ("serve", b),
        ("peek", a),
        ("peek", a),
        ("serve", a),  # [1, 2, 3, 4] split after 2
        ("serve", e),
        ("peek", c),
        ("peek", c),  # a child at the end of c's walk: not its way
        ("serve", c),
        ("peek", c),
        ("peek", c),  # a child at the end of c's walk
        ("evict", c),
        ("peek", c),
        ("peek", d),  # c's end evicted
        ("serve", d),
        ("peek", d),
    ]:  # the root's new child
        step(op, tokens)
    assert cache.clock == plain.clock


# -- what the labs remember ----------------------------------------------------------------------
SMALL = {"tasks": "3", "per_task": "5", "examples_len": "60", "system_len": "20", "capacity": "300"}


def fresh(lab: str, change: dict[str, str]) -> dict:
    clear_memos()
    return make(lab, {**SMALL, **change}).run()


def test_prefix_hash_remembers_runs_and_they_are_the_runs() -> None:
    changes = [
        {},
        {"alpha": "3"},
        {"block_size": "8"},
        {"capacity": "289"},
        {"capacity": "310"},
        {"queue": "2"},
        {"policy": "fcfs"},
        {"question_len": "9"},
        {"workload": "multi-turn", "sessions": "4"},
        {},
    ]
    expected = [fresh("prefix-hash", c) for c in changes]
    # Each change but alpha (neither order reads it) alters the result: a key that left its input
    # out would give the old result below.
    assert [e != expected[0] for e in expected] == [False, False, True, True, True, True, True, True, True, False]
    # 289 tokens: the same 18 blocks of 16, another radix tree of single tokens
    assert expected[3]["runs"]["hash"] == expected[0]["runs"]["hash"]
    assert expected[3]["runs"]["radix"] != expected[0]["runs"]["radix"]
    clear_memos()
    assert [make("prefix-hash", {**SMALL, **c}).run() for c in changes] == expected
    assert len(prefix_hash._RUNS) <= prefix_hash._RUNS.keep


def test_a_workload_is_drawn_once_and_is_the_drawing() -> None:
    clear_memos()
    lab = make("cache-schedule", SMALL)
    first = lab.requests()
    assert lab.requests() is first
    assert [(r.rid, r.prompt.tolist(), r.output.tolist()) for r in first] == [
        (r.rid, r.prompt.tolist(), r.output.tolist()) for r in lab.draw()
    ]
    other = make("cache-schedule", {**SMALL, "question_len": "7"}).requests()
    assert other is not first and len(other[0].prompt) != len(first[0].prompt)
    assert len(workload_lab._WORKLOADS) <= workload_lab._WORKLOADS.keep
