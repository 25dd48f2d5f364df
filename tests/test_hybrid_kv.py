"""vLLM V1's hybrid KV cache manager (issue 27, part 3): the groups and the raised block size by
hand, the sliding-window hit rule on a pool, prefix hits at raised-block boundaries, gpt-oss's
capacity beside its all-full twin, MLA's tokens per GPU, and conservation over random workloads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.gpu.layers import Attention, LinearAttention
from kvweb.gpu.specs import LLMSpec
from kvweb.prefix.radix_cache import RadixCache
from kvweb.serving.loop.continuous_batching import CACHED, FREE, OTHER, SHARED
from kvweb.serving.memory.hybrid_kv import NULL, GroupedPool, KVGroup, KVLayout, kv_layout
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.loop.step_cost import decode_coefficients
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from kvweb.serving.load.workload import Request, poisson_workload
from lab_json import cli_result
from test_schedulers import RetryingV1, requests_st, workload

H200 = GPUS["H200"]


def test_groups_and_page_size_by_hand():
    oss = kv_layout(CostModel(H200, MODELS["gpt-oss-120b"], weight_precision="int4"), 16)
    assert (oss.block_size, oss.group_size) == (16, 18)
    assert [(g.kind, g.layers, g.kept) for g in oss.groups] == [("sliding", 18, 127), ("full", 18, 0)]
    assert oss.page_bytes == 16 * 2 * 8 * 64 * 2  # 16 tokens x K and V x 8 heads x 64 x 2 B
    # Gemma 3: 52 window layers and 10 full; 52 >= 1.25 x 10, so groups of 10, the last window one 2 layers
    gemma = kv_layout(CostModel(H200, MODELS["gemma-3-27b"]), 16)
    assert gemma.group_size == 10 and [g.layers for g in gemma.groups] == [10, 10, 10, 10, 10, 2, 10]
    assert [g.kind for g in gemma.groups] == ["sliding"] * 6 + ["full"]
    # one kind of layer: one group, the plain pool
    assert not kv_layout(CostModel(H200, MODELS["llama-3-8b"]), 16).hybrid
    assert not kv_layout(CostModel(H200, MODELS["deepseek-v3"], tp=8), 16).hybrid


def window_and_full(window_layers: int, full_layers: int) -> LLMSpec:
    """gpt-oss-20b's shapes with `window_layers` window and `full_layers` full layers (as a model
    pasted with a drafter's extra layers would be)."""
    return LLMSpec(
        "oss-like",
        window_layers + full_layers,
        2880,
        64,
        8,
        64,
        2880,
        201088,
        experts=32,
        active_experts=4,
        layer_types=(Attention(8, 64, window=128),) * window_layers + (Attention(8, 64),) * full_layers,
    )


@pytest.mark.parametrize(
    "full, size, layers",
    [
        (17, 17, [12, 17]),  # 17 < 1.5 x 12: groups of the most (vLLM before PR #36684, under 1.25: 12, [12, 12, 5])
        (18, 12, [12, 12, 6]),  # 18 is not under 1.5 x 12: groups of the fewest
        (14, 14, [12, 14]),
    ],
)
def test_the_group_size_is_the_most_layers_when_under_one_and_a_half_times_the_fewest(full, size, layers):
    # vLLM's `_get_kv_cache_groups_uniform_page_size` (`max_num_layers < min_num_layers * 1.5`): gpt-oss-20b
    # (12 window layers) with a 4-layer drafter adding full layers (12 + 17) is grouped in 17s, the window
    # group padded with 5 empty slots
    layout = kv_layout(CostModel(H200, window_and_full(12, full), weight_precision="int4"), 16)
    assert layout.group_size == size and [g.layers for g in layout.groups] == layers
    assert layout.block_bytes == size * 16 * 2 * 8 * 64 * 2


def test_the_block_size_is_raised_until_a_page_holds_a_linear_state():
    # Qwen3-Next, one GPU, 16 bits: a gated-DeltaNet state is 32 x 128 x 128 + (2 x 16 x 128 + 32 x 128)
    # x (4 - 1) = 548,864 elements = 1,097,728 B; an attention layer's token is 2 x 2 x 256 x 2 = 2,048 B:
    # 536 tokens, and the smallest multiple of 16 at least that is 544.
    cost = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")
    layout = kv_layout(cost, 16)
    assert (layout.block_size, layout.page_bytes) == (544, 544 * 2048)
    assert [(g.kind, g.layers) for g in layout.groups] == [("linear", 12)] * 3 + [("full", 12)]
    assert kv_layout(cost, 1024).block_size == 1024  # a larger configured size stays
    assert kv_layout(cost, 100).block_size == 600  # ... and is the alignment: 100 x ceil(536 / 100)
    # fp8 KV halves the attention token, not the state: vLLM keeps it in `mamba_cache_dtype` (the model's
    # 16 bits unless set), so 1,097,728 / 1,024 = 1,072 tokens, a multiple of 16, and a page twice 544 x 1,024 B
    fp8 = kv_layout(replace(cost, kv_precision="fp8"), 16)
    assert (fp8.block_size, fp8.page_bytes) == (1072, 1072 * 1024) and 1072 * 1024 == 548_864 * 2
    assert V1Scheduler(replace(cost, kv_precision="fp8"), V1Config(8192, 16, 256, 8192)).bs == 1072
    assert kv_layout(replace(cost, tp=2), 16).block_size == 544  # 2 KV heads and the state heads split in two
    assert V1Scheduler(cost, V1Config(8192, 16, 256, 8192)).bs == 544


def pool_of(pages: int) -> GroupedPool:
    """Blocks of 4 tokens, a window of 8 tokens (2 blocks at the end of a hit), a full group."""
    return GroupedPool(KVLayout(4, 1, (KVGroup("sliding", 1, 7), KVGroup("full", 1)), 1), pages)


def test_a_window_group_hits_only_where_its_last_window_is_still_cached():
    pool = pool_of(40)
    a = pool.take(10)  # block i: window page 2i, full page 2i + 1
    assert a[3] == [6, 7]
    keys = list("abcdefghij")
    pool.register(a, keys, 0, 10)
    pool.slide(a, 40)  # 40 - 7 = 33 tokens skipped: the window pages of blocks 0-7 are freed (still hashed)
    assert [b[0] for b in a] == [NULL] * 8 + [16, 18]
    found = pool.lookup(keys[:5])  # full pages 1-9 held, window pages of blocks 3 and 4 cached
    assert found == [[NULL, 1], [NULL, 3], [NULL, 5], [6, 7], [8, 9]]
    pool.release(a)
    # 20 never-used pages go first, then the window pages freed last-block-first: 14, 12, 10, 8
    pool.take(12)
    assert len(pool.lookup(keys[:5])) == 4  # block 4's window page is gone: blocks 2, 3 end the hit
    # every full page of blocks 0-7 is still cached, but the window of blocks 4-7 fell out
    assert len(pool.lookup(keys[:8])) == 4
    pool.take(1)  # a block is 2 pages: 6 and 4, the window pages of blocks 3 and 2
    assert len(pool.lookup(keys[:8])) == 2  # blocks 0 and 1, cached from the start
    pool.take(1)  # pages 2 and 0: no window page is left, and nothing is hit
    assert pool.lookup(keys[:8]) == []


def content_requests(shared: int, own: int, output: int, gap: float) -> list[Request]:
    """Two requests sharing their first `shared` tokens, the second arriving `gap` s after the first."""
    rng = np.random.default_rng(0)
    prefix = rng.integers(0, 1000, shared)
    out = []
    for i in range(2):
        tokens = np.concatenate([prefix, rng.integers(0, 1000, own + output)]).astype(np.int64)
        out.append(Request(i, i * gap, shared + own, output, tokens=tokens))
    return out


@pytest.mark.parametrize("shared, hit", [(500, 0), (543, 0), (544 + 100, 544), (1200, 1088)])
def test_a_hybrid_model_hits_only_whole_raised_blocks(shared, hit):
    # Qwen3-Next's blocks are 544 tokens: a shared prompt shorter than one block is never hit
    cost = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")
    run = V1Scheduler(cost, V1Config(8192, 16, 256, 8192)).run(content_requests(shared, 60, 4, 5.0))
    assert run.hit_tokens == hit


def test_a_sliding_window_model_hits_the_shared_prefix():
    cost = CostModel(H200, MODELS["gpt-oss-120b"], weight_precision="int4")
    run = V1Scheduler(cost, V1Config(8192, 16, 256, 8192)).run(content_requests(1000, 60, 4, 5.0))
    assert run.hit_tokens == 992  # 62 whole blocks of 16


def all_full(model: LLMSpec) -> LLMSpec:
    """The same model with every window layer made full attention."""
    return replace(
        model,
        name=model.name + "-all-full",
        layer_types=tuple(Attention(a.kv_heads, a.head_dim) for a in model.attention),
    )


def test_gpt_oss_at_long_context_holds_about_twice_the_requests_of_its_all_full_twin():
    # 8,000-token prompts and 200-token answers, all arriving at once: a full layer holds 513 blocks
    # of a request, a window layer 9 (the 127 tokens before the last, in blocks of 16, and its own)
    requests = poisson_workload("fixed", 120, 1000.0, 16384, 0, 8000, 200)
    held = []
    for model in (MODELS["gpt-oss-120b"], all_full(MODELS["gpt-oss-120b"])):
        cost = CostModel(H200, model, weight_precision="int4", mem_util=0.55)
        engine = V1Scheduler(cost, V1Config(16384, 16, 256, 8192))
        held.append((engine.pool.n_blocks, engine.run(requests).max_batch))
    (hybrid_blocks, hybrid), (full_blocks, full) = held
    # blocks of 18 layers beside blocks of 36 (one of each kept out: the null block)
    assert (hybrid_blocks, full_blocks) == (29_530, 14_764) and (hybrid_blocks + 1) // 2 == full_blocks + 1
    assert full == 29 and hybrid == 56  # 14,764 / 513 and 29,530 / (513 + 9), a few still growing
    assert 1.9 < hybrid / full < 2


def test_mla_holds_the_same_tokens_per_gpu_on_eight_gpus_and_data_parallel_attention_multiplies_them():
    one = CostModel(H200, MODELS["deepseek-v3"], tp=1, ignore_weights=True)
    eight = replace(one, tp=8)
    assert one.kv_bytes_per_token_per_gpu == eight.kv_bytes_per_token_per_gpu == 61 * 576 * 2
    assert one.kv_capacity_tokens == eight.kv_capacity_tokens
    assert replace(eight, attention_dp=True).kv_capacity_tokens == 8 * one.kv_capacity_tokens
    engine = V1Scheduler(eight, V1Config(8192, 16, 256, 8192))
    assert engine.capacity == (eight.kv_capacity_blocks(16) - 1) * 16


def test_a_window_layer_reads_a_window_per_sequence_in_the_decode_price():
    cost = CostModel(H200, MODELS["gemma-3-27b"])
    f0, fb, fc, b0, bb, bc = decode_coefficients(cost)
    for batch, context in ((3, 6000), (1, 1024), (8, 8 * 4096)):
        flops, nbytes = cost.decode_work(batch, context)
        assert f0 + fb * batch + fc * context == pytest.approx(flops, rel=1e-12)
        assert b0 + bb * batch + bc * context == pytest.approx(nbytes, rel=1e-12)
    # per sequence: 52 window layers x 1,024 tokens x 2 x 16 x 128 x 2 B
    assert bb == 52 * 1024 * 2 * 16 * 128 * 2


def test_sglang_refuses_linear_layers_and_window_layers_on_one_pool():
    cost = CostModel(H200, MODELS["gpt-oss-120b"], weight_precision="int4")
    with pytest.raises(ValueError, match="gpt-oss-120b.*sliding"):
        RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), RadixConfig(8192))
    cost = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")
    with pytest.raises(ValueError, match="qwen3-next-80b-a3b.*linear"):
        RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), RadixConfig(8192))


# -- conservation over random workloads on tiny hybrid models ------------------------------------
TINY = {
    "window": LLMSpec(
        "tiny-window", 4, 64, 4, 1, 16, 64, 100, layer_types=(Attention(1, 16, window=8), Attention(1, 16)) * 2
    ),
    "linear": LLMSpec(
        "tiny-linear", 4, 64, 4, 1, 16, 64, 100, layer_types=(LinearAttention(1, 4, 1, 4, 2), Attention(1, 16)) * 2
    ),
}


def tiny_cost(kind: str, blocks: int, block_size: int) -> CostModel:
    """A tiny hybrid model with room for exactly `blocks` blocks (one of them the null block)."""
    base = CostModel(GPUS["A100-40GB"], TINY[kind])
    layout = kv_layout(base, block_size)
    cost = replace(base, mem_util=(base.weight_bytes + (blocks + 0.5) * layout.block_bytes) / base.gpu.hbm_bytes)
    assert layout.blocks(cost) == blocks
    return cost


@pytest.mark.parametrize("pages, other, hit", [(200, 40, 20), (30, 40, 0), (30, 32, 16)])
def test_a_cached_prefix_whose_window_was_evicted_misses(pages, other, hit):
    # Blocks of 4 tokens, a window of 8 (7 kept: the last 2 blocks of a hit), a page per group and block.
    # A (40 tokens) leaves 10 blocks cached, its window pages freed before its full pages (group by group,
    # each tail first). C (unique tokens, 2 pages a block) then takes the never-used pages (180, or 10 of
    # 30) and, in 30 pages, A's window pages from block 9 down: all 10 for 40 tokens, 6 for 32. B shares
    # A's first 20 tokens: 5 blocks whose full pages C leaves cached in every case; the window pages of
    # blocks 3 and 4 end the hit if C left them, else those of blocks 2 and 3 (16 tokens), else nothing.
    rng = np.random.default_rng(1)
    a = rng.integers(0, 9, 40)
    b = np.concatenate([a[:20], rng.integers(10, 19, 8), [7]])
    c = rng.integers(20, 29, other + 1)
    requests = [
        Request(0, 0.0, 40, 1, tokens=np.concatenate([a, [7]])),
        Request(1, 1.0, other, 1, tokens=c),
        Request(2, 2.0, 28, 1, tokens=b),
    ]
    engine = V1Scheduler(tiny_cost("window", pages + 1, 4), V1Config(128, 4, 4, 64))
    assert engine.pool.n_blocks == pages and engine.width == 2  # a window group and a full one, 2 layers each
    run = engine.run(requests)
    assert run.hit_tokens == hit


def check_hybrid(engine: V1Scheduler, step: int) -> None:
    """Reference counts equal holders, a page is free exactly when nobody holds it, a request holds a
    block entry for every block of its KV, a full group every page, a window group a tail of them."""
    pool, bs = engine.pool, engine.bs
    pages = pool.pages
    holders = [0] * pages.n_blocks
    for seq in [*engine.running.values(), *engine.prefilling, *engine.leaving]:
        kv = seq.kv(engine.dstep) if seq.id in engine.running else seq.computed
        assert len(seq.blocks) == -(-kv // bs)
        for g, group in enumerate(pool.groups):
            column = [b[g] for b in seq.blocks]
            nulls = column.count(NULL)
            assert column[:nulls] == [NULL] * nulls  # freed from the front only
            assert nulls <= max(0, kv - group.kept) // bs if group.windowed else nulls == 0
            for p in column[nulls:]:
                holders[p] += 1
    assert pages.ref == holders
    assert all((p in pages.free) == (pages.ref[p] == 0) for p in range(pages.n_blocks))
    assert pages.reusable == sum(1 for p in pages.free if pages.block_hash[p] is not None)
    assert engine.used <= engine.occupied <= engine.capacity


class SlidingAll(V1Scheduler):
    """V1 whose window groups slide for every running request in every iteration (not only at its phase)."""

    def _slide(self) -> None:
        for seq in self.running.values():
            self.pool.slide(seq.blocks, seq.kv(self.dstep))
        for seq in self.prefilling:
            self.pool.slide(seq.blocks, seq.computed)


@settings(max_examples=40, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    kind=st.sampled_from(sorted(TINY)),
    blocks=st.integers(30, 120),
    block=st.sampled_from([2, 4, 16]),
    max_seqs=st.integers(1, 6),
    budget=st.integers(0, 120),
    caching=st.booleans(),
    check=st.booleans(),
    mixed=st.booleans(),
)
def test_every_request_finishes_and_no_page_leaks_on_a_hybrid_model(
    rows, shared, kind, blocks, block, max_seqs, budget, caching, check, mixed
):
    requests = workload(rows, shared)
    config = V1Config(128, block, max_seqs, max_seqs + budget, caching, check, mixed)
    engine = V1Scheduler(tiny_cost(kind, blocks, block), config)
    run = engine.run(requests, observer=check_hybrid)
    assert engine.pool.pages.ref == [0] * engine.pool.n_blocks and len(engine.pool.free) == engine.pool.n_blocks
    assert sorted([s.id for s in run.sequences] + [r.id for r, _ in run.rejected]) == [r.id for r in requests]
    for seq in run.sequences:
        assert seq.gen0 == seq.req.output and seq.computed == seq.req.prompt + seq.req.output - 1
    assert run.end_occupied == 0 and run.end_cached == engine.cached <= engine.capacity
    assert run.hit_tokens == 0 or caching
    # the same run without an observer (every iteration through `_iterate` either way on a hybrid model),
    # retrying the blocked head every step as vLLM does (the pool's `version` says when a lookup may
    # change), and sliding every request's window every step (not only at its phase)
    for again in (V1Scheduler, RetryingV1, SlidingAll):
        other = again(tiny_cost(kind, blocks, block), config).run(requests)
        assert [(s.id, s.first_token_t, s.finish_t) for s in other.sequences] == [
            (s.id, s.first_token_t, s.finish_t) for s in run.sequences
        ]
        assert (other.steps, other.preemptions, other.hit_tokens) == (run.steps, run.preemptions, run.hit_tokens)


# -- the schedulers lab on today's models ---------------------------------------------------------
@pytest.mark.parametrize("model, blocks", [("gpt-oss-20b", [9, 512]), ("qwen3-next-80b-a3b", [1, 1, 1, 16])])
def test_the_labs_cli_json_is_the_library_run_and_names_the_groups(model, blocks):
    result = cli_result(
        "schedulers",
        {"scenario": "B", "model": model, "weight_precision": "int4", "workload": "few-shot", "requests": 30},
    )
    # SGLang serves them on its own pools (tests/test_swa_radix.py, tests/test_mamba_radix.py)
    assert [m["mode"] for m in result["modes"]] == ["vllm-v1", "sglang"] and set(result["refused"]) == {"paper"}
    assert [g["blocks_per_max_request"] for g in result["kv_groups"]] == blocks  # of 8,192 tokens
    # the system prompt and a task's examples (800 tokens) are hit in whole blocks: of 16 tokens, or of 544
    v1 = result["modes"][0]
    assert v1["hit_tokens"] % result["block_size"] == 0 and v1["prefix_hit_rate"] > (0.5 if blocks[0] == 9 else 0.4)
    # each frame draws the one pool once per group, the groups named once
    trace = v1["trace"]
    assert [(g["kind"], g["layers"], g["shared"], g["unit"]) for g in trace["groups"]] == [
        (g["kind"], g["layers"], True, "block") for g in result["kv_groups"]
    ]
    assert all(
        len(f["groups"]) == len(blocks) and len({len(g["owner"]) for g in f["groups"]}) == 1 for f in trace["frames"]
    )


def test_a_model_of_one_kind_of_layer_has_no_group_maps():
    from kvweb.parsing import make

    result = make("schedulers", {"requests": "20"}).run()
    for mode in result["modes"]:
        assert "groups" not in mode["trace"] and not any("groups" in f for f in mode["trace"]["frames"])


# -- each group's memory map (issue 27, part 3: the view) ---------------------------------------------
def group_pages(maps: list, owner: int) -> list[int]:
    """How many cells of each group's map (one page a cell) hold `owner`."""
    return [m.owner.count(owner) for m in maps]


def test_a_window_groups_map_keeps_the_last_window_while_the_full_groups_grows():
    # gpt-oss-20b in 300 pages of 16 tokens (12 layers each): a window group keeps the 127 tokens before the
    # next one (`kept`) and frees every block wholly before them as the request computes
    base = CostModel(H200, MODELS["gpt-oss-20b"])
    layout = kv_layout(base, 16)
    cost = replace(base, mem_util=(base.weight_bytes + 301.5 * layout.block_bytes) / H200.hbm_bytes)
    engine = V1Scheduler(cost, V1Config(8192, 16, 256, 8192))
    assert engine.pool.n_blocks == 300 and engine.width == 2
    engine.start([Request(0, 0.0, 200, 200)])
    engine.advance(iterations=1)  # the prefill: 200 tokens, 13 blocks, 12 of them full and hashed
    seen = []
    for decodes in (50, 32, 64):
        engine.advance(iterations=decodes)
        maps = engine.group_maps(engine.step, 300)  # one cell a page
        assert [(m.kind, m.window, m.layers, m.cell_tokens, len(m.owner)) for m in maps] == [
            ("sliding", 128, 12, 16, 300),
            ("full", 0, 12, 16, 300),
        ]
        seen.append(
            (group_pages(maps, 0), group_pages(maps, CACHED), group_pages(maps, OTHER), group_pages(maps, FREE))
        )
    # after 50, 82 and 146 decodes the request holds 250, 282 and 346 tokens: 16, 18 and 22 blocks. The window
    # slid at the start of the last step (249, 281, 345 tokens computed): (249 - 127) // 16 = 7 blocks, then 9,
    # then 13 were freed, so it holds 9 blocks each time (ceil(127 / 16) + 1), the full group every block.
    # Freed window pages of prompt blocks keep their hash (cached); decoded blocks are hashed only when the
    # request leaves, so their window pages are freed plain (13 freed: 12 prompt blocks cached, 1 free).
    assert seen == [
        ([9, 16], [7, 0], [16, 16], [268, 268]),
        ([9, 18], [9, 0], [18, 18], [264, 264]),
        ([9, 22], [12, 0], [22, 21], [257, 257]),
    ]


def check_group_maps(engine: V1Scheduler, step: int) -> None:
    """With one page a cell, each group's map holds exactly the pages its requests hold (by id or
    SHARED) and the ones hashed for it (CACHED); every page is in one group or FREE in all of them."""
    n, pool = engine.pool.n_blocks, engine.pool
    maps = engine.group_maps(step, n * pool.width)
    assert len(maps) == pool.width and all(len(m.owner) == n and m.cell_tokens == engine.bs for m in maps)
    owners = np.array([m.owner for m in maps])
    mine = owners != OTHER
    free = (owners == FREE).all(axis=0)
    assert ((mine.sum(axis=0) == 1) & ~free | free & mine.all(axis=0)).all()  # one group's, or free in all
    assert (np.array([m.written for m in maps]).sum(axis=0) == np.where(free, 0, 100)).all()
    seqs = [*engine.running.values(), *engine.prefilling, *engine.leaving]
    for g, m in enumerate(maps):
        held = {b[g] for s in seqs for b in s.blocks if b[g] != NULL}
        hashed = {p for p in range(n) if pool.pages.block_hash[p] is not None and pool.pages.block_hash[p][1] == g}
        assert {p for p in range(n) if m.owner[p] >= 0 or m.owner[p] == SHARED} == held
        assert {p for p in range(n) if m.owner[p] == CACHED} == hashed - held
    # the whole pool's map is the groups' maps put together
    _, whole, _ = engine.memory_map(step, n)
    assert whole == np.where(free, FREE, owners.max(axis=0, where=mine, initial=OTHER)).tolist()


@settings(max_examples=25, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    kind=st.sampled_from(sorted(TINY)),
    blocks=st.integers(30, 120),
    block=st.sampled_from([2, 4, 16]),
    max_seqs=st.integers(1, 6),
    caching=st.booleans(),
)
def test_every_page_is_in_one_groups_map_or_free(rows, shared, kind, blocks, block, max_seqs, caching):
    engine = V1Scheduler(tiny_cost(kind, blocks, block), V1Config(128, block, max_seqs, max_seqs + 64, caching))
    engine.run(workload(rows, shared), observer=check_group_maps)
