"""Today's schedulers (vLLM V1 style, SGLang style) beside the papers' engine: hand-computed small
runs, the papers' engine as a special case of V1, prefix hits, and conservation over random workloads."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.lab import ParamError
from kvweb.parsing import make
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.radix_cache import RadixCache
from kvweb.serving.load.arrivals import Arrivals
from kvweb.serving.schedulers.paper_scheduler import PaperConfig, PaperScheduler
from kvweb.serving.loop.metrics import weighted_distribution
from kvweb.serving.memory.paged_memory import PagedMemory
from kvweb.serving.memory.prefix_caching import BlockPool
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler, default_chunk_size
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler, default_token_budget
from kvweb.serving.load.workload import Request, poisson_workload

BASE = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])


def cost_with(tokens: int) -> CostModel:
    """The lecture's paper GPU with exactly `tokens` tokens of KV (a small pool for small tests)."""
    kv = BASE.model.kv_bytes_per_token
    cost = replace(BASE, mem_util=(BASE.model.weight_bytes + tokens * kv + kv / 2) / BASE.gpu.hbm_bytes)
    assert cost.kv_capacity_tokens == tokens
    return cost


def v1(tokens: int, **config) -> V1Scheduler:
    return V1Scheduler(cost_with(tokens), V1Config(max_len=config.pop("max_len", 512), **config))


def sglang(tokens: int, **config) -> RadixScheduler:
    cost = cost_with(tokens)
    return RadixScheduler(cost, RadixCache(tokens), RadixConfig(max_len=config.pop("max_len", 512), **config))


def req(i: int, prompt: list[int] | int, output: int | list[int], arrival: float = 0.0, **kw) -> Request:
    """A request; with token lists it carries content (prompt then output ids)."""
    if isinstance(prompt, int):
        return Request(i, arrival, prompt, output, **kw)
    out = output if isinstance(output, list) else [7] * output
    return Request(i, arrival, len(prompt), len(out), tokens=np.array(prompt + out, dtype=np.int64), **kw)


# -- hand-computed runs ---------------------------------------------------------------------


def test_a_long_prompt_is_prefilled_in_chunks_of_the_budget():
    # budget 4 tokens per step: a 10-token prompt takes chunks of 4, 4, 2 (each attending to the
    # chunks before it), then decodes; its first token comes at the end of the third step.
    engine = v1(64, block_size=4, max_seqs=4, token_budget=4)
    run = engine.run([req(0, 10, 3)])
    chunks = [BASE.prefill_cost(4, 0), BASE.prefill_cost(4, 4), BASE.prefill_cost(2, 8)]
    decodes = [BASE.decode_step_cost(1, 11), BASE.decode_step_cost(1, 12)]
    seq = run.sequences[0]
    assert seq.first_token_t == pytest.approx(sum(chunks))
    assert seq.finish_t == pytest.approx(sum(chunks) + sum(decodes))
    assert run.steps == 5 and run.generated == 3 and run.batch_sum == 5


def test_decodes_and_a_chunk_share_the_budget():
    # Request 0 (prompt 2) decodes while request 1's 9-token prompt arrives: with a budget of 4
    # each step gives 1 token to the decode and 3 to the chunk: chunks 3, 3, 3.
    engine = v1(64, block_size=4, max_seqs=4, token_budget=4)
    first = BASE.prefill_cost(2)
    run = engine.run([req(0, 2, 6), req(1, 9, 1, arrival=first / 2)])
    a, b = run.sequences
    w = BASE.decode_work(0, 0)[1]  # the weights, read once per step
    t = first
    for k in range(3):
        (fd, bd), (fc, bc) = BASE.decode_work(1, 3 + k), BASE.prefill_work(3, 3 * k)
        t += BASE.step_time(fd + fc, bd + bc - w)
    assert b.first_token_t == pytest.approx(t) and b.finish_t == b.first_token_t  # one output token
    assert a.first_token_t == pytest.approx(first)


def test_whole_blocks_are_hit_but_never_the_last_token():
    # A finished request's blocks stay cached. The same 8-token prompt again: vLLM must compute
    # at least one token for the logits, so it hits (8 - 1) // 4 = 1 block; SGLang, token by
    # token, hits 7. A prompt sharing 6 tokens hits 1 block (vLLM) or 6 tokens (SGLang).
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    requests = [req(0, prompt, 2), req(1, prompt, 2, arrival=10.0), req(2, prompt[:6] + [9, 9], 2, arrival=20.0)]
    hits = {}
    for name, engine in (("v1", v1(64, block_size=4)), ("sglang", sglang(64))):
        run = engine.run(requests)
        hits[name] = run.hit_tokens
        assert run.prompt_tokens == 24
    assert hits == {"v1": 4 + 4, "sglang": 7 + 6}


@pytest.mark.parametrize("check", [True, False])
def test_a_prompt_is_admitted_when_all_of_it_fits_or_only_its_first_chunk(check):
    # 9 blocks of 4, one of them the null block: 8 usable. Request 0 (prompt 4, output 20) holds 2
    # blocks after its first decode and grows to 6. Request 1's prompt of 28 tokens needs 7 blocks.
    # With the full-prompt check it waits until request 0 has left; checking only its first chunk
    # (4 tokens, the budget) admits it at once, and its later chunks run out of blocks.
    engine = v1(36, block_size=4, max_seqs=4, token_budget=4, full_prompt_check=check)
    log: list = []
    run = engine.run(
        [req(0, 4, 20), req(1, 28, 2, arrival=0.001)],
        observer=lambda e, s: log.append(([q.id for q in e.prefilling], len(e.pool.free))),
    )
    first, second = run.sequences
    if check:
        assert run.preemptions == 0 and second.first_token_t > first.finish_t
        assert all(prefilling == [] for prefilling, _ in log[:20])
    else:
        assert log[1] == ([1], 5)  # admitted in the second step: 4 tokens in 1 block beside request 0's 2
        assert run.preemptions == 2 and run.recomputed_tokens > 0


def test_the_latest_request_is_preempted_and_finds_its_own_blocks_again():
    # 5 blocks of 4, one of them vLLM's null block. Two requests of prompt 4 and output 8 (final KV
    # 11 = 3 blocks each) cannot both finish: request 1, started last, is preempted when the blocks
    # run out; its full blocks stay cached (hashed), so when it comes back it recomputes only what
    # is not cached.
    engine = v1(20, block_size=4, max_seqs=4, token_budget=16)
    assert engine.capacity == 16
    log: list = []
    run = engine.run([req(0, 4, 8), req(1, 4, 8)], observer=lambda e, s: log.append(sorted(e.running)))
    assert run.preemptions >= 1 and {s.id for s in run.sequences} == {0, 1}
    assert log[0] == [0, 1] and [1] not in log[: log.index([0]) + 1]  # request 1 went first
    assert run.resumed_hit_tokens > 0 and run.recomputed_tokens > 0


def test_sglang_retracts_the_request_with_the_fewest_generated_tokens():
    # 25 slots: SGLang reserves a page (a slot) per admitted request (per_req_token_overhead), so
    # with 24 request 1 now waits until request 0 has finished instead of being admitted and retracted
    engine = sglang(25, max_seqs=4, chunk_size=64, max_prefill_tokens=64)
    engine.init_ratio = engine.min_ratio = 0.0  # expect no more output: admit greedily, run out of slots

    run = engine.run([req(0, 6, 9), req(1, 6, 9, arrival=0.05)])
    assert run.preemptions >= 1 and {s.id for s in run.sequences} == {0, 1}
    first_out = min(run.sequences, key=lambda s: s.finish_t)
    assert first_out.id == 0  # request 1 (fewer tokens generated) was retracted


def test_a_later_turn_arrives_after_its_answer_and_a_rejected_turn_ends_the_conversation():
    engine = v1(64, block_size=4)
    requests = [req(0, 4, 3), req(1, 6, 3, after=0, delay=2.5), req(2, 900, 3), req(3, 5, 1, after=2, delay=1.0)]
    run = engine.run(requests)
    first, second = run.sequences
    assert second.req.arrival == pytest.approx(first.finish_t + 2.5)
    reasons = dict((r.id, why) for r, why in run.rejected)
    assert "exceeds the model's maximum length 512" in reasons[2]
    assert reasons[3] == "its conversation's earlier turn (request 2) was rejected"


def test_arrivals_keep_the_order_given_for_equal_times():
    arrivals = Arrivals([req(0, 1, 1, 1.0), req(1, 1, 1, 1.0), req(2, 1, 1, 0.5)])
    assert [arrivals.pop().id for _ in range(3)] == [2, 0, 1] and arrivals.next_t == float("inf")


def test_weighted_percentiles_by_hand():
    d = weighted_distribution([(0.03, 1), (0.01, 8), (0.02, 1), (0.5, 0)])
    assert d["count"] == 10 and d["p50"] == 0.01 and d["p90"] == 0.02 and d["p99"] == 0.03 and d["max"] == 0.03
    assert d["mean"] == pytest.approx((0.03 + 0.08 + 0.02) / 10)


def test_the_block_pool_counts_references_and_reuse():
    pool = BlockPool(4, 2)
    a = pool.take(2)
    pool.register(a, ["h1", "h2"], 0, 2)
    pool.touch(a[:1])  # a second request holds the first block
    assert pool.shared_extra == 1 and pool.lookup(["h1", "h2", "h3"]) == a
    pool.release(a)
    assert pool.ref[a[0]] == 1 and pool.reusable == 1  # the second block is free but still hashed
    assert pool.take(3)[-1] == a[1] and pool.reusable == 0 and pool.lookup(["h1", "h2"]) == a[:1]


def test_a_freed_block_without_a_hash_is_reused_first_and_a_copy_outlives_the_first():
    # vLLM's free_blocks: a hashed block goes to the back of the free queue, one without a hash
    # to the front; a block filled with a prefix already cached is a copy, found once the first goes.
    pool = BlockPool(5, 2)
    a, b = pool.take(2)  # two requests compute the same block, "h"
    pool.register([a], ["h"], 0, 1)
    pool.register([b], ["h"], 0, 1)
    assert pool.lookup(["h"]) == [a] and pool.copies == {"h": {b: None}}
    tail = pool.take(1)  # a third request's partial block, never hashed
    pool.release([b])
    pool.release(tail)
    assert list(pool.free) == [tail[0], 3, 4, b]  # unhashed in front, hashed at the back
    pool.release([a])
    assert pool.take(3) == [tail[0], 3, 4] and pool.reusable == 2 and pool.cached == 4
    assert pool.take(1) == [b] and pool.lookup(["h"]) == [a] and pool.copies == {}
    pool.register([b], ["h"], 0, 1)  # b holds "h" again, a copy; a leaves the cache: b is found
    assert pool.take(1) == [a] and pool.lookup(["h"]) == [b]


def test_defaults_follow_the_engines():
    assert default_token_budget(GPUS["A100-80GB"]) == 2048 and default_token_budget(GPUS["H100-SXM"]) == 8192
    assert default_chunk_size(GPUS["A100-40GB"]) == 8192 and default_chunk_size(GPUS["H200"]) == 8192


# -- the papers' engine as a special case -------------------------------------------------------


def test_v1_without_cache_and_budget_matches_the_papers_engine_when_nothing_is_preempted():
    # Admission FCFS with head-of-line blocking, whole prefills (an unlimited budget never cuts a
    # prompt), decodes first: with no watermark and room for everyone, the same steps, costs and times
    # (the papers' engine with one block fewer: V1 keeps one out of use, the null block).
    rng = np.random.default_rng(3)
    requests = [
        Request(i, float(t), int(p), int(o))
        for i, (t, p, o) in enumerate(
            zip(np.cumsum(rng.exponential(0.02, 60)), rng.integers(1, 300, 60), rng.integers(1, 200, 60))
        )
    ]
    cost = cost_with(4000)
    paper = PaperScheduler(
        cost, PagedMemory(cost.kv_capacity_blocks(16) - 1, 16), PaperConfig(512, max_seqs=12, max_batch_tokens=10**6)
    ).run(requests)
    today = V1Scheduler(cost, V1Config(512, 16, max_seqs=12, token_budget=10**6, prefix_caching=False)).run(requests)
    assert paper.preemptions == today.preemptions == 0
    assert [s.first_token_t for s in today.sequences] == pytest.approx([s.first_token_t for s in paper.sequences])
    assert [s.finish_t for s in today.sequences] == pytest.approx([s.finish_t for s in paper.sequences])
    assert (today.steps, today.batch_sum, today.generated) == (paper.steps, paper.batch_sum, paper.generated)
    assert today.occupied_s == pytest.approx(paper.occupied_s) and today.used_s == pytest.approx(paper.used_s)


# -- prefix hits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("workload", ["few-shot", "multi-turn"])
def test_a_prefix_sharing_workload_hits_in_both_modes(workload):
    lab = make("schedulers", {"workload": workload, "requests": "60"})
    result = lab.run()
    rates = {m["mode"]: m["prefix_hit_rate"] for m in result["modes"]}
    assert rates["paper"] == 0.0 and rates["vllm-v1"] > 0.5 and rates["sglang"] > 0.5
    ttft = {m["mode"]: m["ttft_s"]["p50"] for m in result["modes"]}
    assert ttft["vllm-v1"] < ttft["paper"] and ttft["sglang"] < ttft["paper"]


@pytest.mark.parametrize("contents", ["none", "random"])
def test_a_workload_without_shared_prefixes_hits_nothing(contents):
    rng = np.random.default_rng(0)
    requests = []
    for i in range(40):
        p, o = int(rng.integers(5, 80)), int(rng.integers(1, 30))
        tokens = None if contents == "none" else np.concatenate([[i], rng.integers(1000, 2**31, p + o - 1)])
        requests.append(Request(i, i * 0.01, p, o, tokens=tokens))
    for engine in (v1(600, block_size=4), sglang(600)):
        run = engine.run(requests)
        assert run.prompt_tokens == sum(r.prompt for r in requests) and run.hit_tokens == 0


def test_lab_checks_name_the_parameter():
    with pytest.raises(ParamError, match="token_budget: 64 is not allowed; vLLM needs at least max_seqs"):
        make("schedulers", {"token_budget": "64"})
    with pytest.raises(ParamError, match="system_len \\+ turns x \\(question_len \\+ output_len\\)"):
        make("schedulers", {"turns": "32", "output_len": "100"})
    with pytest.raises(ParamError, match="search: true is not allowed with workload trace"):
        make("schedulers", {"search": "true", "workload": "trace", "trace": "0,10,10"})
    with pytest.raises(ParamError, match="chunk_size: 255 is not allowed; use 0 .* or 256 to 65536"):
        make("schedulers", {"chunk_size": "255"})
    assert make("schedulers", {"chunk_size": "256"}).chunk() == 256 and make("schedulers", {}).chunk() == 8192


def test_the_search_finds_a_rate_per_mode():
    result = SchedulersLab(workload="few-shot", requests=40, search=True, target=0.5).run()
    for m in result["modes"]:
        assert m["max_rate"] > 0 and m["trials"] and any(t["met"] for t in m["trials"])


# -- conservation over random workloads -------------------------------------------------------


def check_v1(engine: V1Scheduler, step: int) -> None:
    """Reference counts equal holders, a block is free exactly when nobody holds it, a shared or
    cached block is full (hashed) and so never written, each request holds the blocks its KV needs."""
    pool, bs = engine.pool, engine.bs
    holders: Counter = Counter()
    for seq in [*engine.running.values(), *engine.prefilling, *engine.leaving]:
        assert len(set(seq.blocks)) == len(seq.blocks)
        holders.update(seq.blocks)
        kv = seq.kv(engine.dstep) if seq.id in engine.running else seq.computed
        assert len(seq.blocks) == -(-kv // bs)
        if kv % bs:  # the block being written: held by this request alone, never cached
            assert pool.ref[seq.blocks[-1]] == 1 and pool.block_hash[seq.blocks[-1]] is None
    for b in range(pool.n_blocks):
        assert pool.ref[b] == holders[b] and (b in pool.free) == (pool.ref[b] == 0)
        assert pool.ref[b] <= 1 or pool.block_hash[b] is not None
    assert all(pool.block_hash[b] == h for h, b in pool.table.items())
    assert all(pool.block_hash[b] == h and pool.table[h] != b for h, copies in pool.copies.items() for b in copies)
    assert sum(h is not None for h in pool.block_hash) == len(pool.table) + sum(map(len, pool.copies.values()))
    assert pool.reusable == sum(1 for b in pool.free if pool.block_hash[b] is not None)
    assert pool.shared_extra == sum(r - 1 for r in pool.ref if r > 0)
    assert len(engine.running) + len(engine.prefilling) <= engine.max_seqs


def check_sglang(engine: RadixScheduler, step: int) -> None:
    """Every used slot is held once, by the tree or by one running request; decoded tokens not yet
    given slots are counted and always fit."""
    tree = engine.tree
    slots: list[int] = []
    stack = list(tree.root.children.values())
    while stack:
        node = stack.pop()
        slots += node.value.tolist()
        stack += node.children.values()
    assert len(slots) == tree.evictable_size + tree.protected_size
    for seq in [*engine.running.values(), *([engine.chunked] if engine.chunked else [])]:
        for own in seq.own:
            slots += own.tolist()
        assert len(seq.prefix) + sum(len(o) for o in seq.own) == seq.mat
    assert len(slots) == len(set(slots)) == engine.pool.used
    assert engine.pending == sum(s.kv(engine.dstep) - s.mat for s in engine.running.values()) and engine.free_slots >= 0


requests_st = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.0, 0.01, 0.05]),
        st.integers(0, 30),
        st.integers(1, 40),
        st.integers(1, 30),
        st.booleans(),
    ),
    min_size=1,
    max_size=14,
)


def workload(rows: list, shared: bool) -> list[Request]:
    """Rows of (gap, shared system tokens, own prompt tokens, output, a later turn?)."""
    rng = np.random.default_rng(len(rows))
    system = rng.integers(0, 9, 30)
    out, t = [], 0.0
    for i, (gap, k, p, o, later) in enumerate(rows):
        t += gap
        prompt = np.concatenate([system[:k] if shared else [], rng.integers(0, 9, p)]).astype(np.int64)
        tokens = np.concatenate([prompt, rng.integers(0, 9, o)]) if shared else None
        after = i - 1 if later and i else None
        out.append(Request(i, t, len(prompt), o, tokens=tokens, after=after, delay=0.02 if after is not None else 0.0))
    return out


@settings(max_examples=60, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    tokens=st.integers(40, 300),
    block=st.sampled_from([1, 2, 4, 16]),
    max_seqs=st.integers(1, 6),
    budget=st.integers(0, 120),
    caching=st.booleans(),
    mode=st.sampled_from(["v1", "sglang"]),
    lpm=st.booleans(),
    mixed=st.booleans(),
)
def test_every_request_finishes_exactly_or_is_rejected_and_nothing_leaks(
    rows, shared, tokens, block, max_seqs, budget, caching, mode, lpm, mixed
):
    requests = workload(rows, shared)
    if mode == "v1":  # (`lpm` and `mixed` draw the full-prompt check and async scheduling)
        engine = v1(
            tokens,
            max_len=128,
            block_size=block,
            max_seqs=max_seqs,
            token_budget=max_seqs + budget,
            prefix_caching=caching,
            full_prompt_check=lpm,
            async_scheduling=mixed,
        )
        run = engine.run(requests, observer=check_v1)
        assert all(r == 0 for r in engine.pool.ref) and len(engine.pool.free) == engine.pool.n_blocks
    else:
        engine = sglang(
            tokens,
            max_len=128,
            max_seqs=max_seqs,
            chunk_size=budget + 1,
            max_prefill_tokens=budget + 8,
            policy="lpm" if lpm else "fcfs",
            mixed_chunk=mixed,
            radix_cache=caching,
        )
        run = engine.run(requests, observer=check_sglang)
        assert engine.tree.protected_size == 0 and engine.pending == 0
        assert engine.pool.used == engine.tree.evictable_size
    assert sorted([s.id for s in run.sequences] + [r.id for r, _ in run.rejected]) == [r.id for r in requests]
    assert all(why for _, why in run.rejected)
    for seq in run.sequences:
        assert seq.gen0 == seq.req.output and seq.computed == seq.req.prompt + seq.req.output - 1
    assert run.generated == sum(s.req.output for s in run.sequences)
    # at the end nothing is held (KV cache usage 0) and what stays cached is the cache's own count
    assert run.end_occupied == 0 and run.end_cached == engine.cached <= engine.capacity
    assert run.end_cached == 0 or caching
    assert (run.max_batch == 0) == (not run.sequences) and run.max_batch <= max_seqs
    assert run.steps == 0 or run.batch_sum / run.steps <= run.max_batch


@settings(max_examples=25, deadline=None)
@given(rows=requests_st, tokens=st.integers(60, 300))
def test_the_papers_engine_serves_every_turn_of_a_conversation(rows, tokens):
    requests = workload(rows, shared=True)
    cost = cost_with(tokens)
    run = PaperScheduler(cost, PagedMemory(cost.kv_capacity_blocks(4), 4), PaperConfig(128, block_size=4)).run(requests)
    assert sorted([s.id for s in run.sequences] + [r.id for r, _ in run.rejected]) == [r.id for r in requests]
    for seq in run.sequences:
        if seq.req.after is not None:
            parent = next(s for s in run.sequences if s.id == seq.req.after)
            assert seq.req.arrival == pytest.approx(parent.finish_t + seq.req.delay)


class RetryingV1(V1Scheduler):
    """V1 that retries the waiting queue's head every step, as vLLM does (no blocked shortcut)."""

    @property
    def _blocked(self):  # noqa: ANN202
        return (None, -1, -1, -1)

    @_blocked.setter
    def _blocked(self, value) -> None:  # noqa: ANN001
        pass


@settings(max_examples=40, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    tokens=st.integers(40, 200),
    block=st.sampled_from([1, 2, 4]),
    max_seqs=st.integers(1, 5),
    budget=st.integers(0, 40),
)
def test_not_retrying_a_blocked_head_changes_nothing(rows, shared, tokens, block, max_seqs, budget):
    """The shortcut skips retries that cannot succeed; every time must equal vLLM's retry-every-step."""
    requests = workload(rows, shared)
    config = V1Config(128, block, max_seqs, max_seqs + budget)
    fast, slow = (cls(cost_with(tokens), config).run(requests) for cls in (V1Scheduler, RetryingV1))
    assert [(s.id, s.first_token_t, s.finish_t) for s in fast.sequences] == [
        (s.id, s.first_token_t, s.finish_t) for s in slow.sequences
    ]
    assert (fast.steps, fast.preemptions, fast.hit_tokens) == (slow.steps, slow.preemptions, slow.hit_tokens)


@pytest.mark.parametrize("seed", [0, 3])
def test_v1_without_cache_and_budget_matches_the_papers_engine_even_when_it_preempts(seed):
    # vLLM V1 preempts the last request that started (`self.running.pop()`), like the papers' engine,
    # recomputes it, lets it come back before anything new, and admits nothing new in that step.
    # The papers' engine gets one block fewer: V1 keeps one out of use (the null block).
    cost = cost_with(3000)
    requests = poisson_workload("sharegpt", 80, 20.0, 1024, seed)
    paper = PaperScheduler(
        cost, PagedMemory(cost.kv_capacity_blocks(16) - 1, 16), PaperConfig(1024, max_batch_tokens=10**6)
    ).run(requests)
    today = V1Scheduler(cost, V1Config(1024, 16, token_budget=10**6, prefix_caching=False)).run(requests)
    assert paper.preemptions == today.preemptions > 50
    assert paper.recomputed_tokens == today.recomputed_tokens
    assert [s.finish_t for s in today.sequences] == pytest.approx([s.finish_t for s in paper.sequences])


def test_the_lab_opens_on_the_frame_that_shows_the_most_prefix_reuse():
    """Brute force over every step: the opening frame holds the most cached-or-shared cells (all
    modes together), and it holds some (a multi-turn workload reuses prefixes)."""
    result = make("schedulers", {"requests": "60"}).run()
    clock = result["timeline"]

    def reused(i: int) -> int:
        return sum(
            o in (-2, -3)
            for m, at in zip(result["modes"], clock["frames"])
            for o in m["trace"]["frames"][at[i]]["owner"]
        )

    counts = [reused(i) for i in range(len(clock["t"]))]
    assert counts[result["opening_step"]] == max(counts) > 0
    assert result["opening_step"] == counts.index(max(counts))  # the first such frame


def test_max_concurrency_and_the_batch_reached_by_hand():
    lab = make(
        "schedulers",
        {
            "workload": "fixed",
            "scenario": "B",
            "requests": "3",
            "rate": "1000",
            "prompt_len": "100",
            "output_len": "50",
            "cost_model": "roofline",
        },
    )
    r = lab.run()
    # the roofline's memory (measured pricing counts it as the engine does: test_measured_cost.py)
    # Llama-3-8B on H100-SXM: (72e9 - 2 x 8 029 995 008) B // 131 072 B = 426 788 tokens = 26 674 blocks of 16;
    # a request of the maximum length (8192 tokens) takes 512 of them
    assert r["kv_blocks"] == 426_788 // 16 == 26_674 and r["max_len"] == 8192
    assert r["max_concurrency"] == 26_674 / 512
    for m in r["modes"]:  # three requests arriving within 3 ms all decode together
        assert m["max_batch"] == 3 and m["end_usage_frac"] == 0.0
    capped = make("schedulers", {**{k: str(v) for k, v in lab.values().items() if k != "trace"}, "max_seqs": "2"}).run()
    assert [m["max_batch"] for m in capped["modes"]] == [2, 2, 2]
