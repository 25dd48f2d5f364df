"""The serving engine: hand-computed small runs and invariants over random small workloads."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.serving.memory.allocator import ALLOCATORS
from kvweb.serving.schedulers.paper_scheduler import PaperConfig, PaperScheduler
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.serving.memory.paged_memory import PagedMemory
from kvweb.serving.memory.reserved_memory import ReservedMemory
from kvweb.serving.load.workload import Request

COST = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])
KV = COST.model.kv_bytes_per_token


def record_steps(log: list) -> callable:
    def observer(engine: PaperScheduler, step: int) -> None:
        log.append((step, engine.now, sorted(engine.running), {s.id: len(s.blocks) for s in engine.running.values()}))

    return observer


def test_one_request_costs_a_prefill_then_one_decode_step_per_token():
    mm = PagedMemory(100, 4)
    log: list = []
    run = PaperScheduler(COST, mm, PaperConfig(max_len=2048, block_size=4)).run(
        [Request(0, 0.0, 10, 5)], observer=record_steps(log)
    )
    prefill = COST.prefill_cost(10)
    decodes = [COST.decode_step_cost(1, 10 + k) for k in range(1, 5)]  # contexts 11..14
    seq = run.sequences[0]
    assert seq.first_token_t == pytest.approx(prefill)
    assert seq.finish_t == pytest.approx(prefill + sum(decodes))
    assert run.steps == 5 and run.generated == 5
    # KV after each step: 10, 11, 12, 13, 14 tokens -> 3, 3, 3, 4, 4 blocks of 4
    assert [blocks[0] for *_, blocks in log[:-1]] + [4] == [3, 3, 3, 4, 4]
    times = [prefill, *decodes]
    assert run.used_s == pytest.approx(sum(kv * dt for kv, dt in zip(range(10, 15), times)))
    assert run.occupied_s == pytest.approx(sum(4 * b * dt for b, dt in zip([3, 3, 3, 4, 4], times)))
    assert mm.occupied == 0 and sorted(mm.free_blocks) == list(range(100))


def test_two_prefills_share_one_read_of_the_weights():
    run = PaperScheduler(COST, PagedMemory(100, 4), PaperConfig(max_len=2048)).run(
        [Request(0, 0.0, 20, 2), Request(1, 0.0, 30, 2)]
    )
    (f1, b1), (f2, b2) = COST.prefill_work(20), COST.prefill_work(30)
    first = COST.step_time(f1 + f2, b1 + b2 - COST.model.weight_bytes)
    second = COST.decode_step_cost(2, 21 + 31)
    assert run.sim_time == pytest.approx(first + second)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_the_latest_arrival_is_preempted_and_comes_back(mode):
    # 3 blocks of 4 tokens; two requests of prompt 4, output 6 (final KV 9 = 3 blocks each).
    # Step 1 prefills both (1 block each). Step 2 both need a 2nd block, one is free:
    # request 1 (the later) is preempted. Request 0 runs alone to its 6th token at step 6;
    # request 1 comes back at step 7 holding prompt + 1 generated = 5 tokens and finishes at 11.
    mm = PagedMemory(3, 4)
    log: list = []
    engine = PaperScheduler(COST, mm, PaperConfig(max_len=2048, block_size=4, preemption=mode))
    run = engine.run([Request(0, 0.0, 4, 6), Request(1, 0.0, 4, 6)], observer=record_steps(log))
    running = [ids for _, _, ids, _ in log]
    assert running == [[0, 1]] + [[0]] * 4 + [[]] + [[1]] * 4 + [[]]
    assert run.preemptions == 1 and run.steps == 11 and run.generated == 12
    if mode == "recompute":
        assert run.recomputed_tokens == 4 and run.swapped_bytes == 0
        step7 = COST.prefill_cost(5)
    else:
        assert run.recomputed_tokens == 0 and run.swapped_bytes == 2 * 4 * KV
        step7 = COST.decode_step_cost(1, 5) + COST.swap_cost(4, 4)
    assert log[6][1] - log[5][1] == pytest.approx(step7)
    assert engine.host_free == engine.host_blocks


def test_max_reservations_queue_the_third_request():
    # Arena of 100 tokens, Max reserves 40: two fit, the third waits for a range to free up.
    mm = ReservedMemory("max", ALLOCATORS["first-fit"](100), max_len=40)
    log: list = []
    run = PaperScheduler(COST, mm, PaperConfig(max_len=40)).run(
        [Request(i, 0.0, 5, 3) for i in range(3)], observer=record_steps(log)
    )
    assert [ids for _, _, ids, _ in log] == [[0, 1], [0, 1], [], [2], [2], []]
    t3, t6 = log[2][1], log[5][1]
    assert run.occupied_s == pytest.approx(80 * t3 + 40 * (t6 - t3))
    assert run.preemptions == 0


def test_requests_that_can_never_run_are_rejected_with_a_reason():
    requests = [Request(0, 0.0, 60, 10), Request(1, 0.5, 5, 5), Request(2, 1.0, 20, 20)]
    run = PaperScheduler(COST, PagedMemory(10, 4, watermark=0.2), PaperConfig(max_len=64)).run(requests)
    reasons = dict((r.id, why) for r, why in run.rejected)
    assert [s.id for s in run.sequences] == [1]
    assert "70 tokens exceeds the model's maximum length 64" in reasons[0]
    # request 2: final KV 39 tokens = 10 blocks, plus 2 kept free by the watermark > 10
    assert "needs 10 blocks" in reasons[2] and "watermark" in reasons[2]


def test_give_up_stops_a_hopeless_run():
    requests = [Request(i, 0.0, 500, 500) for i in range(40)]
    slo_run = PaperScheduler(COST, PagedMemory(780, 16), PaperConfig(max_len=2048), give_up_after=3).run(requests)
    assert slo_run.stopped_early and len(slo_run.sequences) < 40


# -- invariants over random small workloads ------------------------------------------------

# gaps of 0-50 ms against steps of ~20 ms: requests overlap, memory runs out, preemption happens
requests_st = st.lists(
    st.tuples(st.sampled_from([0.0, 0.0, 0.01, 0.05]), st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=10
)
config_st = st.fixed_dictionaries(
    {
        "memory": st.sampled_from(["paged", "paged", "max", "pow2", "oracle"]),
        "allocator": st.sampled_from(["first-fit", "buddy", "ideal"]),
        "block_size": st.sampled_from([1, 2, 3, 4, 8]),
        "tokens": st.integers(16, 64),
        "watermark": st.sampled_from([0.0, 0.1, 0.25]),
        "preemption": st.sampled_from(["recompute", "swap"]),
        "host_tokens": st.sampled_from([0, 8, 24, 64]),
        "max_seqs": st.integers(1, 6),
    }
)


class Checker:
    """Observes every step and checks the memory and scheduling invariants from outside."""

    def __init__(self, mm) -> None:
        self.mm = mm
        self.previous: set[int] = set()
        self.ever_ran: set[int] = set()
        self.checked_finished = 0
        self.victims: list[int] = []

    def __call__(self, engine: PaperScheduler, step: int) -> None:
        mm = self.mm
        running = engine.running
        assert list(running) == sorted(running), "running sequences out of arrival order"
        assert 0 <= mm.occupied <= mm.capacity
        assert 0 <= engine.host_free <= engine.host_blocks
        for seq in running.values():
            assert seq.kv(step) == seq.req.prompt + seq.generated(step) - 1
            assert seq.generated(step) < seq.req.output
        if isinstance(mm, PagedMemory):
            owned = [b for seq in running.values() for b in seq.blocks]
            assert sorted(owned + mm.free_blocks) == list(range(mm.n_blocks)), "a block lost or held twice"
            for seq in running.values():
                assert len(seq.blocks) == math.ceil(seq.kv(step) / mm.block_size)
        else:
            where = {h: (a, n) for h, a, n in mm.allocator.placed()}  # handle -> (start, length)
            ranges = sorted(where[s.start] for s in running.values())
            assert all(a + n <= b for (a, n), (b, _) in zip(ranges, ranges[1:])), "ranges overlap"
            assert all(0 <= a and a + n <= mm.capacity for a, n in ranges)
            for seq in running.values():
                assert seq.kv(step) <= where[seq.start][1]
        for seq in engine.finished[self.checked_finished :]:
            # the KV it held as it left (the loop's `_finish`): prompt + output - 1 means output tokens
            assert seq.computed == seq.final_kv, "finished with the wrong output length"
        self.checked_finished = len(engine.finished)
        now = set(running)
        victims = {s.id for s in engine.evicted} & self.previous
        if victims and now:
            assert max(now) < min(victims), "a victim was not the latest-arrived running request"
        self.victims += sorted(victims, reverse=True)
        fresh = now - self.previous - self.ever_ran
        assert not (fresh and engine.evicted), "new work admitted while preempted work waits"
        self.ever_ran |= now
        self.previous = now


@settings(max_examples=200, deadline=None)
@given(requests_st, config_st)
def test_invariants_hold_on_random_workloads(rows, cfg):
    t = 0.0
    requests = []
    for i, (gap, prompt, output) in enumerate(rows):
        t += gap
        requests.append(Request(i, t, prompt, output))
    bs = cfg["block_size"]
    if cfg["memory"] == "paged":
        mm = PagedMemory(cfg["tokens"] // bs, bs, cfg["watermark"])
    else:
        mm = ReservedMemory(cfg["memory"], ALLOCATORS[cfg["allocator"]](cfg["tokens"]), max_len=36)
    config = PaperConfig(
        max_len=36,
        preemption=cfg["preemption"],
        block_size=bs,
        max_seqs=cfg["max_seqs"],
        host_tokens=cfg["host_tokens"],
    )
    engine = PaperScheduler(COST, mm, config)
    checker = Checker(mm)
    run = engine.run(requests, observer=checker)
    finished = {s.id for s in run.sequences}
    rejected = {r.id for r, _ in run.rejected}
    assert finished | rejected == set(range(len(requests))) and not finished & rejected
    assert all(why for _, why in run.rejected)
    assert run.generated == sum(s.req.output for s in run.sequences)
    assert run.preemptions == len(checker.victims)
    assert mm.occupied == 0 and not mm.holders
    assert engine.host_free == engine.host_blocks
    if isinstance(mm, PagedMemory):
        assert sorted(mm.free_blocks) == list(range(mm.n_blocks))
    else:
        assert mm.allocator.holes() == [(0, mm.capacity)]
    for seq in run.sequences:
        assert seq.req.arrival <= seq.first_token_t <= seq.finish_t
        assert len(seq.spans) == 1 + sum(v == seq.id for v in checker.victims)
        # a preempted request sits out at least one step before it comes back
        assert all(end < start for (_, end), (start, _) in zip(seq.spans, seq.spans[1:]))
