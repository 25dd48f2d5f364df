"""LoRA adapters in the SGLang mode (kvweb/serving/memory/lora.py `BatchSlots`, radix_scheduler.py):
`max_loras_per_batch` as SGLang 0.5.23's `_get_new_batch_prefill_raw` applies it (the base model
counts as an adapter; a request with no room is skipped in its place), the slots filled per forward
batch (a prefill batch may evict a running request's adapter, the next decode batch loads it
again), the radix tree keyed by adapter, and invariants over random workloads. The admission rule
is also replayed against SGLang's own code in tests/test_parity_sglang.py (the lora-round-* rounds)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.radix_cache import RadixCache
from dataclasses import replace

from kvweb.prefix.served_workload import multi_turn_traffic
from kvweb.serving.load.workload import Request, poisson_workload, with_adapters
from kvweb.serving.memory.lora import AdapterSlots, BatchSlots, LoraConfig
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler

COST = CostModel(GPUS["A100-80GB"], MODELS["llama-3.1-8b"])


def lora_sglang(max_loras: int, tokens: int = 8192, **config) -> RadixScheduler:
    return RadixScheduler(COST, RadixCache(tokens), RadixConfig(4096, lora=LoraConfig(max_loras), **config))


def lora_vllm(max_loras: int) -> V1Scheduler:
    return V1Scheduler(COST, V1Config(4096, lora=LoraConfig(max_loras)))


def first_steps(scheduler, requests: list[Request]) -> dict[int, int]:
    """Request id -> the step it was first scheduled in (vLLM's running and prefilling requests,
    SGLang's running and chunked ones)."""
    started: dict[int, int] = {}

    def seen(s, step: int) -> None:
        chunked = getattr(s, "chunked", None)
        for seq in [*s.running.values(), *getattr(s, "prefilling", ()), *([chunked] if chunked else [])]:
            started.setdefault(seq.id, step)

    scheduler.run(requests, observer=seen)
    return started


def test_the_base_model_counts_in_sglang_not_in_vllm():
    """Requests of the base model (0), adapter 1, adapter 2, adapter 1 (prompt 20, output 8),
    max_loras 2, all waiting. vLLM counts adapters only ({1, 2}): all four start in step 1. SGLang
    counts the base model too (validate_lora_batch of {None, lora1, lora2}: 3 > 2): request 2 is
    skipped in its place and request 3, behind it, still starts (SGLang 0.5.23 `continue`s, it does
    not stop the round); request 2 starts in step 9, once the others' 8 tokens (a prefill, then 7
    decode steps) are done."""
    reqs = [Request(i, 0.0, 20, 8, adapter=a) for i, a in enumerate((0, 1, 2, 1))]
    assert first_steps(lora_vllm(2), reqs) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert first_steps(lora_sglang(2), reqs) == {0: 1, 1: 1, 3: 1, 2: 9}


def test_a_skipped_request_stays_in_place_and_does_not_fill_the_batch():
    """Adapters 1, 2, 3, 1, 4 with max_loras_per_batch 2: 1 and 2 run, 3 is skipped, the second
    request of 1 runs, 4 is skipped; both wait at the front, in order, and the batch is not full."""
    s = lora_sglang(2)
    reqs = [Request(i, 0.0, 20, 8, adapter=a) for i, a in enumerate((1, 2, 3, 1, 4))]
    seen = []
    s.run(reqs, observer=lambda q, step: step == 1 and seen.append((sorted(q.running), [w.id for w in q.waiting])))
    assert seen == [([0, 1, 3], [2, 4])]
    assert s.adapters.loads == 4  # 1 and 2, then 3 and 4 once both are done


def test_a_prefill_batch_evicts_a_running_adapter_and_the_decode_batch_loads_it_again():
    """Two slots, the base model in the first (SGLang's init_memory_pool). A prefill batch of
    adapter 1 takes the empty slot; a prefill batch of 2 while 1's request runs: the batch needs only
    2, so the least recently used adapter not in it goes (1, preferred to the base model); the decode
    batch of 1 and 2 then loads 1 again into the base model's slot: 3 loads. vLLM's slots keep a
    running adapter: 2 loads."""
    cfg = LoraConfig(2)
    sglang = BatchSlots(cfg, COST)
    assert sglang.slot == [0, 0] and sglang.base_at == 0
    assert sglang.fetch({1}) == sglang.load_s_each and sglang.slot == [0, 1]
    sglang.fetch({2})
    assert sglang.slot == [0, 2] and sglang.base_at == 0
    assert sglang.fetch({1, 2}) == sglang.load_s_each and sglang.slot == [1, 2] and sglang.base_at is None
    assert sglang.loads == 3
    vllm = AdapterSlots(cfg, COST)
    vllm.join(1), vllm.join(2)
    assert vllm.loads == 2 and sorted(vllm.resident) == [1, 2]


def test_eviction_takes_the_least_recently_used_adapter_the_batch_does_not_use():
    """Three slots: batches {1, 2}, {1}, {3}: the base model's slot is kept while an adapter's can go;
    3 evicts 2 (used before 1's last batch)."""
    s = BatchSlots(LoraConfig(3), COST)
    s.fetch({1, 2})
    s.fetch({1})
    s.fetch({3})
    assert sorted(s.resident) == [0, 1, 3] and s.loads == 3


def test_a_prefix_cached_under_one_adapter_is_no_hit_for_another():
    """The same 200-token prompt three times, one after the other: under adapter 1, then 2 (nothing
    cached under 2: no hit), then 1 again (199 tokens: the match stops a token short)."""
    tokens = np.arange(300, dtype=np.int64)
    reqs = [Request(i, 10.0 * i, 200, 100, tokens=tokens, adapter=a) for i, a in enumerate((1, 2, 1))]
    s = lora_sglang(2)
    s.run(reqs)
    assert [q.hit for q in sorted(s.finished, key=lambda q: q.id)] == [0, 0, 199]
    assert s.cached_prefix(tokens[:200], 1) == 200 and s.cached_prefix(tokens[:200], 2) == 200
    assert s.cached_prefix(tokens[:200], 3) == 0 and s.cached_prefix(tokens[:200]) == 0


@settings(max_examples=20, deadline=None)
@given(
    max_loras=st.integers(1, 3),
    loras=st.integers(1, 6),
    seed=st.integers(0, 1000),
    mixed=st.booleans(),
)
def test_a_batch_never_holds_more_than_max_loras_adapters_and_every_request_finishes(max_loras, loras, seed, mixed):
    """Over random workloads: after every step the running and chunked requests use at most
    max_loras_per_batch adapters (the base model's counted) and are the ones `users` counts, the
    slots hold at most max_loras_per_batch, and everything finishes."""
    reqs = with_adapters(poisson_workload("sharegpt", 40, 20.0, 2048, seed), loras, seed)
    s = lora_sglang(max_loras, tokens=6000, chunk_size=256, mixed_chunk=mixed)

    def check(q, step):
        used = {x.req.adapter for x in q.running.values()} | ({q.chunked.req.adapter} if q.chunked else set())
        assert len(used) <= max_loras and len(q.adapters.resident) <= max_loras
        assert set(q.adapters.users) == used

    s.run(reqs, observer=check)
    assert len(s.finished) == len(reqs) and not s.adapters.users


def sequence_figures(run) -> tuple:
    return (
        run.steps,
        run.preemptions,
        run.hit_tokens,
        [(q.first_token_t, q.finish_t) for q in run.sequences],
    )


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 1000),
    max_loras=st.integers(1, 3),
    loras=st.integers(2, 6),
    mixed=st.booleans(),
    chunk=st.sampled_from((8192, 64)),
)
def test_the_shortcuts_over_skipped_requests_change_nothing(seed, max_loras, loras, mixed, chunk):
    """`passed_over` (a round that would skip everyone again is not run, its decode steps quiet) and
    `_tried` (with the batch's adapters at max_loras_per_batch only their requests are tried, the
    skipped counted from the places): the same runs, step for step, and the same requests skipped at
    every step, as with every round run over the whole queue (chat sessions sharing system prompts,
    so the skipped rounds' matches stamp the tree), on a pool small enough to evict, in chunks small
    enough that the budget stops rounds."""
    reqs = with_adapters(multi_turn_traffic(40, 8.0, seed, 4, 200, 50, 64, 1.0), loras, seed)
    config = {"mixed_chunk": mixed, "chunk_size": chunk}
    memo, every = lora_sglang(max_loras, 3000, **config), lora_sglang(max_loras, 3000, **config)
    every._queue_state = object  # never the same: every round runs
    every._tried = enumerate  # over every waiting request
    a, b = memo.run(reqs), every.run(reqs)
    assert sequence_figures(a) == sequence_figures(b)
    assert memo.adapters.loads == every.adapters.loads and memo.adapters.changes == every.adapters.changes


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), max_loras=st.integers(1, 3))
def test_one_adapter_runs_as_the_base_model_on_the_same_pool(seed, max_loras):
    """Every request of adapter 1 (always admitted, all prefixes under one key) with a free load: the
    same run, step for step, as SGLang without adapters on a pool of as many slots."""
    reqs = [replace(r, adapter=1) for r in multi_turn_traffic(40, 8.0, seed, 4, 200, 50, 64, 1.0)]
    lora = lora_sglang(max_loras, 3000)
    lora.adapters.load_s_each = 0.0
    base = RadixScheduler(COST, RadixCache(3000), RadixConfig(4096))
    a, b = lora.run(reqs), base.run([replace(r, adapter=0) for r in reqs])
    assert sequence_figures(a) == sequence_figures(b) and lora.adapters.loads == 1


def test_the_lab_runs_adapters_in_vllm_and_sglang_and_says_what_each_kept():
    """Scenario A with 8 adapters and max_loras 2: the papers' engine is refused, SGLang's pool is
    the GPU's token slots less the two slots' bytes."""
    lab = SchedulersLab(scenario="A", loras=8, max_loras=2, requests=60)
    modes = {m["mode"]: m for m in lab.run()["modes"]}
    assert "lora" in modes["vllm-v1"] and "lora" in modes["sglang"] and "lora" not in modes.get("paper", {})
    sglang = modes["sglang"]["lora"]
    cost = lab.scheduler_cost("sglang")
    assert (
        sglang["kv_tokens"]
        == LoraConfig(2).kv_tokens(cost)
        == int((cost.kv_bytes_free_per_gpu - 2 * sglang["slot_bytes"]) // cost.kv_bytes_per_token_per_gpu)
    )
    assert modes["sglang"]["finished"] == 60
