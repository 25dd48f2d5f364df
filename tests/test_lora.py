"""LoRA adapters in vLLM V1 (kvweb/serving/memory/lora.py, issue 38 item 2): an adapter slot's
bytes counted by hand, the KV blocks the slots take, `max_loras` as vLLM's `schedule()` applies
it (a request whose adapter the batch has no room for waits, the ones behind it are still
tried), a cold adapter's load in the step's time, prefix caching keyed by adapter, the Zipf draw
of adapters, invariants over random workloads, and the lab's refusals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.lab import ParamError
from kvweb.labs.fleet import FleetLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.serving.load.workload import Request, poisson_workload, with_adapters
from kvweb.serving.memory.lora import AdapterSlots, LoraConfig, adapter_bytes, adapter_params
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from kvweb.prefix.served_workload import multi_turn_traffic
from test_schedulers import cost_with

LLAMA = MODELS["llama-3.1-8b"]
# rank 16 on q, k, v, o of Llama-3.1-8B (d 4096, 32 heads and 8 KV heads of 128, 32 layers): per layer
# q 16 x (4096 + 4096), k and v 16 x (4096 + 1024), o 16 x (4096 + 4096) = 425,984 parameters;
# x 32 layers = 13,631,488; x 2 bytes (bf16) = 27,262,976 bytes (26 MiB) a slot
RANK16_QKVO = 27_262_976


def test_rank_16_on_llama_3_1_8b_qkvo_by_hand():
    assert 16 * (4096 + 4096) * 2 + 16 * (4096 + 1024) * 2 == 425_984
    assert adapter_params(LLAMA, 16, "qkvo") == 425_984 * 32 == 13_631_488
    assert adapter_bytes(LLAMA, 16, "qkvo") == RANK16_QKVO == 26 * 2**20


def test_all_linear_and_tensor_parallel_by_hand():
    """gate and up 16 x (4096 + 14336), down 16 x (14336 + 4096): 884,736 more a layer. Under tp 2
    the column-parallel q, k, v split B's rows (out / 2), the row-parallel o A's columns (in / 2)."""
    assert adapter_bytes(LLAMA, 16, "all-linear") == (425_984 + 3 * 16 * 18_432) * 32 * 2 == 83_886_080
    per_layer = 16 * ((4096 + 2048) + 2 * (4096 + 512) + (2048 + 4096))
    assert adapter_bytes(LLAMA, 16, "qkvo", tp=2) == per_layer * 32 * 2 == 22_020_096


def test_a_slot_takes_13_blocks_of_llama_kv():
    """A token of Llama-3.1-8B's KV: 2 x 8 x 128 x 32 layers x 2 bytes = 131,072; a slot is 208
    tokens' worth, 13 blocks of 16, and max_loras slots take max_loras times that."""
    cost = CostModel(GPUS["H100-SXM"], LLAMA)
    assert cost.kv_bytes_per_token_per_gpu == 131_072 and RANK16_QKVO / 131_072 == 208
    for slots in (1, 4):
        assert LoraConfig(slots, 16).kv_blocks(cost, 16) == cost.kv_capacity_blocks(16) - 13 * slots


def lora_v1(max_loras: int, tokens: int = 8192, **config) -> V1Scheduler:
    """V1 on the paper GPU with `tokens` tokens of KV beside the adapters' slots."""
    lora = LoraConfig(max_loras, 16)
    slot_tokens = -(-max_loras * lora.slot_bytes(cost_with(16)) // cost_with(16).kv_bytes_per_token_per_gpu)
    cost = cost_with(tokens + slot_tokens)
    config = {"max_len": 2048, "prefix_caching": False, **config}
    return V1Scheduler(cost, V1Config(**config, lora=lora))


def first_steps(scheduler: V1Scheduler, requests: list[Request]) -> dict[int, int]:
    """Request id -> the step it was first scheduled in."""
    started: dict[int, int] = {}

    def seen(s: V1Scheduler, step: int) -> None:
        for seq in [*s.running.values(), *s.prefilling]:
            started.setdefault(seq.id, step)
        assert len({q.req.adapter for q in [*s.running.values(), *s.prefilling]} - {0}) <= s.config.lora.max_loras

    scheduler.run(requests, observer=seen)
    return started


def test_a_request_whose_adapter_has_no_slot_waits_and_the_ones_behind_it_run():
    """max_loras 1: requests of adapters 1, 2, 1 at once. Step 1 admits the first; the second's
    adapter makes two, so it is skipped and stays waiting; the third (adapter 1) joins in the
    same step. The second starts in step 5, after both have finished (output 4: steps 1-4)."""
    reqs = [Request(0, 0.0, 20, 4, adapter=1), Request(1, 0.0, 20, 4, adapter=2), Request(2, 0.0, 20, 4, adapter=1)]
    s = lora_v1(1)
    assert first_steps(s, reqs) == {0: 1, 2: 1, 1: 5}
    assert s.adapters.loads == 2  # adapter 1, then 2 into the one slot
    both = lora_v1(2)
    assert first_steps(both, reqs) == {0: 1, 1: 1, 2: 1}


def test_a_cold_adapter_load_is_in_the_step_time():
    """Two slots, adapters 1 then 2: each first scheduling copies a slot's bytes over the host link;
    the base model's requests load nothing. The first step waits bytes / link more."""
    reqs = [Request(0, 0.0, 20, 4, adapter=1), Request(1, 0.0, 20, 4, adapter=2)]
    s = lora_v1(2)
    s.run(reqs)
    each = s.config.lora.slot_bytes(s.cost) / s.cost.link
    assert s.adapters.loads == 2 and s.adapters.load_s == pytest.approx(2 * each)
    base = lora_v1(2)
    times: list[float] = []
    base.run([Request(0, 0.0, 20, 4), Request(1, 0.0, 20, 4)], observer=lambda q, step: times.append(q.now))
    timed: list[float] = []
    lora_v1(2).run(reqs, observer=lambda q, step: timed.append(q.now))
    assert base.adapters.loads == 0
    assert timed[0] == pytest.approx(times[0] + 2 * each) and timed[1] - timed[0] == pytest.approx(times[1] - times[0])


def test_slots_evict_the_least_recently_used_adapter_no_running_request_uses():
    slots = AdapterSlots(LoraConfig(2, 16), cost_with(4096))
    assert slots.join(1) > 0 and slots.join(2) > 0 and slots.join(1) == 0
    slots.leave(2)
    slots.leave(1)
    slots.leave(1)  # 2 left first: least recently used
    assert slots.admits(3) and slots.join(3) > 0 and list(slots.resident) == [1, 3]
    assert not slots.admits(4) or len(slots.users) < 2


def test_a_prefix_cached_under_one_adapter_is_no_hit_for_another():
    """Two requests of the same 64 tokens, one after the other: under the same adapter the second
    finds 3 blocks of 16 (at most prompt - 1 tokens), under another none."""
    tokens = np.arange(100, dtype=np.int64)
    for second, hit in ((1, 48), (2, 0)):
        s = lora_v1(2, prefix_caching=True)
        reqs = [Request(0, 0.0, 64, 4, tokens[:68], adapter=1), Request(1, 5.0, 64, 4, tokens[:68], adapter=second)]
        run = s.run(reqs)
        assert run.hit_tokens == hit


def test_adapters_drawn_by_zipf_and_kept_by_a_chat_session():
    reqs = poisson_workload("fixed", 4000, 10.0, 2048, 3)
    assert with_adapters(reqs, 0, 3) is reqs
    drawn = [r.adapter for r in with_adapters(reqs, 4, 3)]
    assert drawn == [r.adapter for r in with_adapters(reqs, 4, 3)]  # seeded
    counts = np.bincount(drawn, minlength=5)[1:]
    share = counts / counts.sum()  # 1 / i over 1 + 1/2 + 1/3 + 1/4 = 25/12: 0.48, 0.24, 0.16, 0.12
    assert np.allclose(share, [12 / 25, 6 / 25, 4 / 25, 3 / 25], atol=0.02)
    chats = with_adapters(multi_turn_traffic(60, 2.0, 0, 6, 200, 50, 64, 5.0), 8, 0)
    adapter = {r.id: r.adapter for r in chats}
    assert all(r.adapter == adapter[r.after] for r in chats if r.after is not None)
    assert len(set(adapter.values())) > 1


@settings(max_examples=25, deadline=None)
@given(
    max_loras=st.integers(1, 3),
    loras=st.integers(1, 6),
    seed=st.integers(0, 1000),
    caching=st.booleans(),
)
def test_every_request_finishes_and_a_batch_never_holds_more_than_max_loras(max_loras, loras, seed, caching):
    reqs = with_adapters(poisson_workload("sharegpt", 40, 20.0, 2048, seed), loras, seed)
    s = lora_v1(max_loras, tokens=4096, prefix_caching=caching)
    first_steps(s, reqs)  # (asserts the batch's adapters every step)
    assert len(s.finished) == len(reqs)
    assert len(s.adapters.resident) <= max_loras and not s.adapters.users
    assert s.adapters.loads >= len({r.adapter for r in reqs})


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), max_loras=st.integers(1, 3), caching=st.booleans())
def test_one_adapter_runs_as_the_base_model_on_the_same_pool(seed, max_loras, caching):
    """Every request of adapter 1 (always admitted, all prefixes under one key) on a host link so fast
    that the load is free: the same run, step for step, as today's scheduler on a pool of as many blocks."""
    reqs = [replace(r, adapter=1) for r in multi_turn_traffic(40, 8.0, seed, 4, 200, 50, 64, 1.0)]
    lora = lora_v1(max_loras, tokens=2048, prefix_caching=caching)
    lora.adapters.load_s_each = 0.0
    base = V1Scheduler(cost_with(lora.pool.n_blocks * 16 + 16), V1Config(max_len=2048, prefix_caching=caching))
    assert base.pool.n_blocks == lora.pool.n_blocks
    a, b = lora.run(reqs), base.run([replace(r, adapter=0) for r in reqs])
    assert (a.steps, a.preemptions, a.hit_tokens, a.generated) == (b.steps, b.preemptions, b.hit_tokens, b.generated)
    assert [q.first_token_t for q in a.sequences] == [q.first_token_t for q in b.sequences]
    assert lora.adapters.loads == 1


def test_the_lab_runs_adapters_in_vllm_v1_and_sglang():
    result = SchedulersLab(loras=4, max_loras=2, lora_rank=16, requests=60).run()
    v1, sglang = result["modes"]
    assert (v1["mode"], sglang["mode"]) == ("vllm-v1", "sglang") and set(result["refused"]) == {"paper"}
    assert sglang["lora"]["slot_bytes"] == v1["lora"]["slot_bytes"] and sglang["lora"]["loads"] >= 1
    lora = v1["lora"]
    assert lora["max_loras"] == 2 and lora["kv_blocks"] < result["kv_blocks"]
    assert lora["slot_bytes"] == adapter_bytes(SchedulersLab().setup().cost_model().model, 16, "qkvo")
    assert lora["loads"] >= 1
    with pytest.raises(ParamError, match="loras: 4 is not allowed with spec_tokens 2"):
        SchedulersLab(loras=4, spec_tokens=2).check()
    with pytest.raises(ParamError, match="loras: 2 is not allowed with mode paper; .* vllm-v1 and sglang only"):
        FleetLab(loras=2, mode="paper").check()
    with pytest.raises(ParamError, match="loras: 2 is not allowed with model gpt-oss-20b; its layers are not all full"):
        SchedulersLab(loras=2, model="gpt-oss-20b").check()
    with pytest.raises(ParamError, match=r"model mixtral-8x7b; it is a mixture of experts.*\(use lora_targets qkvo\)"):
        SchedulersLab(loras=2, model="mixtral-8x7b", lora_targets="all-linear").check()
    with pytest.raises(ParamError, match="max_loras: 64 is not allowed; 64 slots of rank 256 leave no KV cache"):
        SchedulersLab(loras=2, max_loras=64, lora_rank=256, lora_targets="all-linear").check()
    SchedulersLab(loras=2, model="mixtral-8x7b", scenario="B", tp=2).check()  # its attention's adapters are


def test_the_exercise_answers_13_blocks_a_slot_and_max_loras_the_limit():
    """Exercise lora-slots (Llama-3.1-8B on an H100, 8 adapters of rank 16): a slot is 13 blocks, eight
    take 104 of the KV cache's; one slot per batch makes the first token wait far longer than eight."""
    from kvweb.exercises import BY_KEY

    exercise = BY_KEY["lora-slots"]
    answer = exercise.solve(exercise.make_lab(), lambda f, m: None)
    v = answer.values
    assert v["slot_bytes"] == RANK16_QKVO and exercise.check.expected(answer) == 13
    assert v["kv_blocks_without"] - v["yours"]["kv_blocks"] == 13
    assert v["kv_blocks_without"] - v["every_adapter"]["kv_blocks"] == 104
    assert v["every_adapter"]["loads"] == 8 < v["yours"]["loads"]
    assert v["yours"]["ttft_p50_s"] > 10 * v["every_adapter"]["ttft_p50_s"]


def test_the_trace_says_which_adapter_each_slot_holds_at_each_step():
    """max_loras 2, adapters 1 (4 tokens out), 2 (12) and 3 (4) at once, and 1 again (4) arriving in
    step 7. Step 1: adapters 1 and 2 take slots 0 and 1, 3 is skipped (one waiting). Step 5 (1's
    request left after step 4): 3 takes the slot of 1, the least recently used adapter no running
    request uses. The second request of 1 arrives in step 7 and is skipped in step 8; 3's request
    left after step 8, so in step 9 adapter 1 is loaded again into slot 0, where 3 was: 4 loads.
    Sampled in the middle of each step (a step's admissions are noted at its start)."""
    reqs = [
        Request(0, 0.0, 20, 4, adapter=1),
        Request(1, 0.0, 20, 12, adapter=2),
        Request(2, 0.0, 20, 4, adapter=3),
        Request(3, 0.15, 20, 4, adapter=1),
    ]
    s = lora_v1(2)
    ends: list[float] = []
    s.run(reqs, observer=lambda q, step: ends.append(q.now))
    assert 0.15 < ends[6] and ends[5] < 0.15  # it arrives in step 7
    middles = [(start + end) / 2 for start, end in zip([0.0, *ends[:-1]], ends)]
    shown = s.adapters.figures(0, middles)
    assert shown["slots"] == [[1, 2]] * 4 + [[3, 2]] * 4 + [[1, 2]] * 4
    assert shown["skipped"] == [1] * 4 + [0, 0, 0, 1] + [0] * 4
    assert shown["in_slots"] == [2] * 12 and s.adapters.loads == 4
