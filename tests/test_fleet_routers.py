"""The fleet's routers on hand-made replicas (every choice worked out by hand), their invariants,
the approximate tree against a brute-force model, and regret."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.fleet.approximate_tree import ApproximateTree, Node
from kvweb.fleet.regret import decide
from kvweb.serving.schedulers.v1_scheduler import block_pool_match
from kvweb.fleet.routers import ROUTERS, CacheAware, CostRouter, ExactPrefix, LeastOutstanding, RoundRobin, prompt_of
from kvweb.prefix.radix_cache import RadixCache
from kvweb.serving.memory.prefix_caching import BlockPool, chain_hashes
from kvweb.serving.load.workload import Image, Request


def lcp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    k = 0
    for x, y in zip(a, b):
        if x != y:
            break
        k += 1
    return k


@dataclass
class View:
    """A replica as a router sees it; its cache holds the prefixes of `cached` (token-granular)."""

    load: int = 0
    queue: int = 0
    prefill: int = 0
    decode: int = 0
    cached: list[tuple[int, ...]] = field(default_factory=list)

    def outstanding(self) -> int:
        return self.load

    def waiting(self) -> int:
        return self.queue

    def prefix_match(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        run = tuple(int(t) for t in tokens)
        return max((lcp(run, c) for c in self.cached), default=0)

    def prefill_tokens(self) -> int:
        return self.prefill

    def decode_blocks(self) -> int:
        return self.decode

    def adapters(self) -> None:
        return None


def req(tokens: list[int], t: float = 0.0, rid: int = 0) -> Request:
    return Request(rid, t, len(tokens), 1, np.array(tokens + [0], dtype=np.int64))


def seq(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


# -- round robin, least outstanding -------------------------------------------------------
def test_round_robin_cycles_whatever_the_replicas_hold() -> None:
    router, views = RoundRobin(), [View(load=9), View(), View(cached=[tuple(seq(1, 8))])]
    assert [router.route(req(seq(1, 8)), views) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_outstanding_takes_the_fewest_ties_to_the_lowest_index() -> None:
    router = LeastOutstanding()
    assert router.route(req([1]), [View(load=3), View(load=1), View(load=1)]) == 1
    assert router.route(req([1]), [View(load=2), View(load=2), View(load=2)]) == 0
    assert router.route(req([1]), [View(load=5, queue=0), View(load=4, queue=4)]) == 1  # running counts too


# -- SGLang's cache-aware router ----------------------------------------------------------
def test_cache_aware_longest_match_above_the_threshold_else_the_least_loaded() -> None:
    # a weak match goes to the least loaded worker (SGLang PR #14650; the smallest tree before it)
    router, views = CacheAware(3), [View(), View(), View()]
    a = seq(1, 10)
    assert router.route(req(a), views) == 0 and router.reason == "least loaded"  # all loads equal: the first
    assert router.route(req(seq(20, 10)), [View(load=1), View(), View()]) == 1  # no match: the least loaded
    assert router.tree.size == [10, 10, 0]
    c = a[:6] + seq(40, 4)  # 6 of 10 tokens match replica 0's: 0.6 > 0.3
    assert router.route(req(c), views) == 0 and router.reason == "match"
    assert router.tree.size == [14, 10, 0]  # the new 4-token branch
    d = a[:3] + seq(50, 7)  # 3 of 10 = 0.3, not above the threshold: the least loaded, replica 2
    assert router.route(req(d), [View(load=2), View(load=1), View()]) == 2 and router.reason == "least loaded"
    assert router.tree.size == [14, 10, 10]


def test_cache_aware_balances_by_shortest_queue_past_both_thresholds() -> None:
    a = seq(1, 10)
    for loads, balance in [
        ([70, 5, 10], True),  # 65 > 64 and 70 > 1.5 x 5
        ([70, 6, 10], False),  # 64 is not above 64
        ([200, 100, 150], True),  # 100 > 64 and 200 > 150
        ([300, 200, 250], False),
    ]:  # 100 > 64 but 300 is not above 1.5 x 200
        router = CacheAware(3)
        router.route(req(a), [View(), View(), View()])  # the prompt goes to replica 0's tree
        views = [View(load=n) for n in loads]
        i = router.route(req(a, t=1), views)
        assert (router.reason, i) == (("balance", loads.index(min(loads))) if balance else ("match", 0))
    assert router.route(req(a, t=2), [View(), View(), View()]) == 0
    router = CacheAware(3)
    router.route(req(a), [View(load=70), View(load=5), View(load=10)])  # balance: the prompt is now replica 1's
    assert router.route(req(a, t=1), [View(), View(), View()]) == 1 and router.reason == "match"


def test_cache_aware_trims_each_tree_every_interval() -> None:
    router, views = CacheAware(2, eviction_interval=60, max_tree_size=10), [View(), View()]
    a, b = seq(1, 10), seq(1, 5) + seq(30, 5)
    router.route(req(a, t=0), views)  # starts the eviction clock: first trim at 60
    assert router.route(req(b, t=10), views) == 0  # 5 of 10 match: tree 0 holds 1..5, 6..10, 30..34
    assert router.tree.size == [15, 0]
    router.route(req(b, t=59), views)
    assert router.tree.size == [15, 0]  # not yet
    router.route(req(b, t=70), views)  # trimmed first: 6..10 (used at 0) goes, 30..34 (used at 59) stays
    assert router.tree.size == [10, 0] and router.next_eviction == 120
    assert router.tree.prefix_match(a, 71) == (5, 0)
    router.route(req(seq(90, 20), t=500), views)  # 8 intervals late: one trim, the clock moves on
    assert router.next_eviction == 540


def test_approximate_tree_by_hand() -> None:
    tree = ApproximateTree(2)
    tree.insert([1, 2, 3, 4], 0, now=1)
    tree.insert([1, 2, 5], 1, now=2)  # splits 1 2 | 3 4
    assert tree.size == [4, 3]
    assert tree.prefix_match([1, 2, 3, 9], now=3) == (3, 0)  # partly into 3 4: 3 tokens
    assert tree.prefix_match([1, 2, 7], now=4) == (2, 0)  # both hold 1 2: replica 0, used at 3, after 1's 2
    assert tree.prefix_match([1, 2, 5, 6], now=5) == (3, 1)
    assert tree.prefix_match([8], now=6) == (0, None)
    tree.evict(2)  # 0 loses its leaf 3 4, 1 its leaf 5: both keep 1 2
    assert tree.size == [2, 2] and tree.prefix_match([1, 2, 3], now=7) == (2, 1)  # 1 used it last (at 5)
    tree.evict(1)  # then 1 2 goes too, for both: the tree is empty
    assert tree.size == [0, 0] and not tree.root.children


# -- llm-d's exact prefix scorer ----------------------------------------------------------
def test_exact_prefix_weighs_real_cached_prefix_against_the_waiting_queue() -> None:
    p = seq(1, 64)
    cached = [tuple(p[:32]), tuple(p[:48]), ()]
    router = ExactPrefix()
    # prefix scores 32/48, 1, 0; queues all equal (1 each): 2.33, 3, 1
    assert router.route(req(p), [View(cached=[c]) for c in cached]) == 1 and router.reason == "prefix"
    # waiting 0, 4, 0 -> queue scores 1, 0, 1: 2.33, 2, 1
    views = [View(queue=q, cached=[c]) for q, c in zip([0, 4, 0], cached)]
    assert router.route(req(p), views) == 0 and router.reason == "queue"
    assert decide(ExactPrefix(), req(p), views).regret == 16
    # waiting 2, 4, 0 -> queue scores 0.5, 0, 1: 1.83, 2, 1
    views = [View(queue=q, cached=[c]) for q, c in zip([2, 4, 0], cached)]
    assert router.route(req(p), views) == 1


@dataclass
class RadixReplica(View):
    """An SGLang replica: a real radix cache."""

    tree: RadixCache = field(default_factory=lambda: RadixCache(64))

    def prefix_match(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        return self.tree.peek_length(tokens)


@dataclass
class BlockReplica(View):
    """A vLLM replica: a real block cache (blocks of 4)."""

    pool: BlockPool = field(default_factory=lambda: BlockPool(16, 4))

    def prefix_match(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        return block_pool_match(self.pool, tokens)


def test_exact_prefix_reads_both_real_caches() -> None:
    p = np.array(seq(1, 12), dtype=np.int64)
    sglang, vllm = RadixReplica(), BlockReplica()
    slots = sglang.tree.alloc(7)
    sglang.tree.insert(p[:7], slots)  # 7 tokens, token-granular
    hashes: list = []
    chain_hashes(p, 4, hashes, 2)
    blocks = vllm.pool.take(2)
    vllm.pool.register(blocks, hashes, 0, 2)  # 2 whole blocks: 8 tokens
    vllm.pool.release(blocks)  # freed, still cached
    assert [sglang.prefix_match(p), vllm.prefix_match(p)] == [7, 8]
    assert vllm.prefix_match(np.concatenate([p[:6], [99]])) == 4  # the second block differs
    clock = sglang.tree.clock
    assert ExactPrefix().route(req(p.tolist()), [sglang, vllm]) == 1
    assert sglang.tree.clock == clock  # asked, not used


# -- Dynamo's cost router -----------------------------------------------------------------
def cost_views() -> list[View]:
    p = tuple(seq(1, 64))  # 4 blocks of 16
    return [
        View(prefill=0, decode=10, cached=[p]),  # prefill 0, decode 10 + 4 - 4
        View(prefill=32, decode=2),  # prefill (32 + 64) / 16 = 6, decode 2 + 4
        View(prefill=0, decode=5, cached=[p[:20]]),
    ]  # 1 whole block: prefill 48 / 16 = 3, decode 5 + 3


@pytest.mark.parametrize(
    "weight, costs, choice",
    [
        (1.0, [10, 12, 11], 0),
        (0.5, [10, 9, 9.5], 1),
        (0.0, [10, 6, 8], 1),
        (3.0, [10, 24, 17], 0),
    ],
)
def test_cost_router_by_hand(weight: float, costs: list[float], choice: int) -> None:
    router = CostRouter(block_size=16, overlap_score_weight=weight)
    assert router.route(req(seq(1, 64)), cost_views()) == choice
    assert router.costs == costs


def test_cost_router_temperature_samples_by_softmax_of_scaled_costs() -> None:
    views = cost_views()[:2]  # costs 10 and 12 at weight 1: spread 2
    router = CostRouter(block_size=16, temperature=1.0, seed=7)
    picks = [router.route(req(seq(1, 64)), views) for _ in range(4000)]
    share = picks.count(0) / len(picks)  # exp(-5) / (exp(-5) + exp(-6)) = 1 / (1 + e^-1) = 0.731
    assert abs(share - 1 / (1 + np.exp(-1))) < 0.03
    cold = CostRouter(block_size=16, temperature=1e-6, seed=7)
    assert {cold.route(req(seq(1, 64)), views) for _ in range(50)} == {0}


# -- regret ------------------------------------------------------------------------------
def test_regret_is_the_best_replicas_cached_prefix_beyond_the_chosen_ones() -> None:
    p = seq(1, 64)
    views = [View(cached=[tuple(p[:32])]), View(cached=[tuple(p[:48])]), View()]
    router = RoundRobin()
    d = [decide(router, req(p, rid=i), views) for i in range(3)]
    assert [(x.replica, x.matched, x.best, x.regret) for x in d] == [(0, 32, 48, 16), (1, 48, 48, 0), (2, 0, 48, 48)]
    assert decide(LeastOutstanding(), req([], rid=3), views).regret == 0  # no content: nothing to miss
    assert len(prompt_of(req(p))) == 64  # the prompt, not the output after it


# -- invariants ---------------------------------------------------------------------------
tokens = st.lists(st.integers(0, 3), min_size=0, max_size=10)
views_st = st.lists(
    st.builds(
        View,
        load=st.integers(0, 200),
        queue=st.integers(0, 10),
        prefill=st.integers(0, 500),
        decode=st.integers(0, 50),
        cached=st.lists(tokens.map(tuple), max_size=3),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(views=views_st, prompts=st.lists(tokens, min_size=1, max_size=8))
def test_every_router_returns_a_replica_and_exact_prefix_regrets_only_for_a_shorter_queue(
    views: list[View], prompts: list[list[int]]
) -> None:
    routers = [make(len(views)) for make in ROUTERS.values()]
    for t, p in enumerate(prompts):
        for router in routers:
            d = decide(router, req(p, t=60.0 * t, rid=t), views)
            assert 0 <= d.replica < len(views) and 0 <= d.matched <= d.best <= len(p)
            if isinstance(router, ExactPrefix):
                best = [j for j, v in enumerate(views) if v.prefix_match(np.array(p)) == d.best]
                assert (d.regret > 0) == (d.reason == "queue")
                if d.regret:  # overridden by load balancing: a strictly shorter queue than every best
                    assert all(views[d.replica].queue < views[j].queue for j in best)


def tenants_consistent(tree: ApproximateTree) -> None:
    """A child's tenants are its parent's; each tenant's size is its nodes' tokens."""
    sizes = [0] * len(tree.size)
    stack: list[Node] = list(tree.root.children.values())
    while stack:
        node = stack.pop()
        assert node.tenants and len(node.key)
        if node.parent is not tree.root:
            assert set(node.tenants) <= set(node.parent.tenants)  # type: ignore[union-attr]
        for t in node.tenants:
            sizes[t] += len(node.key)
        stack.extend(node.children.values())
    assert sizes == tree.size


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["insert", "match", "evict"]), tokens, st.integers(0, 2), st.integers(0, 12)),
        max_size=30,
    )
)
def test_approximate_tree_never_claims_more_than_was_sent_and_trims_to_its_size(ops: list) -> None:
    tree = ApproximateTree(3)
    sent: list[set[tuple[int, ...]]] = [set(), set(), set()]  # what was inserted per tenant
    evicted = False
    for now, (op, run, tenant, size) in enumerate(ops):
        if op == "insert":
            tree.insert(run, tenant, now)
            sent[tenant].add(tuple(run))
        elif op == "match":
            length, who = tree.prefix_match(run, now)
            claim = max((lcp(tuple(run), s) for s in sent[who]), default=0) if who is not None else 0
            assert length <= claim  # the named tenant was sent every matched token
            if not evicted:
                assert length == max((lcp(tuple(run), s) for ss in sent for s in ss), default=0)
        else:
            tree.evict(size)
            evicted = True
            assert all(n <= size for n in tree.size)
        tenants_consistent(tree)
