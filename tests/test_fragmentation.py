"""Contiguous allocators, internal waste of reservations, and the external-fragmentation arena."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.serving.memory.allocator import Buddy, FirstFit
from kvweb.serving.memory.ideal_arena import Ideal
from kvweb.serving.memory.fragmentation import arena_experiment, internal_waste
from kvweb.lab import ParamError
from kvweb.parsing import make
from kvweb.serving.load.workload import Request

ops_st = st.lists(st.tuples(st.booleans(), st.integers(1, 40), st.integers(0, 1000)), max_size=60)


def holes_of(free: list[bool]) -> list[tuple[int, int]]:
    """(start, length) of each run of free tokens."""
    holes: list[tuple[int, int]] = []
    for i, f in enumerate(free):
        if f and holes and holes[-1][0] + holes[-1][1] == i:
            holes[-1] = (holes[-1][0], holes[-1][1] + 1)
        elif f:
            holes.append((i, 1))
    return holes


def drive(alloc, size: int, ops, check_start) -> None:
    """Apply random allocations and frees to `alloc` and to a token-by-token model;
    `check_start(free, n, start)` judges each placement."""
    free = [True] * size
    live: dict[int, int] = {}
    for is_alloc, n, pick in ops:
        if is_alloc or not live:
            start = alloc.allocate(n)
            check_start(free, n, start)
            if start is not None:
                span = alloc.span(n)
                assert all(free[start : start + span]) and start + span <= size
                free[start : start + span] = [False] * span
                live[start] = span
        else:
            start = sorted(live)[pick % len(live)]
            span = live.pop(start)
            alloc.free(start)
            free[start : start + span] = [True] * span
        assert alloc.used == sum(live.values()) == size - alloc.free_total
        assert alloc.ranges() == sorted(live.items())
        assert alloc.holes() == holes_of(free)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 120), ops_st)
def test_first_fit_takes_the_lowest_hole_that_fits(size, ops):
    def lowest(free, n, start):
        assert start == next((s for s in range(size - n + 1) if all(free[s : s + n])), None)

    drive(FirstFit(size), size, ops, lowest)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 120), ops_st)
def test_buddy_blocks_are_aligned_powers_of_two_and_merge_back(size, ops):
    alloc = Buddy(size)
    tops = [(s, 1 << o) for s, o in alloc._top]  # 100 = 64 + 32 + 4, each aligned
    assert sum(n for _, n in tops) == size and all(s % n == 0 for s, n in tops)

    def aligned(free, n, start):
        span = alloc.span(n)
        assert span >= n and span & (span - 1) == 0 and (span == 1 or span < 2 * n)
        if start is None:  # no free block of that size anywhere
            assert not any(all(free[s : s + span]) for t, tn in tops for s in range(t, t + tn - span + 1, span))
        else:
            assert start % span == 0

    drive(alloc, size, ops, aligned)
    for start, _ in alloc.ranges():
        alloc.free(start)
    assert alloc.holes() == [(0, size)]
    assert sorted((s, 1 << o) for o, starts in alloc._free.items() for s in starts) == tops


def test_buddy_splits_and_fails_with_enough_free_tokens():
    alloc = Buddy(64)
    a = alloc.allocate(20)  # takes 32
    b = alloc.allocate(16)
    c = alloc.allocate(16)
    assert (a, b, c) == (0, 32, 48) and alloc.used == 64
    alloc.free(b)
    alloc.free(a)  # 0..31 and 32..47 free (48 tokens) but no 64-token block
    assert alloc.free_total == 48 and alloc.allocate(40) is None
    assert alloc.allocate(32) == 0


def test_internal_waste_by_hand():
    # final KV lengths 100 and 300 (prompt + output - 1); max length 512, blocks of 16
    rows = {r["scheme"]: r for r in internal_waste([Request(0, 0, 50, 51), Request(1, 0, 100, 201)], 512, 16)}
    assert rows["max"]["waste_tokens"] == 412 + 212
    assert rows["pow2"]["waste_tokens"] == (128 - 100) + (512 - 300)
    assert rows["oracle"]["waste_tokens"] == 0
    assert rows["paged"]["waste_tokens"] == (112 - 100) + (304 - 300)
    assert rows["max"]["waste_frac"] == (412 + 212) / 1024


def test_a_tiny_arena_by_hand():
    # arena 10, every request the whole arena: only the first can be placed until it leaves
    r = arena_experiment(mean_size=10_000, arena=10, requests=3, seed=0, load=1e6)  # stays ~1000 s
    assert r["failures"] == 2 and r["failures_with_enough_free"] == 0
    assert r["frames"][0]["ranges"] == [[0, 10, 0]]


def test_larger_requests_fail_more_but_less_often_for_lack_of_contiguity():
    runs = [arena_experiment(m, 32768, 2000, seed=0) for m in (512, 2048, 4096)]
    failures = [r["failures"] for r in runs]
    shares = [r["share_with_enough_free"] for r in runs]
    assert failures[0] < failures[1] < failures[2]
    assert shares[0] > shares[1] > shares[2]
    assert shares[0] > 0.9 and shares[2] < 0.75  # small requests fail only on holes


def test_arena_frames_are_consistent():
    r = arena_experiment(1024, 8192, 500, seed=3, max_frames=50)
    assert 25 <= len(r["frames"]) <= 51
    for f in r["frames"]:
        ranges = sorted(f["ranges"])
        assert all(a + n <= b for (a, n, _), (b, _, _) in zip(ranges, ranges[1:]))
        assert f["free"] == 8192 - sum(n for _, n, _ in ranges)
        assert f["largest_hole"] <= f["free"]
    assert r["frames"][-1]["failures"] == r["failures"]


def test_fragmentation_lab_refuses_arenas_too_crowded_to_draw():
    with pytest.raises(ParamError, match="about 1843 requests of 16 tokens would be live at once"):
        make("fragmentation", {"mean_size": "16"})
    with pytest.raises(ParamError, match="mean_size: 2000 is not allowed; at most the arena"):
        make("fragmentation", {"arena": "1000", "mean_size": "2000"})


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 120), ops_st)
def test_ideal_admits_whatever_first_fit_admits_and_leaves_no_hole(size, ops):
    """The same live ranges in both arenas: a request first-fit places, the ideal arena places too;
    the ideal arena refuses only when the free tokens add up to less than the request."""
    ideal, first = Ideal(size), FirstFit(size)
    live: list[tuple[int, int]] = []  # (ideal handle, first-fit start) of each live request
    for is_alloc, n, pick in ops:
        if is_alloc or not live:
            start, handle = first.allocate(n), ideal.allocate(n)
            assert (handle is None) == (ideal.free_total + (0 if handle is None else n) < n)
            if start is not None:
                assert handle is not None
                live.append((handle, start))
            elif handle is not None:  # only first-fit refused: ask, then give it back
                ideal.free(handle)
        else:
            handle, start = live.pop(pick % len(live))
            ideal.free(handle)
            first.free(start)
        assert ideal.used == first.used
        packed = ideal.ranges()
        assert [s for s, _ in packed] == [sum(n for _, n in packed[:i]) for i in range(len(packed))]
        assert ideal.holes() == ([(ideal.used, size - ideal.used)] if ideal.used < size else [])
    for handle, _ in live:
        ideal.free(handle)
    assert ideal.holes() == [(0, size)]


def test_ideal_arena_never_fails_with_enough_free_tokens():
    # the arena experiment on the ideal arena: a failure always means too few free tokens in all
    ideal = arena_experiment(2048, 32768, 500, 0, "ideal")
    first = arena_experiment(2048, 32768, 500, 0, "first-fit")
    assert ideal["failures_with_enough_free"] == 0 < ideal["failures"]
    assert first["failures_with_enough_free"] > 0
    assert all(f["largest_hole"] == f["free"] for f in ideal["frames"])


def _digest(lab: str, params: dict) -> str:
    """sha256 (16 hex digits) of a run's JSON, floats to 9 significant digits."""
    import hashlib
    import json

    from kvweb.jsonable import jsonable

    def canonical(x):
        if isinstance(x, float):
            return float(f"{x:.9g}")
        if isinstance(x, dict):
            return {k: canonical(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [canonical(v) for v in x]
        return x

    result = jsonable(make(lab, params).run())
    return hashlib.sha256(json.dumps(canonical(result), sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "lab, params, recorded",
    [
        ("fragmentation", {"requests": "400"}, "6b9e0ee44d06d984"),
        ("fragmentation", {"requests": "400", "allocator": "buddy"}, "3136e332aac04f9b"),
        ("engine", {"requests": "150", "memory": "oracle", "compare": "pow2"}, "7f76c56c66c2206b"),
        ("engine", {"requests": "150", "memory": "max", "compare": "oracle", "allocator": "buddy"}, "cde6d3d129f8e8e2"),
    ],
)
def test_first_fit_and_buddy_results_are_those_before_the_ideal_arena(lab, params, recorded):
    # recorded with the commit before the arena choice (e860674): whole results, traces and memory maps included
    assert _digest(lab, params) == recorded
