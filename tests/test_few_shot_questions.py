"""Few-shot questions of varying length: question_sigma 0 is the old fixed length, byte for byte;
above 0 lognormal lengths of mean question_len, the prompts' shared parts unchanged."""

import numpy as np
from hypothesis import given, settings, strategies as st

import kvweb.labs  # noqa: F401
from kvweb.parsing import make
from kvweb.prefix.cache_workload import few_shot, question_lengths


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(0, 6),
    st.integers(0, 6),
    st.integers(1, 9),
    st.floats(0.1, 2.0),
    st.integers(0, 99),
    st.sampled_from(["random", "round-robin"]),
)
def test_varied_questions_keep_the_shared_parts_and_the_order(
    tasks, per_task, system_len, examples_len, mean, sigma, seed, order
):
    sizes = (tasks, per_task, system_len, examples_len, mean, 3, seed, order)
    fixed, varied = few_shot(*sizes), few_shot(*sizes, question_sigma=sigma)
    shared = system_len + examples_len
    assert [r.group for r in fixed] == [r.group for r in varied]  # the same arrival order
    assert all(np.array_equal(a.output, b.output) for a, b in zip(fixed, varied))  # and answers
    assert all(np.array_equal(a.prompt[:shared], b.prompt[:shared]) for a, b in zip(fixed, varied))
    drawn = question_lengths(tasks * per_task, mean, sigma, seed)
    assert min(drawn) >= 1
    assert sorted(len(r.prompt) - shared for r in varied) == sorted(drawn)
    assert all(len(r.prompt) == shared + mean for r in fixed)


def test_sigma_zero_is_the_old_workload():
    old = few_shot(8, 16, 100, 400, 30, 20, 0)
    same = few_shot(8, 16, 100, 400, 30, 20, 0, question_sigma=0.0)
    assert all(np.array_equal(a.tokens, b.tokens) for a, b in zip(old, same))
    assert make("cache-schedule", {}).question_sigma == 0.0  # old URLs keep their meaning


def test_lognormal_questions_have_the_asked_mean_and_a_long_tail():
    # 100 000 draws of mean 30, sigma 1: the sample mean within 1 % (its standard error is 0.4 %),
    # the median near 30 x exp(-1/2) = 18.2 and the 99th percentile near 30 x exp(-1/2 + 2.326) = 186
    drawn = np.array(question_lengths(100_000, 30, 1.0, 0))
    assert abs(drawn.mean() - 30) < 0.3
    assert 17 <= np.median(drawn) <= 19.5
    assert 175 <= np.percentile(drawn, 99) <= 197
