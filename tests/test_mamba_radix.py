"""SGLang on linear-attention hybrids (issue 27, part 3): the pools' sizes by hand, the match rule
(a hit ends at a node holding a recurrent state), what it gives beside vLLM's raised blocks, the
state pool's map by hand, conservation of token slots and states (and of both pools' maps) over
random workloads, and the lab's CLI JSON against the library run."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.prefix.mamba_radix_cache import NO_STATE, MambaRadixCache
from kvweb.prefix.sglang_pools import sglang_mamba_pool_sizes
from kvweb.serving.schedulers.mamba_scheduler import MambaRadixScheduler
from kvweb.serving.loop.continuous_batching import CACHED, FREE, SHARED
from kvweb.serving.schedulers.radix_scheduler import RadixConfig
from kvweb.serving.load.workload import Request
from lab_json import cli_result
from test_hybrid_kv import TINY, content_requests
from test_schedulers import requests_st, workload

H200 = GPUS["H200"]
TOKENS = np.arange(100, 140, dtype=np.int64)


def test_a_hit_ends_at_a_node_holding_a_state():
    # A prompt of 20 tokens was prefilled: its state is at its end. A request sharing its first 10
    # tokens misses (no state there: the walk splits the edge, the upper half has none); one that
    # goes on past all 20 hits 20. Once a request whose tokens end at 10 is inserted, 10 hit.
    t = MambaRadixCache(100, 4)
    t.insert(TOKENS[:20], t.pool.alloc(20))
    assert t.match_prefix(np.append(TOKENS[:10], 1)).length == 0
    assert t.match_prefix(np.append(TOKENS[:20], 1)).length == 20
    t.insert(np.append(TOKENS[:10], [1, 2]), t.pool.alloc(12))
    assert t.match_prefix(np.append(TOKENS[:10], 3)).length == 0 and t.peek_length(TOKENS[:15]) == 0
    t.insert(TOKENS[:10], t.pool.alloc(10))  # the same 10 tokens: copies freed, a state at their end
    assert t.match_prefix(np.append(TOKENS[:10], 3)).length == 10
    assert (t.pool.used, t.states.used) == (22, 3)


def test_state_eviction_keeps_an_inner_nodes_kv_and_drops_a_leaf_whole():
    t = MambaRadixCache(100, 2)
    t.insert(TOKENS[:10], t.pool.alloc(10))
    t.insert(TOKENS[:20], t.pool.alloc(20))  # the 10-token node's state, then one at 20: the pool is full
    inner = t.root.children[100]
    assert inner.state != NO_STATE and t.states.available == 0
    t.insert(TOKENS[30:35], t.pool.alloc(5))  # needs a state: the least recently used one, the inner node's
    assert inner.state == NO_STATE and len(inner.key) == 10 and t.pool.used == 25
    assert t.match_prefix(np.append(TOKENS[:10], 1)).length == 0 and t.match_prefix(TOKENS[:20]).length == 20
    t.evict_states(2)  # leaves go whole, and the stateless inner node left childless with them
    assert not t.root.children and (t.pool.used, t.states.used) == (0, 0)


@pytest.mark.parametrize("shared", [500, 543, 644, 1200])
def test_sglang_hits_no_shared_prefix_that_ends_inside_an_edge(shared):
    # vLLM hits Qwen3-Next's shared prompts in whole raised blocks of 544 tokens (0, 0, 544, 1,088 here,
    # tests/test_hybrid_kv.py); SGLang's rule gives nothing, at any length: the first request's state
    # is at the end of its own prompt, not where the second one parts from it
    cost = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")
    tokens, states = sglang_mamba_pool_sizes(cost)
    engine = MambaRadixScheduler(cost, MambaRadixCache(tokens, states), RadixConfig(8192), states)
    assert engine.run(content_requests(shared, 60, 4, 5.0)).hit_tokens == 0


def test_a_later_turn_hits_the_whole_earlier_conversation():
    # the second turn's prompt is the first's 300 + 20 tokens and 40 more: the finished first request's
    # KV (prompt + output - 1 = 319 tokens) ends at a state
    cost = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")
    tokens, states = sglang_mamba_pool_sizes(cost)
    engine = MambaRadixScheduler(cost, MambaRadixCache(tokens, states), RadixConfig(8192), states)
    rng = np.random.default_rng(0)
    first = rng.integers(0, 1000, 320)
    second = np.concatenate([first, rng.integers(0, 1000, 40 + 5)])
    run = engine.run([Request(0, 0.0, 300, 20, tokens=first), Request(1, 5.0, 360, 5, tokens=second)])
    assert run.hit_tokens == 319


def test_the_state_pools_map_holds_a_state_per_running_request_and_the_cached_ones():
    # Qwen3-Next (12 full layers, 36 linear) on 2,000 token slots and 8 states. Requests 0 and 1
    # (prompts of 100 and 300 tokens, 20 and 200 to write) start together: each takes a state of its
    # own, and its prompt's node a copy, which it locks (SHARED). When request 0 finishes, its own
    # state goes back, its whole sequence's node gets one (CACHED), and its prompt's node state is
    # no longer read (CACHED); request 1 still holds its own and reads its prompt's.
    cost = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")
    engine = MambaRadixScheduler(cost, MambaRadixCache(2000, 8), RadixConfig(8192), 8)
    engine.start([Request(0, 0.0, 100, 20), Request(1, 0.0, 300, 200)])
    seen = []
    for iterations in (1, 35):
        engine.advance(iterations=iterations)
        tokens, states = engine.group_maps(engine.step, 1000)
        assert (tokens.kind, tokens.layers, tokens.unit, tokens.cell_tokens, len(tokens.owner)) == (
            "full",
            12,
            "token slot",
            2,
            1000,
        )  # 2,000 slots in at most 1,000 cells
        assert (states.kind, states.layers, states.window, states.shared, states.unit, states.cell_tokens) == (
            "linear",
            36,
            0,
            False,
            "state slot",
            1,
        )
        assert (tokens.owner, tokens.written) == engine.memory_map(engine.step, 1000)[1:]
        assert states.written == [0 if o == FREE else 100 for o in states.owner]
        seen.append((sorted(engine.running), dict(Counter(states.owner))))
    assert seen == [([0, 1], {0: 1, 1: 1, SHARED: 2, FREE: 4}), ([1], {1: 1, SHARED: 1, CACHED: 2, FREE: 4})]


def check_mamba(engine: MambaRadixScheduler, step: int) -> None:
    """Every token slot is held once (a tree node or one running request) and every state slot once (a
    tree node or one running request); the state counts agree and a state lock implies a full lock."""
    tree = engine.tree
    held: list[int] = []
    states = list(engine.held.values())
    nodes, stack = [], list(tree.root.children.values())
    while stack:
        node = stack.pop()
        nodes.append(node)
        held += node.value.tolist()
        stack += node.children.values()
        if node.state != NO_STATE:
            states.append(node.state)
        assert node.state_lock <= node.lock_ref and (node.state != NO_STATE or not node.state_lock)
    assert tree.evictable_size == sum(len(n.key) for n in nodes if not n.lock_ref)
    free = [n for n in nodes if n.state != NO_STATE and not n.state_lock]
    assert tree._state_free == set(free) and tree.state_evictable == len(free)
    assert tree.state_protected == sum(1 for n in nodes if n.state_lock)
    for seq in [*engine.running.values(), *([engine.chunked] if engine.chunked else [])]:
        for own in seq.own:
            held += own.tolist()
        assert seq.id in engine.held
    assert len(held) == len(set(held)) == tree.pool.used
    assert len(states) == len(set(states)) == tree.states.used
    assert len(engine.held) <= engine.max_seqs
    assert engine.pending == sum(s.kv(engine.dstep) - s.mat for s in engine.running.values()) and engine.free_slots >= 0


def tiny_engine(tokens: int, states: int, **config) -> MambaRadixScheduler:
    cost = CostModel(GPUS["A100-40GB"], TINY["linear"])
    return MambaRadixScheduler(cost, MambaRadixCache(tokens, states), RadixConfig(max_len=128, **config), states)


def check_mamba_maps(engine: MambaRadixScheduler, step: int) -> None:
    """`check_mamba`, and both pools' maps, one slot a cell: the token pool's is `memory_map`; every
    state in exactly one state of the map: a running request's own its id, a node's read by a
    running request SHARED, any other node's CACHED, the rest FREE."""
    tree = engine.tree
    tokens, states = engine.group_maps(step, max(tree.pool.size, tree.states.size))
    check_mamba(engine, step)
    assert (tokens.cell_tokens, tokens.owner, tokens.written) == engine.memory_map(step, tree.pool.size)
    expected = np.full(tree.states.size, FREE)
    stack = list(tree.root.children.values())
    while stack:
        node = stack.pop()
        if node.state != NO_STATE:
            expected[node.state] = SHARED if node.state_lock else CACHED
        stack += node.children.values()
    for seq_id, slot in engine.held.items():
        expected[slot] = seq_id
    assert states.cell_tokens == 1 and states.owner == expected.tolist()
    assert Counter(states.written)[100] == tree.states.used


@settings(max_examples=60, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    tokens=st.integers(40, 300),
    states=st.integers(3, 12),
    max_seqs=st.integers(1, 6),
    budget=st.integers(0, 120),
    lpm=st.booleans(),
    mixed=st.booleans(),
    caching=st.booleans(),
)
def test_every_request_finishes_and_no_slot_or_state_leaks(
    rows, shared, tokens, states, max_seqs, budget, lpm, mixed, caching
):
    requests = workload(rows, shared)
    config = dict(
        max_seqs=max_seqs,
        chunk_size=budget + 1,
        max_prefill_tokens=budget + 8,
        policy="lpm" if lpm else "fcfs",
        mixed_chunk=mixed,
        radix_cache=caching,
    )
    engine = tiny_engine(tokens, states, **config)
    run = engine.run(requests, observer=check_mamba_maps)
    assert engine.tree.protected_size == engine.tree.state_protected == engine.pending == 0 and not engine.held
    assert (
        engine.tree.pool.used == engine.tree.evictable_size and engine.tree.states.used == engine.tree.state_evictable
    )
    assert sorted([s.id for s in run.sequences] + [r.id for r, _ in run.rejected]) == [r.id for r in requests]
    for seq in run.sequences:
        assert seq.gen0 == seq.req.output and seq.computed == seq.req.prompt + seq.req.output - 1
    assert run.end_occupied == 0 and run.end_cached == engine.cached <= engine.capacity
    other = tiny_engine(tokens, states, **config).run(requests)  # quiet iterations change nothing
    assert [(s.id, s.first_token_t, s.finish_t) for s in other.sequences] == [
        (s.id, s.first_token_t, s.finish_t) for s in run.sequences
    ]
    assert (other.steps, other.preemptions, other.hit_tokens) == (run.steps, run.preemptions, run.hit_tokens)


def test_the_labs_cli_json_is_the_library_run_on_a_linear_model():
    result = cli_result(
        "schedulers", {"scenario": "B", "model": "qwen3-next-80b-a3b", "weight_precision": "int4", "requests": 30}
    )
    sglang = result["modes"][1]["trace"]
    pools = result["sglang_pools"]
    assert [(g["kind"], g["layers"], g["unit"], g["cell_tokens"]) for g in sglang["groups"]] == [
        ("full", 12, "token slot", -(-pools["full_tokens"] // 1024)),
        ("linear", 36, "state slot", 1),
    ]
    for frame in sglang["frames"]:
        tokens, states = frame["groups"]
        assert (tokens["owner"], tokens["written"]) == (frame["owner"], frame["written"])  # the token pool's map
        assert len(states["owner"]) == pools["states"] == 191  # one state a cell
        # a state of its own per running request, and at most one it reads (where its cached prefix ends)
        assert sum(o == SHARED for o in states["owner"]) <= sum(o >= 0 for o in states["owner"])
