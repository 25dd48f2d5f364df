"""SGLang on sliding-window models (issue 27, part 3): the two pools' sizes by hand, the match rule
on tombstones, window eviction, the window KV a running request frees, each pool's map by hand,
gpt-oss's capacity beside its all-full twin, conservation of every slot of both pools (and of their
maps) over random workloads, and the lab's CLI JSON against the library run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collections import Counter

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.prefix.swa_radix_cache import NO_SWA, SWARadixCache
from kvweb.serving.loop.continuous_batching import CACHED, FREE, SHARED
from kvweb.serving.schedulers.radix_scheduler import RadixConfig
from kvweb.serving.schedulers.swa_scheduler import SWARadixScheduler, swa_pool_sizes
from kvweb.serving.load.workload import Request, poisson_workload
from lab_json import cli_result
from test_hybrid_kv import TINY, all_full, content_requests
from test_schedulers import requests_st, workload

H200 = GPUS["H200"]
TOKENS = np.arange(100, 140, dtype=np.int64)


def test_pool_sizes_by_hand():
    # gpt-oss-120b: 18 full and 18 window layers, each 2 x 8 heads x 64 x 2 B = 2,048 B a token:
    # full x (18 x 2,048 + 0.8 x 18 x 2,048) = the free bytes, the window pool 0.8 of that
    cost = CostModel(H200, MODELS["gpt-oss-120b"], weight_precision="int4", mem_util=0.55)
    free = cost.kv_bytes_free_per_gpu
    full, swa = swa_pool_sizes(cost)
    assert free == 17_418_180_480 and (full, swa) == (262_499, 209_999) == (int(free / 66_355.2), int(full * 0.8))
    # all full, 36 layers of 2,048 B: 1.8 / 1.62 = 1.11 x as many full slots, and the window pool beside them
    assert replace(cost, model=all_full(cost.model)).kv_capacity_tokens == int(free // 73_728) == 236_249
    # Gemma 3 27B: 10 full + 52 window layers of 2 x 16 x 128 x 2 = 8,192 B; a smaller ratio, a larger full pool
    gemma = CostModel(H200, MODELS["gemma-3-27b"])
    assert swa_pool_sizes(gemma, 0.5)[0] == int(gemma.kv_bytes_free_per_gpu / ((10 + 0.5 * 52) * 8192))


def tree(full: int = 100, swa: int = 100, window: int = 8) -> SWARadixCache:
    return SWARadixCache(full, swa, window)


def test_a_cached_prefix_whose_window_kv_was_freed_misses():
    # A request's 20 tokens enter the tree after it freed the window KV of its first 10: a tombstone
    # node of 10 tokens above a live leaf of 10. A match may end only a whole window (8) of live
    # tokens past the tombstone: at 18 or 20 tokens it does, at 15 (5 live tokens) it misses.
    t = tree()
    slots = t.pool.alloc(20)
    t.pool.free_swa(slots[:10])
    t.insert(TOKENS[:20], slots)
    top = t.root.children[100]
    assert top.swa_tombstone and len(top.key) == 10 and not top.children[110].swa_tombstone
    assert t.match_prefix(TOKENS[:20]).length == 20
    assert t.match_prefix(TOKENS[:18]).length == 18
    assert t.match_prefix(TOKENS[:15]).length == 0
    assert t.peek_length(TOKENS[:15]) == 0 and t.peek_length(TOKENS[:19]) == 19
    # with no tombstone above it, a path from the root matches at any length
    t.insert(TOKENS[20:25], t.pool.alloc(5))
    assert t.match_prefix(TOKENS[20:23]).length == 3
    assert (t.pool.full.used, t.pool.swa.used) == (25, 15)


def test_window_eviction_tombstones_the_least_recently_used_inner_node_first():
    # A path of 20 + 10 tokens, and a leaf of 5 used later. 5 short of room in the window pool, the
    # tree frees the window KV of the 20-token inner node (least recently used, nearer the root at equal
    # stamps): its full KV stays. The longer prompt still hits (10 live tokens past the tombstone >= 8),
    # one ending inside the 20 tokens no longer does.
    t = tree(full=100, swa=60)
    t.insert(TOKENS[:30], t.pool.alloc(30))
    t.insert(TOKENS[:20], t.pool.alloc(20))  # split at 20: same tokens, the copies freed
    t.insert(TOKENS[30:35], t.pool.alloc(5))
    assert (t.pool.full.available, t.pool.swa.available) == (65, 25)
    t.evict(5)  # room for 30 tokens in both pools
    inner = t.root.children[100]
    assert inner.swa_tombstone and len(inner.key) == 20 and t.pool.swa.available == 45
    assert (t.pool.full.available, t.evictable_size, t.swa_evictable_size) == (65, 35, 15)
    assert t.match_prefix(np.append(TOKENS[:30], 1)).length == 30
    assert t.match_prefix(np.append(TOKENS[:19], 1)).length == 0
    # short of full slots: leaves go whole, and the tombstones they leave childless with them
    t.evict(70)
    assert not t.root.children and (t.pool.full.available, t.pool.swa.available) == (100, 60)


def test_a_lock_holds_only_the_last_window_of_window_kv():
    # A running request matched 30 tokens (20 + 10 in two nodes): its lock holds the full KV of both,
    # the window KV of the last node only (10 >= 8 tokens); window eviction may free the upper one.
    t = tree(full=100, swa=60)
    t.insert(TOKENS[:20], t.pool.alloc(20))
    t.insert(TOKENS[:30], t.pool.alloc(30))
    match = t.match_prefix(TOKENS[:30])
    t.lock(match.node)
    assert (t.evictable_size, t.protected_size, t.swa_evictable_size, t.swa_protected_size) == (0, 30, 20, 10)
    t.evict(40)  # room for 70 tokens: 40 short in the window pool, and only the upper node's 20 can go
    assert t.root.children[100].swa_tombstone and t.pool.swa.available == 50 and t.pool.full.available == 70
    t.unlock(match.node)
    assert (t.evictable_size, t.protected_size, t.swa_evictable_size, t.swa_protected_size) == (30, 0, 10, 0)


def test_a_tombstone_takes_back_window_kv_a_later_request_brings():
    t = tree()
    old = t.pool.alloc(12)
    t.pool.free_swa(old[:12])
    t.insert(np.concatenate([TOKENS[:12], [1] * 8]), np.concatenate([old, t.pool.alloc(8)]))
    assert t.root.children[100].swa_tombstone
    new = t.pool.alloc(12)  # the same 12 tokens computed again, window KV and all
    t.insert(TOKENS[:12], new)
    node = t.root.children[100]
    assert not node.swa_tombstone and list(node.value) == list(new)
    assert (t.pool.full.used, t.pool.swa.used) == (20, 20)


def swa_engine(full: int, swa: int, **config) -> SWARadixScheduler:
    cost = CostModel(GPUS["A100-40GB"], TINY["window"])
    return SWARadixScheduler(
        cost, SWARadixCache(full, swa, 8), RadixConfig(max_len=config.pop("max_len", 128), **config)
    )


def test_a_running_request_frees_the_window_kv_behind_its_window():
    # 20 prompt tokens, 30 decoded: every 8 decode steps the KV more than 8 tokens behind goes
    engine = swa_engine(200, 200)
    frees = []

    def watch(e: SWARadixScheduler, step: int) -> None:
        frees.append((e.dstep, e.pool.swa.used + e.pending))

    tokens = np.arange(50, dtype=np.int64)
    run = engine.run([Request(0, 0.0, 20, 30, tokens=tokens)], observer=watch)
    # the prompt entered the tree when its prefill ended: the tree frees its window KV (only under
    # pressure, none here). The iterations starting at decode counts 8, 16 and 24 (KV 28, 36, 44) first
    # free the window KV of the request's own tokens before the last 8: none, then 8, then 8
    assert [(d, used) for d, used in frees if d in (8, 9, 16, 17, 24, 25)] == [
        (8, 28),
        (9, 29),
        (16, 36),
        (17, 29),
        (24, 36),
        (25, 29),
    ]
    assert run.sequences[0].finish_t > 0
    # it finished with 49 tokens of KV, the window KV of its tokens 20-35 freed: a tombstone between
    # the prompt and a live leaf of 13
    path, node = [], engine.tree.root
    while node.children:
        node = next(iter(node.children.values()))
        path.append((len(node.key), node.swa_tombstone))
    assert path == [(20, False), (16, True), (13, False)]
    assert (engine.pool.full.used, engine.pool.swa.used) == (49, 33)


def test_each_pools_map_holds_all_a_requests_tokens_and_its_last_windows():
    # gpt-oss-20b (12 full + 12 window layers, a window of 128) on pools of 1,000 full and 800 window
    # slots, one slot a cell. A 200-token prompt enters the tree when its prefill ends (SHARED in both
    # pools: the request locks it); every 128 decode steps, at the start of an iteration, the request
    # frees the window KV of its own tokens more than 128 behind its last. So after d decodes it holds
    # all d of its own tokens in the full pool, and in the window pool d until the first slide that
    # frees any (at 256: tokens 200-327, 128 of them), then between 129 and 256.
    cost = CostModel(H200, MODELS["gpt-oss-20b"])
    engine = SWARadixScheduler(cost, SWARadixCache(1000, 800, 128), RadixConfig(8192))
    engine.start([Request(0, 0.0, 200, 400)])
    engine.advance(iterations=1)  # the prefill
    seen = []
    for decodes in (100, 156, 1, 127, 1):
        engine.advance(iterations=decodes)
        maps = engine.group_maps(engine.step, 1000)
        assert [(m.kind, m.layers, m.window, m.shared, m.unit, m.cell_tokens, len(m.owner)) for m in maps] == [
            ("full", 12, 0, False, "token slot", 1, 1000),
            ("sliding", 12, 128, False, "token slot", 1, 800),
        ]
        seen.append([(Counter(m.owner)[0], Counter(m.owner)[SHARED], Counter(m.owner)[FREE]) for m in maps])
        assert all(m.written == [0 if o == FREE else 100 for o in m.owner] for m in maps)
    assert engine.dstep == 385
    assert seen == [
        [(100, 200, 700), (100, 200, 500)],  # 100 decodes: no slide has freed anything
        [(256, 200, 544), (256, 200, 344)],  # 256: the slide at 256 comes with the next iteration
        [(257, 200, 543), (129, 200, 471)],  # 257: tokens 200-327 freed, 457 - 328 = 129 kept
        [(384, 200, 416), (256, 200, 344)],  # 384: 129 + 127
        [(385, 200, 415), (129, 200, 471)],
    ]  # 385: tokens 328-455 freed too
    # the one map over both pools is the two maps side by side
    _, both, _ = engine.memory_map(engine.step, 1800)
    assert both == maps[0].owner + maps[1].owner


def check_swa(engine: SWARadixScheduler, step: int) -> None:
    """Every full slot is held once (a tree node or one running request) and every window slot
    belongs to exactly one held full slot; tombstones have no window KV, live nodes all of it, a
    request's own slots have it freed from the front up to what it slid; the counts agree."""
    tree, pool = engine.tree, engine.pool
    held: list[int] = []
    nodes, stack = [], list(tree.root.children.values())
    while stack:
        node = stack.pop()
        nodes.append(node)
        held += node.value.tolist()
        stack += node.children.values()
        swa = pool.swa_of[node.value]
        assert (swa == NO_SWA).all() if node.swa_tombstone else (swa != NO_SWA).all()
        assert node.swa_lock_ref <= node.lock_ref and (node.children or node.lock_ref or not node.swa_tombstone)
    assert tree.evictable_size == sum(len(n.key) for n in nodes if not n.lock_ref)
    assert tree.protected_size == sum(len(n.key) for n in nodes if n.lock_ref)
    unheld = [n for n in nodes if not n.swa_tombstone and not n.swa_lock_ref]
    assert tree._swa_free == set(unheld) and tree.swa_evictable_size == sum(len(n.key) for n in unheld)
    assert tree.swa_protected_size == sum(len(n.key) for n in nodes if n.swa_lock_ref)
    for seq in [*engine.running.values(), *([engine.chunked] if engine.chunked else [])]:
        own = np.concatenate(seq.own) if seq.own else np.zeros(0, dtype=np.int64)
        held += own.tolist()
        gone = max(0, engine.slid.get(seq.id, 0) - len(seq.prefix))
        assert (pool.swa_of[own[:gone]] == NO_SWA).all() and (pool.swa_of[own[gone:]] != NO_SWA).all()
        assert len(seq.prefix) + len(own) == seq.mat
    assert len(held) == len(set(held)) == pool.full.used
    swa = pool.swa_of[held]
    swa = swa[swa != NO_SWA]
    assert len(swa) == len(set(swa.tolist())) == pool.swa.used
    assert np.count_nonzero(pool.swa_of != NO_SWA) == pool.swa.used  # a freed full slot keeps no window slot
    assert engine.pending == sum(s.kv(engine.dstep) - s.mat for s in engine.running.values()) and engine.free_slots >= 0


def check_swa_maps(engine: SWARadixScheduler, step: int) -> None:
    """`check_swa`, and each pool's map, one slot a cell: every slot in exactly one state, a request's
    own slots its id, a locked node's SHARED, an unlocked node's CACHED, the rest FREE; a token's
    window slot as its full slot (none for a tombstone's or a slid token's: FREE)."""
    pool, tree = engine.pool, engine.tree
    maps = engine.group_maps(step, max(pool.full.size, pool.swa.size))
    check_swa(engine, step)
    expected = [np.full(pool.full.size, FREE), np.full(pool.swa.size, FREE)]
    nodes, stack = [], list(tree.root.children.values())
    while stack:
        node = stack.pop()
        nodes.append((node.value, SHARED if node.lock_ref else CACHED))
        stack += node.children.values()
    for seq in [*engine.running.values(), *([engine.chunked] if engine.chunked else [])]:
        nodes += [(own, seq.id) for own in seq.own]
    for slots, owner in nodes:
        expected[0][slots] = owner
        window = pool.swa_of[slots]
        expected[1][window[window != NO_SWA]] = owner
    assert [m.owner for m in maps] == [e.tolist() for e in expected]
    assert [Counter(m.written)[100] for m in maps] == [pool.full.used, pool.swa.used]


@settings(max_examples=60, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    full=st.integers(40, 300),
    ratio=st.sampled_from([0.3, 0.8, 1.0]),
    max_seqs=st.integers(1, 6),
    budget=st.integers(0, 120),
    lpm=st.booleans(),
    mixed=st.booleans(),
    caching=st.booleans(),
)
def test_every_request_finishes_and_no_slot_of_either_pool_leaks(
    rows, shared, full, ratio, max_seqs, budget, lpm, mixed, caching
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
    engine = swa_engine(full, max(int(full * ratio), 1), **config)
    run = engine.run(requests, observer=check_swa_maps)
    assert engine.tree.protected_size == engine.tree.swa_protected_size == engine.pending == 0
    assert (
        engine.pool.full.used == engine.tree.evictable_size and engine.pool.swa.used == engine.tree.swa_evictable_size
    )
    assert sorted([s.id for s in run.sequences] + [r.id for r, _ in run.rejected]) == [r.id for r in requests]
    for seq in run.sequences:
        assert seq.gen0 == seq.req.output and seq.computed == seq.req.prompt + seq.req.output - 1
    assert run.end_occupied == 0 and run.end_cached == engine.cached <= engine.capacity
    # the same run without an observer: its quiet iterations (stopped where windows slide) change nothing
    other = swa_engine(full, max(int(full * ratio), 1), **config).run(requests)
    assert [(s.id, s.first_token_t, s.finish_t) for s in other.sequences] == [
        (s.id, s.first_token_t, s.finish_t) for s in run.sequences
    ]
    assert (other.steps, other.preemptions, other.hit_tokens) == (run.steps, run.preemptions, run.hit_tokens)


def test_a_sliding_window_model_hits_the_shared_prefix():
    # the second request finds the first's 1,000 shared tokens (token-granular: all of them)
    cost = CostModel(H200, MODELS["gpt-oss-120b"], weight_precision="int4")
    full, swa = swa_pool_sizes(cost)
    engine = SWARadixScheduler(cost, SWARadixCache(full, swa, 128), RadixConfig(8192))
    assert engine.run(content_requests(1000, 60, 4, 5.0)).hit_tokens == 1000


def test_gpt_oss_at_long_context_holds_a_ninth_more_requests_than_its_all_full_twin():
    # 8,000-token prompts and 200-token answers, all at once (as tests/test_hybrid_kv.py's vLLM case).
    # SGLang's window pool is 0.8 of its full pool, so the full pool is only 1.8 / 1.62 = 1.11 x the
    # all-full model's slots, and every request keeps all its tokens there: 32 vs 29 at once, not
    # vLLM's 56 (its window groups hold 9 blocks a request). A ratio of 0.1 gives the full pool
    # 1.8 / 1.1 = 1.64 x, but a window pool of 42,954 slots, and a running request locks the window KV
    # of the whole last node of its prompt (SGLang's default: its leaf split is off), up to 8,000
    # tokens: 5 at once.
    from kvweb.prefix.radix_cache import RadixCache
    from kvweb.serving.schedulers.radix_scheduler import RadixScheduler

    requests = poisson_workload("fixed", 120, 1000.0, 16384, 0, 8000, 200)
    model = MODELS["gpt-oss-120b"]
    cost = CostModel(H200, model, weight_precision="int4", mem_util=0.55)
    twin = replace(cost, model=all_full(model))
    config = RadixConfig(16384)
    full = RadixScheduler(twin, RadixCache(twin.kv_capacity_tokens), config).run(requests).max_batch
    held = []
    for ratio in (0.8, 0.1):
        sizes = swa_pool_sizes(cost, ratio)
        held.append(SWARadixScheduler(cost, SWARadixCache(*sizes, 128), config).run(requests).max_batch)
    assert (full, *held) == (29, 32, 5)


def test_the_labs_cli_json_is_the_library_run_on_a_window_model():
    result = cli_result("schedulers", {"scenario": "B", "model": "gemma-3-27b", "workload": "few-shot", "requests": 30})
    assert [m["mode"] for m in result["modes"]] == ["vllm-v1", "sglang"] and set(result["refused"]) == {"paper"}
    sglang = result["modes"][1]
    assert sglang["prefix_hit_rate"] > 0.5
    pools = result["sglang_pools"]
    assert pools["window"] == 1024 and pools["swa_tokens"] == int(pools["full_tokens"] * 0.8)
    trace = sglang["trace"]
    assert trace["frames"]  # one map over both pools' slots, and each pool's map
    assert [(g["kind"], g["layers"], g["window"], g["shared"], g["unit"]) for g in trace["groups"]] == [
        ("full", 10, 0, False, "token slot"),
        ("sliding", 52, 1024, False, "token slot"),
    ]
    sizes = (pools["full_tokens"], pools["swa_tokens"])
    for frame in trace["frames"]:
        assert [len(g["owner"]) for g in frame["groups"]] == [
            -(-n // g["cell_tokens"]) for n, g in zip(sizes, trace["groups"])
        ]
