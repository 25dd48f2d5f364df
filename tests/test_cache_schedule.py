"""Cache-aware scheduling: the facts of SPEC 5 on fixed seeds, and order-free invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.prefix.cache_schedule import (
    POLICIES,
    RadixServer,
    capacity_grid,
    hit_rate,
    optimal,
    prefill_seconds,
    simulate,
    summary,
)
from kvweb.prefix.cache_workload import Request, few_shot, multi_turn
from kvweb.gpu import GPUS, MODELS, CostModel

QUEUE = 32
FEW_SHOT = few_shot(
    tasks=8, per_task=16, system_len=100, examples_len=400, question_len=30, output_len=20, seed=0, order="round-robin"
)  # the worst case for LRU, pinned by the figures below
CHAT = multi_turn(sessions=32, turns=6, system_len=100, question_len=30, answer_len=20, gap=5, seed=0)


def run(requests, capacity: int, policy: str, alpha: float = 20.0) -> dict:
    return summary(simulate(requests, RadixServer(capacity), policy, QUEUE, alpha))


def test_lspf_far_above_fcfs_and_near_the_optimum_when_tasks_do_not_fit() -> None:
    capacity = 2000
    assert 100 + 8 * 400 > capacity  # the system prompt and every task's examples do not fit
    fcfs, lspf = run(FEW_SHOT, capacity, "fcfs"), run(FEW_SHOT, capacity, "lspf")
    best = hit_rate(optimal(FEW_SHOT, capacity))
    # FCFS round-robins the tasks through LRU: only the system prompt survives, 100 of 530 tokens
    assert fcfs["hit_rate"] == pytest.approx(100 / 530, abs=0.01)
    assert lspf["hit_rate"] > 4 * fcfs["hit_rate"]
    assert lspf["hit_rate"] >= 0.9 * best
    # chat: 32 sessions of up to 400 tokens in 2000; FCFS keeps about the system prompt only
    chat_fcfs, chat_lspf = run(CHAT, capacity, "fcfs"), run(CHAT, capacity, "lspf")
    assert chat_lspf["hit_rate"] > 2 * chat_fcfs["hit_rate"]
    assert chat_lspf["hit_rate"] >= 0.9 * hit_rate(optimal(CHAT, capacity))


@pytest.mark.parametrize("requests", [FEW_SHOT, CHAT], ids=["few-shot", "multi-turn"])
def test_with_a_huge_cache_every_order_ties(requests) -> None:
    rates = {p: run(requests, 10**6, p)["hit_rate"] for p in POLICIES}
    rates["optimal"] = hit_rate(optimal(requests, 10**6))
    assert max(rates.values()) - min(rates.values()) < 1e-12, rates


def test_a_cache_smaller_than_the_requests_hits_nothing() -> None:
    length = len(FEW_SHOT[0].tokens)
    assert {len(r.tokens) for r in FEW_SHOT} == {length}  # 550 tokens each
    for policy in POLICIES:
        assert run(FEW_SHOT, length - 1, policy)["hit_rate"] == 0.0
    assert hit_rate(optimal(FEW_SHOT, length - 1)) == 0.0
    assert run(FEW_SHOT, length, "fcfs")["hit_rate"] > 0.1  # one request fits: its system prompt stays


@pytest.mark.parametrize("requests", [FEW_SHOT, CHAT], ids=["few-shot", "multi-turn"])
def test_fcfs_waits_at_most_queue_minus_one_lspf_longer_and_aging_bounds_it(requests) -> None:
    capacity, alpha = 2000, 20.0
    fcfs, lspf, aging = (run(requests, capacity, p, alpha) for p in ("fcfs", "lspf", "aging"))
    assert fcfs["max_wait"] <= QUEUE - 1
    # A request waiting w steps outranks every request that entered more than L/alpha steps
    # after it (L: the longest prompt), so at most queue-1 + L/alpha go first.
    longest = max(len(r.prompt) for r in requests)
    bound = QUEUE - 1 + math.floor(longest / alpha)
    assert aging["max_wait"] <= bound
    assert lspf["max_wait"] > bound
    assert aging["hit_rate"] > fcfs["hit_rate"]


def test_capacity_grid_spans_half_the_shortest_request_to_the_distinct_tokens() -> None:
    grid = capacity_grid(FEW_SHOT, 6)
    distinct = 100 + 8 * 400 + 128 * (30 + 20)  # the tree when nothing is ever evicted
    assert grid[0] == 275 and grid[-1] == distinct and len(grid) == 6


def test_prefill_seconds_use_the_cost_model_and_save_less_than_the_hit_rate() -> None:
    cost = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])
    served = simulate(FEW_SHOT, RadixServer(2000), "lspf", QUEUE)
    none, cached = prefill_seconds(served[:1] + served[5:6], cost)
    s = served[5]
    assert s.matched > 0
    assert none == pytest.approx(cost.prefill_cost(530) * 2)
    assert cached == pytest.approx(cost.prefill_cost(530) + cost.prefill_cost(530 - s.matched, s.matched))
    none, cached = prefill_seconds(served, cost)
    assert 0 < 1 - cached / none < hit_rate(served)


small_workloads = st.one_of(
    st.builds(
        few_shot,
        st.integers(1, 4),
        st.integers(1, 4),
        st.integers(0, 6),
        st.integers(0, 6),
        st.integers(1, 4),
        st.integers(1, 4),
        st.integers(0, 99),
    ),
    st.builds(
        multi_turn,
        st.integers(1, 4),
        st.integers(1, 4),
        st.integers(0, 6),
        st.integers(1, 4),
        st.integers(1, 4),
        st.integers(0, 3),
        st.integers(0, 99),
    ),
)


@settings(max_examples=60, deadline=None)
@given(requests=small_workloads, capacity=st.integers(1, 60), queue=st.integers(1, 5), policy=st.sampled_from(POLICIES))
def test_every_request_is_served_once_and_fcfs_respects_the_queue(requests, capacity, queue, policy) -> None:
    served = simulate(requests, RadixServer(capacity), policy, queue, alpha=2.0)
    assert sorted(s.rid for s in served) == [r.rid for r in requests]
    assert all(0 <= s.matched <= s.prompt_len and s.cached <= capacity for s in served)
    steps = [s.step for s in served]
    assert steps == sorted(set(steps))  # one request per step
    finished = {s.rid: s.step + 1 for s in served}
    for r in requests:  # a later turn never starts before the previous one finished + gap
        if r.after is not None:
            assert next(s.step for s in served if s.rid == r.rid) >= finished[r.after] + r.delay
    if policy == "fcfs":
        assert max(s.wait for s in served) <= queue - 1


@settings(max_examples=40, deadline=None)
@given(requests=small_workloads, queue=st.integers(1, 5))
def test_with_room_for_everything_the_order_does_not_matter(requests, queue) -> None:
    room = sum(len(r.tokens) for r in requests)
    rates = {hit_rate(simulate(requests, RadixServer(room), p, queue)) for p in POLICIES}
    rates.add(hit_rate(optimal(requests, room)))
    assert max(rates) - min(rates) < 1e-12


shared_prompts = st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=10), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(prompts=shared_prompts, output_len=st.integers(0, 3), extra=st.integers(0, 6))
def test_depth_first_order_reaches_the_prefix_tree_optimum(prompts, output_len: int, extra: int) -> None:
    """SGLang's Theorem 3.1: with a cache that holds the longest request, serving in the
    depth-first order of the prompts' prefix tree computes each distinct prompt position
    exactly once. The optimum here is counted from the tree alone, not from a cache."""
    outputs = iter(range(100, 100 + len(prompts) * output_len))  # never part of a prompt
    requests = [
        Request(i, np.array(p), np.array([next(outputs) for _ in range(output_len)], dtype=np.int64), 0)
        for i, p in enumerate(prompts)
    ]
    distinct = {tuple(p[:i]) for p in prompts for i in range(1, len(p) + 1)}
    best_hits = sum(map(len, prompts)) - len(distinct)
    capacity = max(len(r.tokens) for r in requests) + extra
    assert sum(s.matched for s in optimal(requests, capacity)) == best_hits


def test_fcfs_hit_rate_does_not_fall_as_the_few_shot_cache_grows() -> None:
    """Issue 10's symptom: with locks covering whole edges, FCFS lost hits as the cache grew."""
    longest = max(len(r.tokens) for r in FEW_SHOT)
    rates = [hit_rate(simulate(FEW_SHOT, RadixServer(c), "fcfs", QUEUE)) for c in (longest, 1200, 2000, 4000)]
    assert rates == sorted(rates)
    assert hit_rate(optimal(FEW_SHOT, longest)) == pytest.approx(
        1 - (100 + 8 * 400 + 128 * 30) / (128 * 530)
    )  # system once, each task's examples once


def test_caching_prompts_only_needs_one_token_pages():
    with pytest.raises(ValueError, match="one-token pages"):
        RadixServer(64, 4, cache_answers=False)
