"""vLLM-style chained block hashes against the radix tree."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.prefix.cache_schedule import RadixServer
from kvweb.prefix.cache_workload import Request
from kvweb.prefix.prefix_hash import PrefixHashCache


def req(rid: int, prompt: list[int], output: list[int] = (9,)) -> Request:
    return Request(rid, np.array(prompt, dtype=np.int64), np.array(output, dtype=np.int64), 0)


def test_only_whole_blocks_are_reused() -> None:
    cache, radix = PrefixHashCache(64, block_size=4), RadixServer(64)
    first = req(0, [1, 2, 3, 4, 5, 6, 7, 8])
    second = req(1, [1, 2, 3, 4, 5, 6, 0, 0])  # shares 6 tokens: one whole block and a half
    assert cache.serve(first) == 0 and radix.serve(first) == 0
    assert cache.serve(second) == 4
    assert radix.serve(second) == 6


def test_hashes_chain_the_prefix_not_just_the_block() -> None:
    cache = PrefixHashCache(64, block_size=2)
    cache.serve(req(0, [1, 2, 3, 4]))
    assert cache.peek(np.array([1, 2, 3, 4])) == 4
    assert cache.peek(np.array([0, 0, 3, 4])) == 0  # same second block after another first one
    assert cache.hashes(np.array([1, 2, 3, 4, 5])) == cache.hashes(np.array([1, 2, 3, 4]))  # partial block: no hash


def test_unreferenced_blocks_are_evicted_least_recently_used_tail_first() -> None:
    cache = PrefixHashCache(6, block_size=2)  # three blocks
    cache.serve(req(0, [1, 1, 2], output=[2]))  # blocks [1 1] [2 2]
    assert cache.peek(np.array([1, 1, 2, 2])) == 4
    cache.serve(req(1, [7], output=[7]))  # takes the one never used block
    cache.serve(req(2, [5], output=[5]))  # takes the tail [2 2] of request 0 first
    assert cache.peek(np.array([1, 1, 2, 2])) == 2
    assert cache.peek(np.array([7, 7])) == 2


@settings(max_examples=80, deadline=None)
@given(
    block=st.integers(1, 4),
    runs=st.lists(
        st.tuples(
            st.lists(st.integers(0, 1), min_size=1, max_size=10), st.lists(st.integers(0, 1), min_size=1, max_size=4)
        ),
        max_size=10,
    ),
)
def test_without_eviction_hashes_reuse_the_radix_match_cut_to_whole_blocks(block, runs) -> None:
    room = 1000
    cache, radix, paged = PrefixHashCache(room, block), RadixServer(room), RadixServer(room, block)
    for i, (prompt, output) in enumerate(runs):
        r = req(i, prompt, output)
        m = radix.serve(r)
        assert cache.serve(r) == paged.serve(r) == m - m % block
