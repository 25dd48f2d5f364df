"""Few-shot arrival order: the lecture's seeded random order by default, round-robin as an option."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kvweb.labs  # noqa: F401
from kvweb.prefix.cache_workload import few_shot
from kvweb.lab import LABS
from kvweb.parsing import make


def signature(requests):
    return sorted((r.group, r.prompt.tolist(), r.output.tolist()) for r in requests)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 5), st.integers(1, 5), st.integers(0, 5), st.integers(0, 5), st.integers(1, 4), st.integers(0, 99)
)
def test_both_orders_hold_the_same_requests(tasks, per_task, system_len, examples_len, question_len, seed):
    sizes = (tasks, per_task, system_len, examples_len, question_len, 3, seed)
    shuffled, interleaved = few_shot(*sizes), few_shot(*sizes, order="round-robin")
    assert signature(shuffled) == signature(interleaved)
    assert [r.rid for r in shuffled] == list(range(tasks * per_task))  # rid is the arrival position
    assert [r.group for r in interleaved] == [i % tasks for i in range(tasks * per_task)]
    assert all(r.arrival == 0 and r.after is None for r in shuffled)  # all present at start


def test_random_order_is_seeded_and_not_round_robin():
    a, b = few_shot(8, 16, 10, 20, 5, 4, seed=0), few_shot(8, 16, 10, 20, 5, 4, seed=0)
    assert [r.group for r in a] == [r.group for r in b]
    assert all(np.array_equal(x.prompt, y.prompt) for x, y in zip(a, b))
    other = few_shot(8, 16, 10, 20, 5, 4, seed=1)
    assert [r.group for r in a] != [r.group for r in other]
    assert [r.group for r in a] != [i % 8 for i in range(128)]
    assert sorted(r.group for r in a) == sorted(i % 8 for i in range(128))  # 16 of each task


def test_the_labs_default_is_random_and_round_robin_is_an_option():
    assert LABS["cache-schedule"]().order == "random"
    rr = make("cache-schedule", {"order": "round-robin", "tasks": "4", "per_task": "2"})
    assert [r.group for r in rr.requests()] == [0, 1, 2, 3, 0, 1, 2, 3]
    with pytest.raises(ValueError, match="order must be one of random, round-robin"):
        few_shot(2, 2, 1, 1, 1, 1, 0, order="sorted")


def test_round_robin_is_the_worst_case_for_lru_fcfs():
    # Capacity for about one task's prefix: round-robin evicts each task's examples before its
    # next request comes, so FCFS hits less than in the random order.
    texts = {"workload": "few-shot", "policy": "fcfs", "capacity": "1200"}
    shuffled = make("cache-schedule", texts).run()["hit_rate"]
    interleaved = make("cache-schedule", {**texts, "order": "round-robin"}).run()["hit_rate"]
    assert interleaved < shuffled
