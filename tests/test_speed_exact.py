"""Speed-ups that must change nothing (issue 12): every shortcut gives, to the last bit, what the
plain computation gives, and every result a lab remembers equals a fresh one, in bounded memory."""

from __future__ import annotations

import dataclasses
import enum
import math
import types
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.kv.generate import Continued, generate_alone
from kvweb.kv.model import MiniModel, encode
from kvweb.jsonable import jsonable
from kvweb.memo import Memo, clear_memos
from kvweb.parsing import make
from kvweb.labs import cache_schedule, cache_sweep, engine, fsm, max_rate
from kvweb.prefix.cache_workload import dfs_order, few_shot, multi_turn, ordered_bytes
from kvweb.prefix.radix_cache import RadixCache
from kvweb.prefix.served_workload import multi_turn_traffic
from kvweb.serving.loop.engine_setup import MEMORIES, Setup, ignored_by
from kvweb.serving.loop.engine_trace import TraceRecorder
from kvweb.serving.loop.metrics import summarize
from kvweb.serving.schedulers.paper_quiet import PaperQuietSteps
from kvweb.serving.loop.sequence import Run
from kvweb.serving.load.workload import Request

MODEL = MiniModel()


# -- the memo itself ---------------------------------------------------------------------------
def test_a_memo_keeps_the_most_recently_used_and_no_more():
    memo: Memo[int] = Memo(2)
    calls = []

    def compute(x: int) -> int:
        calls.append(x)
        return x * x

    assert memo.get(1, lambda: compute(1)) == 1
    assert memo.get(2, lambda: compute(2)) == 4
    assert memo.get(1, lambda: compute(1)) == 1  # kept: 1 is now the most recent
    assert memo.get(3, lambda: compute(3)) == 9  # 2 goes
    assert len(memo) == 2 and memo.find(2) is None and memo.find(1) == 1
    assert calls == [1, 2, 3]
    clear_memos()
    assert len(memo) == 0
    with pytest.raises(ValueError):
        Memo(0)


# -- the engine's quiet steps ------------------------------------------------------------------
def full_path(setup: Setup, requests: list[Request], trace: bool, give_up: int | None = None) -> Run:
    """The same run with every step through the full loop (an observer turns quiet steps off)."""
    recorder = None
    if trace:
        horizon = max((r.arrival for r in requests), default=0.0) or 1.0
        recorder = TraceRecorder(horizon / 200, max_cells=1024)
    return setup.engine(give_up).run(requests, observer=lambda engine, step: None, trace=recorder)


def same_run(a: Run, b: Run) -> None:
    """Every field of two runs (of the papers' engine or a today's scheduler) equal."""
    for f in dataclasses.fields(type(a)):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "itl":
            assert np.array_equal(x, y)
        elif f.name == "sequences":
            assert [(s.id, s.first_token_t, s.finish_t, s.spans, s.missed) for s in x] == [
                (s.id, s.first_token_t, s.finish_t, s.spans, s.missed) for s in y
            ]
        elif f.name == "rejected":
            assert [(r.id, why) for r, why in x] == [(r.id, why) for r, why in y]
        else:
            assert x == y, f.name


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("preemption, rate, trace", [("recompute", 3.0, False), ("swap", 6.0, True)])
def test_quiet_steps_change_nothing(memory: str, preemption: str, rate: float, trace: bool):
    setup = Setup("A", memory, preemption=preemption)
    requests = setup.workload(150, rate, seed=3)
    same_run(setup.run(requests, trace=trace), full_path(setup, requests, trace))


@pytest.mark.parametrize("memory", MEMORIES)
def test_quiet_steps_as_arrays_change_nothing(memory: str, monkeypatch: pytest.MonkeyPatch):
    """Nearly every quiet stretch as arrays (the shipped threshold leaves short ones to the loop)."""
    monkeypatch.setattr(PaperQuietSteps, "quiet_array", 2)
    setup = Setup("A", memory, preemption="swap")
    requests = setup.workload(150, 6.0, seed=3)
    same_run(setup.run(requests, trace=True), full_path(setup, requests, True))


def test_quiet_steps_change_nothing_in_chats_and_when_giving_up():
    chats = multi_turn_traffic(90, 3.0, seed=1, turns=4, system_len=200, question_len=60, output_len=150, think_s=2.0)
    for memory in ("paged", "max"):
        setup = Setup("A", memory)
        same_run(setup.run(chats, trace=True), full_path(setup, chats, True))
    setup = Setup("A", "max")
    burst = setup.workload(120, 20.0, seed=1)
    same_run(setup.run(burst, give_up_after=5), full_path(setup, burst, False, give_up=5))
    assert setup.run(burst, give_up_after=5).stopped_early


def test_step_times_is_step_time_elementwise():
    cost = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"], tp=2)
    flops = np.linspace(1e9, 1e15, 57)
    nbytes = np.linspace(1e12, 1e8, 57)
    assert cost.step_times(flops, nbytes).tolist() == [
        cost.step_time(f, b) for f, b in zip(flops.tolist(), nbytes.tolist())
    ]


def test_a_remembered_prefill_price_is_the_price():
    cost = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])
    first = [cost.prefill_work(n, c) for n in (1, 17, 900) for c in (0, 5)]
    fresh = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])
    assert [fresh._with_allreduce(*fresh.prefill_counts(n, c), n) for n in (1, 17, 900) for c in (0, 5)] == first
    assert [cost.prefill_work(n, c) for n in (1, 17, 900) for c in (0, 5)] == first


def test_reserved_memory_ignores_what_ignored_by_says():
    requests = Setup("A", "oracle").workload(80, 4.0, seed=2)
    for memory in MEMORIES:
        base = Setup("A", memory)
        other = base.with_(
            **{"allocator": "buddy"} if memory == "paged" else {"block_size": 4, "watermark": 0.2, "preemption": "swap"}
        )
        assert set(ignored_by(memory)) == {
            f for f in ("allocator", "block_size", "watermark", "preemption") if getattr(base, f) != getattr(other, f)
        }
        a, b = base.run(requests, trace=True), other.run(requests, trace=True)
        assert jsonable(summarize(a, base.slo)) == jsonable(summarize(b, other.slo)) and a.trace == b.trace


# -- the mini model's loops --------------------------------------------------------------------
def test_continued_sampling_is_generate_alone():
    prompt = encode("Answer: ")
    going = Continued(MODEL, prompt, 5)
    for n in (3, 1, 40, 40, 75):
        assert going.first(n) == generate_alone(MODEL, prompt, n, 5)
    assert Continued(MODEL, prompt, None, 0.5).first(20) == generate_alone(MODEL, prompt, 20, None, 0.5)


def test_ordered_bytes_sort_like_token_lists():
    rng = np.random.default_rng(0)
    runs = [rng.integers(-4, 4, rng.integers(0, 6)) for _ in range(500)]
    runs += [np.array([-(2**63), 2**63 - 1]), np.array([2**63 - 1]), np.array([-(2**63)]), np.array([], dtype=np.int64)]
    order = sorted(range(len(runs)), key=lambda i: runs[i].tolist())
    assert sorted(range(len(runs)), key=lambda i: ordered_bytes(runs[i])) == order
    requests = few_shot(3, 5, 10, 20, 5, 4, seed=1)
    assert dfs_order(requests) == sorted(range(len(requests)), key=lambda i: requests[i].prompt.tolist())


def test_match_length_is_match_prefix_with_the_same_effects():
    requests = multi_turn(4, 3, 20, 8, 6, 2, seed=4)
    caches = RadixCache(400), RadixCache(400)
    for r in requests:
        for cache in caches:
            slots = cache.alloc(len(r.tokens))
            if slots is not None:
                cache.insert(r.tokens, slots)
        probe = r.prompt[: len(r.prompt) * 2 // 3]
        assert caches[0].match_length(probe) == caches[1].match_prefix(probe).length
        assert caches[0].describe() == caches[1].describe()


# -- labs: a remembered answer is a fresh one --------------------------------------------------
def fresh(lab: str, base: dict[str, str], change: dict[str, str]) -> dict:
    clear_memos()
    return warm(lab, base, change)


def warm(lab: str, base: dict[str, str], change: dict[str, str]) -> dict:
    return jsonable(make(lab, {**base, **change}).run())


def test_fsm_remembers_samples_and_they_are_the_samples():
    changes = [
        {},
        {"samples": "6"},
        {"seed": "2"},
        {"max_len": "60"},
        {"max_len": "150"},
        {"preset": "ambiguous"},
        {"max_len": "120"},
    ]
    small = {"max_len": "120", "samples": "3"}
    expected = [fresh("fsm", small, c) for c in changes]
    clear_memos()
    assert [warm("fsm", small, c) for c in changes] == expected
    assert len(fsm._DECODINGS) <= fsm.SAMPLES_KEPT and len(fsm._FREE) <= fsm.SAMPLES_KEPT
    assert len(fsm._FREE_GOING) <= 8 and len(fsm._FSMS) <= 8


def test_max_rate_remembers_searches_and_they_are_the_searches():
    small = {"requests": "40", "rel_tol": "0.2"}
    changes = [{}, {"preemption": "swap"}, {"allocator": "buddy"}, {"rate": "7"}, {"block_size": "32"}, {}]
    expected = [fresh("max-rate", small, c) for c in changes]
    clear_memos()
    assert [warm("max-rate", small, c) for c in changes] == expected
    assert len(max_rate._SEARCHES) <= max_rate.SEARCHES_KEPT


def test_cache_sweep_remembers_runs_and_they_are_the_runs():
    small = {"tasks": "3", "per_task": "4", "examples_len": "60", "system_len": "20"}
    changes = [{}, {"alpha": "3"}, {"points": "5"}, {"queue": "2"}, {"workload": "multi-turn", "sessions": "4"}, {}]
    expected = [fresh("cache-sweep", small, c) for c in changes]
    clear_memos()
    assert [warm("cache-sweep", small, c) for c in changes] == expected
    assert len(cache_sweep._RATES) <= 1024 and len(cache_schedule._WORKLOADS) <= 4


def test_engine_reuses_a_reserved_run_across_block_sizes():
    small = {"requests": "60", "rate": "4"}
    expected = fresh("engine", small, {"block_size": "32"})
    clear_memos()
    warm("engine", small, {})  # paged and oracle
    assert warm("engine", small, {"block_size": "32"}) == expected  # oracle from memory, paged fresh
    assert len(engine._RUNS) <= engine.RUNS_KEPT


# -- converting results for the app --------------------------------------------------------------
def plain_jsonable(value):
    """`jsonable` as it was before its fast paths: the isinstance chain alone."""
    if isinstance(value, Mapping):
        return {str(k): plain_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Level(enum.IntEnum):
    LOW = 1


def _values() -> st.SearchStrategy:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.text(max_size=3),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(allow_nan=True).map(np.float64),
        st.integers(-9, 9).map(np.int64),
        st.booleans().map(np.bool_),
        st.just(Level.LOW),
        st.lists(st.floats(allow_nan=True), max_size=4).map(np.array),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=4).map(tuple),
            st.dictionaries(st.one_of(st.text(max_size=2), st.integers()), inner, max_size=4),
            st.dictionaries(st.text(max_size=2), inner, max_size=3).map(types.MappingProxyType),
        ),
        max_leaves=20,
    )


@settings(max_examples=400, deadline=None)
@given(_values())
def test_jsonable_gives_what_the_isinstance_chain_gives_value_and_type(value):
    # repr tells 1, 1.0, True and np.float64(1.0) apart
    assert repr(jsonable(value)) == repr(plain_jsonable(value))


def test_jsonable_of_a_serving_trace_is_the_isinstance_chains():
    result = engine.EngineLab(requests=40).run()
    assert repr(jsonable(result)) == repr(plain_jsonable(result))
