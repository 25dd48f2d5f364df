"""The max-rate search: brackets the answer by doubling or halving, then bisects."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.serving.loop.max_rate import max_rate


@settings(max_examples=100, deadline=None)
@given(st.floats(0.002, 5000), st.floats(0.01, 100), st.sampled_from([0.01, 0.02, 0.1]))
def test_finds_the_threshold_within_the_tolerance(threshold, start, tol):
    tried = []

    def meets(rate):
        tried.append(rate)
        return rate <= threshold

    found = max_rate(meets, start=start, rel_tol=tol)
    assert found <= threshold < found * (1 + tol) * 1.0000001
    assert len(tried) < 40


def test_limits():
    assert max_rate(lambda r: False) == 0.0
    assert max_rate(lambda r: True, highest=64.0) == 64.0
    assert max_rate(lambda r: r <= 3.0, start=3.0, rel_tol=0.01) == pytest.approx(3.0, rel=0.01)
