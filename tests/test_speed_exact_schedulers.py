"""The schedulers lab's speed-ups change nothing (issue 12): quiet iterations run without the
general path (one by one or as arrays) and give, to the last bit, what every iteration through
`_iterate` gives; the memory maps, hashes and event bins equal the plain computations they
replace (kept here as references); and every run or search the lab remembers equals a fresh one."""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import itertools
from dataclasses import replace
from itertools import chain

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.jsonable import jsonable
from kvweb.lab import no_progress
from kvweb.memo import clear_memos
from kvweb.parsing import make
from kvweb.labs import schedulers
from kvweb.labs.schedulers import SchedulersLab, opening_step, unread_by_workload
from kvweb.prefix.modes import MODES, Settings
from kvweb.prefix.radix_cache import RadixCache, TokenPool
from kvweb.serving.schedulers import radix_scheduler
from kvweb.serving.loop.continuous_batching import CACHED, FREE, K_FREE, MARKS, SHARED, ContinuousBatching, key_cells
from kvweb.serving.loop.engine_trace import EVENT_KINDS, TraceRecorder, blocks_to_cells, cell_group
from kvweb.serving.memory.host_tier import HostTree
from kvweb.serving.loop.metrics import SLO, attainment, summarize, throughput
from kvweb.serving.memory.prefix_caching import chain_hashes
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from kvweb.serving.load.workload import Request, poisson_workload
from test_schedulers import workload as small_workload
from test_speed_exact import same_run

BASE = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])


# -- the plain computations the fast ones replace ------------------------------------------------
def plain_blocks_to_cells(block_size, owner, written, max_cells):  # noqa: ANN001, ANN201
    per_cell = cell_group(len(owner), max_cells)
    cells = -(-len(owner) // per_cell)
    pad = cells * per_cell - len(owner)
    owner = np.concatenate([owner, np.full(pad, -1, dtype=owner.dtype)]).reshape(cells, per_cell)
    written = np.concatenate([written, np.zeros(pad, dtype=written.dtype)]).reshape(cells, per_cell)
    cell_tokens = per_cell * block_size
    percent = np.rint(100 * written.sum(axis=1) / cell_tokens).astype(int)
    return cell_tokens, owner.max(axis=1).tolist(), percent.tolist()


def plain_state_cells(block_size, owner, written, max_cells):  # noqa: ANN001, ANN201
    key = np.where(owner >= 0, owner + 2, np.where(owner == SHARED, 1, np.where(owner == CACHED, 0, -1)))
    cell_tokens, top, percent = plain_blocks_to_cells(block_size, key, written, max_cells)
    top_a = np.asarray(top)
    owners = np.where(top_a >= 2, top_a - 2, np.where(top_a == 1, SHARED, np.where(top_a == 0, CACHED, FREE)))
    return cell_tokens, owners.tolist(), percent


def plain_v1_map(self, step, max_cells):  # noqa: ANN001, ANN201
    pool, bs = self.pool, self.bs
    owner = np.full(pool.n_blocks, FREE, dtype=np.int64)
    written = np.zeros(pool.n_blocks, dtype=np.int64)
    cached = [b for b in pool.free if pool.block_hash[b] is not None]
    owner[cached] = CACHED
    written[cached] = bs
    seqs = [*self.running.values(), *self.prefilling, *self.leaving]
    if seqs:
        counts = np.array([len(s.blocks) for s in seqs])
        blocks = np.fromiter(chain.from_iterable(s.blocks for s in seqs), np.int64, int(counts.sum()))
        owner[blocks] = np.repeat([s.id for s in seqs], counts)
        written[blocks] = bs
        kv = np.array([s.kv(self.dstep) if s.id in self.running else s.computed for s in seqs])
        held = counts > 0
        last = np.array([s.blocks[-1] for s in seqs if s.blocks], dtype=np.int64)
        written[last] = (kv - (counts - 1) * bs)[held]
        hits = [b for s in seqs for b in s.blocks[: s.hit // bs]]
        owner[hits] = SHARED
        owner[np.asarray(pool.ref) > 1] = SHARED
    return plain_state_cells(bs, owner, written, max_cells)


def plain_radix_map(self, step, max_cells):  # noqa: ANN001, ANN201
    for seq in self.running.values():
        self._materialize(seq, seq.kv(self.dstep))  # one allocation per request
    owner = np.full(self.pool.size, FREE, dtype=np.int64)
    stack = list(self.tree.root.children.values())
    while stack:
        node = stack.pop()
        owner[node.value] = SHARED if node.lock_ref else CACHED
        stack.extend(node.children.values())
    for seq in [*self.running.values(), *([self.chunked] if self.chunked else [])]:
        if seq.own:
            owner[np.concatenate(seq.own)] = seq.id
    return plain_state_cells(1, owner, (owner != FREE).astype(np.int64), max_cells)


class PlainV1(V1Scheduler):
    memory_map = plain_v1_map


class PlainRadix(RadixScheduler):
    memory_map = plain_radix_map


def plain_chain_hashes(tokens, block_size, hashes, blocks):  # noqa: ANN001, ANN201
    prev = hashes[-1] if hashes else 0
    for i in range(len(hashes) * block_size, blocks * block_size, block_size):
        prev = hash((prev, tokens[i : i + block_size].tobytes()))
        hashes.append(prev)


def plain_event_bins(recorder, end, bins=200):  # noqa: ANN001, ANN201
    times, kinds = np.array(recorder.events["t"]), np.array(recorder.events["kind"])
    edges = np.linspace(0.0, max(end, times.max(initial=0.0)) or 1.0, bins + 1)
    rows: dict[str, list] = {"t0": [], "t1": [], "kind": [], "count": []}
    for kind in EVENT_KINDS:
        counts, _ = np.histogram(times[kinds == kind], edges)
        for i in np.flatnonzero(counts):
            for name, value in zip(rows, (float(edges[i]), float(edges[i + 1]), kind, int(counts[i]))):
                rows[name].append(value)
    return rows


def plain_opening_step(frame_lists, clock):  # noqa: ANN001, ANN201
    def count(frame, reused):  # noqa: ANN001, ANN202
        owner = np.asarray(frame["owner"])
        return int(np.count_nonzero(owner <= CACHED if reused else owner != FREE))

    for reused in (True, False):
        counts = [[count(f, reused) for f in frames] for frames in frame_lists]
        shown = [sum(c[at[i]] for c, at in zip(counts, clock["frames"])) for i in range(len(clock["t"]))]
        if any(shown):
            return shown.index(max(shown))
    return 0


# -- runs ---------------------------------------------------------------------------------------
def cost_with(tokens: int) -> CostModel:
    kv = BASE.model.kv_bytes_per_token
    return replace(BASE, mem_util=(BASE.model.weight_bytes + tokens * kv + kv / 2) / BASE.gpu.hbm_bytes)


def recorder(requests: list[Request], points: int = 200) -> TraceRecorder:
    horizon = max((r.arrival for r in requests), default=0.0) or 1.0
    return TraceRecorder(horizon / points, extra_curves=("cached", "hit_rate"))


def both_ways(make_scheduler, requests: list[Request], trace: bool) -> None:  # noqa: ANN001
    """The run as it is (quiet iterations coasting) equals the run with every iteration through
    `_iterate` (an observer turns coasting off), trace included, and so does a host tier's record."""
    quick, slow = make_scheduler(), make_scheduler()
    fast = quick.run(requests, trace=recorder(requests) if trace else None)
    full = slow.run(requests, observer=lambda s, step: None, trace=recorder(requests) if trace else None)
    same_run(fast, full)
    tier = getattr(quick, "tier", None)
    if tier is not None:
        times = fast.trace["curves"]["t"] if trace else [0.0, fast.sim_time]
        assert tier.figures(times) == slow.tier.figures(times) and tier.held == slow.tier.held
        assert (tier.changes, tier.hits, quick.host_hit_tokens) == (
            slow.tier.changes,
            slow.tier.hits,
            slow.host_hit_tokens,
        )


@pytest.fixture(params=["arrays", "as shipped"])
def quiet_array(request, monkeypatch):  # noqa: ANN001, ANN201
    """Run each test twice: with nearly every quiet stretch as arrays, and with the shipped threshold."""
    if request.param == "arrays":
        monkeypatch.setattr(ContinuousBatching, "quiet_array", 2)
    return request.param


LAB_WORKLOADS = [
    {},
    {"workload": "few-shot"},
    {"workload": "sharegpt"},
    {"scenario": "B", "requests": "150"},
    {"rate": "6", "requests": "200"},
    {"prefix_caching": "false", "rate": "5"},
    {"block_size": "1", "requests": "120"},
    {"block_size": "17", "rate": "4"},
    {"mem_util": "0.75", "rate": "4", "requests": "150"},
    {"workload": "few-shot", "mem_util": "0.75", "rate": "8", "requests": "150"},
    {"mem_util": "0.75", "rate": "6", "requests": "150", "host_tier_gb": "20"},
]


@pytest.mark.parametrize("params", LAB_WORKLOADS)
def test_quiet_iterations_change_nothing_in_the_labs_runs(params, quiet_array):
    lab = make("schedulers", params)
    requests = lab.workload_at(lab.rate)
    for mode in ("vllm-v1", "sglang"):
        both_ways(lambda mode=mode: lab.scheduler(mode), requests, trace=True)
        both_ways(lambda mode=mode: lab.scheduler(mode, give_up_after=10), requests, trace=False)


@pytest.mark.parametrize(
    "params",
    [
        {"model": "gpt-oss-20b"},
        {"model": "gemma-3-27b", "workload": "few-shot", "rate": "6"},
        {"model": "qwen3-next-80b-a3b", "workload": "sharegpt"},
        {
            "model": "gpt-oss-20b",
            "mem_util": "0.165",
            "rate": "20",
            "requests": "60",  # 107 preemptions
            "workload": "fixed",
            "prompt_len": "500",
            "output_len": "3000",
        },
    ],
)
def test_quiet_iterations_change_nothing_on_hybrid_models(params, quiet_array):
    """vLLM V1's KV cache groups (issue 27): windows slide in quiet iterations as in `_iterate`; SGLang's
    pools on these models (window or state pools): quiet stretches stop where running requests free
    window KV."""
    lab = make("schedulers", {"scenario": "B", "weight_precision": "int4", "requests": "150", **params})
    requests = lab.workload_at(lab.rate)
    assert lab.scheduler("vllm-v1").width > 1 and type(lab.scheduler("sglang")) is not RadixScheduler
    for mode in ("vllm-v1", "sglang"):
        both_ways(lambda mode=mode: lab.scheduler(mode), requests, trace=True)
        both_ways(lambda mode=mode: lab.scheduler(mode, give_up_after=10), requests, trace=False)


def test_quiet_iterations_change_nothing_with_every_knob(quiet_array):
    lab = make("schedulers", {"requests": "150", "rate": "5", "mem_util": "0.78"})
    requests = lab.workload_at(lab.rate)
    cost = lab.setup().cost_model()
    for config in (
        V1Config(2048, 16, 64, 512, True),
        V1Config(2048, 4, 256, 256, True),
        V1Config(2048, 32, 8, 8192, False),
        V1Config(2048, 16, 64, 512, True, full_prompt_check=False),
        V1Config(2048, 16, 64, 512, True, async_scheduling=True),
        V1Config(2048, 16, 64, 512, True, host_blocks=400),
        V1Config(2048, 4, 32, 512, True, host_blocks=90),
        V1Config(2048, 16, 64, 512, True, False, True, host_blocks=400),
    ):
        both_ways(lambda config=config: V1Scheduler(cost, config), requests, trace=True)
    for chunk, policy, mixed, cache in (
        (1024, "lpm", True, True),
        (512, "fcfs", False, True),
        (8192, "lpm", False, False),
        (300, "fcfs", True, False),
    ):
        config = RadixConfig(2048, 64, chunk, 4096, policy, mixed, cache)
        both_ways(
            lambda config=config: RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), config), requests, True
        )
    for host in (3000, 400):  # a host tier (HiCache) large and small
        config = RadixConfig(2048, 64, 1024, 4096, "lpm", False, True)
        both_ways(
            lambda host=host: RadixScheduler(
                cost, RadixCache(cost.kv_capacity_tokens), config, host=HostTree(RadixCache(host), host, cost)
            ),
            requests,
            True,
        )


requests_st = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.0, 0.01, 0.05, 0.5]),
        st.integers(0, 30),
        st.integers(1, 40),
        st.integers(1, 120),
        st.booleans(),
    ),
    min_size=1,
    max_size=16,
)


@settings(max_examples=60, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    tokens=st.integers(40, 600),
    block=st.sampled_from([1, 2, 4, 16]),
    max_seqs=st.integers(1, 8),
    budget=st.integers(0, 120),
    caching=st.booleans(),
    mode=st.sampled_from(["v1", "sglang"]),
    lpm=st.booleans(),
    mixed=st.booleans(),
    trace=st.booleans(),
    array=st.sampled_from([1, 2, 5, 48]),
)
def test_quiet_iterations_change_nothing_anywhere(
    rows, shared, tokens, block, max_seqs, budget, caching, mode, lpm, mixed, trace, array
):
    # (for V1, `lpm` and `mixed` draw the full-prompt check and async scheduling)
    requests = small_workload(rows, shared)
    cost = cost_with(tokens)
    saved = ContinuousBatching.quiet_array
    ContinuousBatching.quiet_array = array
    try:
        if mode == "v1":
            config = V1Config(256, block, max_seqs, max_seqs + budget, caching, lpm, mixed)
            both_ways(lambda: V1Scheduler(cost, config), requests, trace)
        else:
            config = RadixConfig(256, max_seqs, budget + 1, budget + 8, "lpm" if lpm else "fcfs", mixed, caching)
            both_ways(lambda: RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), config), requests, trace)
    finally:
        ContinuousBatching.quiet_array = saved


# -- memory maps, hashes, event bins ------------------------------------------------------------
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"workload": "few-shot"},
        {"workload": "sharegpt"},
        {"scenario": "B"},
        {"mem_util": "0.75", "rate": "5", "requests": "150"},
        {"block_size": "3"},
        {"prefix_caching": "false"},
    ],
)
def test_memory_maps_are_the_plain_ones(params):
    lab = make("schedulers", {"requests": "200", **params})
    requests = lab.workload_at(lab.rate)
    cost = lab.setup().cost_model()
    v1 = V1Config(lab.setup().spec.max_len, lab.block_size, lab.max_seqs, lab.budget(), lab.prefix_caching)
    fast = V1Scheduler(cost, v1).run(requests, trace=recorder(requests))
    plain = PlainV1(cost, v1).run(requests, trace=recorder(requests))
    same_run(fast, plain)
    radix = RadixConfig(
        lab.setup().spec.max_len,
        lab.max_seqs,
        lab.chunk(),
        Settings.max_prefill_tokens,
        lab.policy,
        lab.mixed_chunk,
        lab.prefix_caching,
    )
    fast = RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), radix).run(requests, trace=recorder(requests))
    plain = PlainRadix(cost, RadixCache(cost.kv_capacity_tokens), radix).run(requests, trace=recorder(requests))
    same_run(fast, plain)
    assert any(o >= 0 for f in fast.trace["frames"] for o in f["owner"])


@settings(max_examples=40, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    tokens=st.integers(40, 2000),
    block=st.sampled_from([1, 2, 4, 16]),
    max_seqs=st.integers(1, 8),
    budget=st.integers(0, 120),
    caching=st.booleans(),
    cells=st.sampled_from([1, 7, 64, 1024]),
    dense=st.sampled_from([0, 1 << 16]),
)
def test_memory_maps_are_the_plain_ones_anywhere(rows, shared, tokens, block, max_seqs, budget, caching, cells, dense):
    # (`dense` draws async scheduling for V1 too)
    requests = small_workload(rows, shared)
    cost = cost_with(tokens)
    radix_scheduler.DENSE_SLOTS, saved = dense, radix_scheduler.DENSE_SLOTS  # 0: every pool keyed where held

    def trace() -> TraceRecorder:
        return TraceRecorder(0.01, max_cells=cells, extra_curves=("cached", "hit_rate"))

    v1 = V1Config(256, block, max_seqs, max_seqs + budget, caching, async_scheduling=bool(dense))
    same_run(V1Scheduler(cost, v1).run(requests, trace=trace()), PlainV1(cost, v1).run(requests, trace=trace()))
    radix = RadixConfig(256, max_seqs, budget + 1, budget + 8, "lpm", False, caching)
    try:
        same_run(
            RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), radix).run(requests, trace=trace()),
            PlainRadix(cost, RadixCache(cost.kv_capacity_tokens), radix).run(requests, trace=trace()),
        )
    finally:
        radix_scheduler.DENSE_SLOTS = saved


def test_cells_of_blocks_are_the_plain_ones():
    rng = np.random.default_rng(1)
    for n in (1, 5, 16, 100, 1000, 1024, 1025, 3000, 20000):
        for max_cells in (1, 7, 64, 1024):
            owner = rng.integers(-3, 40, n)
            written = rng.integers(0, 17, n)
            per_cell = cell_group(n, max_cells)
            pad = -n % per_cell
            key = np.concatenate(
                [[o if o >= 0 else -1 - MARKS.tolist().index(o) for o in owner.tolist()], np.full(pad, K_FREE)]
            )
            fast = key_cells(16, per_cell, key, np.concatenate([written, np.zeros(pad, dtype=written.dtype)]))
            assert fast == plain_state_cells(16, owner, written, max_cells)
            free_or_id = np.maximum(owner, -1)
            assert blocks_to_cells(16, free_or_id, written, max_cells) == plain_blocks_to_cells(
                16, free_or_id, written, max_cells
            )


def test_a_pool_hands_out_one_allocation_as_the_allocations_it_joins():
    """`RadixScheduler._materialize_running` takes every running request's slots in one allocation."""
    rng = np.random.default_rng(2)
    one, many = TokenPool(500), TokenPool(500)
    for _ in range(60):
        sizes = rng.integers(1, 9, rng.integers(1, 5)).tolist()
        if one.available >= sum(sizes):
            joined = one.alloc(sum(sizes))
            parts = [many.alloc(s) for s in sizes]
            assert joined.tolist() == np.concatenate(parts).tolist()
        if one.used:  # give some back, the same in both
            drop = joined[: rng.integers(1, len(joined) + 1)]
            one.free(drop)
            many.free(drop)
        assert one.available == many.available


def test_chained_hashes_are_the_plain_ones():
    rng = np.random.default_rng(3)
    for length in (0, 1, 15, 16, 17, 100, 257):
        tokens = rng.integers(0, 50_000, length).astype(np.int64)
        for bs in (1, 4, 16):
            for start in (0, 1, 3):
                for blocks in (start, start + 1, length // bs, length // bs + 2):
                    fast, plain = [], []
                    plain_chain_hashes(tokens, bs, plain, start)
                    fast = list(plain)
                    chain_hashes(tokens, bs, fast, blocks)
                    plain_chain_hashes(tokens, bs, plain, blocks)
                    assert fast == plain
        got, want = [], []  # a strided view
        chain_hashes(tokens[::2], 4, got, len(tokens) // 8)
        plain_chain_hashes(tokens[::2], 4, want, len(tokens) // 8)
        assert got == want


def test_event_bins_are_the_plain_ones():
    rng = np.random.default_rng(4)
    for n in (0, 1, 5, 300):
        rec = TraceRecorder(1.0)
        for t in np.sort(rng.uniform(0, 50, n)).tolist():
            rec.event(t, str(rng.choice(["preempt", "recompute", "swap_out"])), 1)
        for end in (0.0, 10.0, 60.0):
            assert rec.event_bins(end) == plain_event_bins(rec, end)


def test_the_opening_step_is_the_plain_one():
    lab = make("schedulers", {})
    result = lab.run()
    frames = [m["trace"]["frames"] for m in result["modes"]]
    assert (
        result["opening_step"]
        == opening_step(frames, result["timeline"])
        == plain_opening_step(frames, result["timeline"])
    )
    no_reuse = [
        [{**f, "owner": [o if o not in (CACHED, SHARED) else FREE for o in f["owner"]]} for f in fs] for fs in frames
    ]
    assert opening_step(no_reuse, result["timeline"]) == plain_opening_step(no_reuse, result["timeline"])


# -- the lab: remembered runs and searches ----------------------------------------------------------
SMALL = {"requests": "40", "turns": "3", "think_s": "1"}


def fresh(change: dict[str, str]) -> dict:
    clear_memos()
    return jsonable(make("schedulers", {**SMALL, **change}).run())


def test_the_lab_remembers_runs_and_they_are_the_runs():
    changes = [
        {},
        {"tp": "2"},
        {"rate": "2.2"},
        {"block_size": "17"},
        {"preemption": "swap"},
        {"prefix_caching": "false"},
        {"token_budget": "512"},
        {"policy": "fcfs"},
        {"swap_copies": "per-layer-kv"},
        {"workload": "few-shot"},
        {"workload": "few-shot", "turns": "2"},
        {"workload": "few-shot", "rate": "3"},
        {"search": "true"},
        {"search": "true", "rate": "3"},
        {"search": "true", "target": "0.8"},
        {},
    ]
    expected = [fresh(c) for c in changes]
    clear_memos()
    assert [jsonable(make("schedulers", {**SMALL, **c}).run()) for c in changes] == expected
    assert len(schedulers._RUNS) <= schedulers._RUNS.keep and len(schedulers._SEARCHES) <= schedulers._SEARCHES.keep


def run_of(lab: SchedulersLab, mode: str) -> dict:
    run = lab.run_mode(mode, lab.workload_at(lab.rate), no_progress, trace=True)
    return jsonable({**lab.figures(run), "trace": run.trace})


UNREAD_CHANGES = {
    "token_budget": 512,
    "chunk_size": 1024,
    "policy": "fcfs",
    "mixed_chunk": True,
    "prefix_caching": False,
    "allocator": "buddy",
    "watermark": 0.1,
    "preemption": "swap",
    "block_size": 8,
    "block_overhead_us": 50.0,
    "host_link_gb_s": 5.0,
    "swap_copies": "per-layer-kv",
    "full_prompt_check": False,
    "async_scheduling": True,
    "host_tier_gb": 20.0,
    "spec_tokens": 2,
    "acceptance": "0.5",
    "drafter": "llama-3-8b",
    "loras": 3,
    "max_loras": 2,
    "lora_rank": 32,
    "lora_targets": "all-linear",
    "images": 1,
    "image_tokens": 100,
    "image_pool": 3,
    "encoder_budget": 4096,
    "encoder_cache": 4096,
}


@pytest.mark.parametrize("mode", MODES)
def test_a_mode_does_not_read_what_the_lab_leaves_out_of_its_key(mode):
    base = {"requests": 120, "rate": 5.0, "mem_util": 0.8}
    expected = run_of(SchedulersLab(**base), mode)
    assert MODES[mode].unread
    for name in MODES[mode].unread:
        assert run_of(SchedulersLab(**base, **{name: UNREAD_CHANGES[name]}), mode) == expected, name
    assert run_of(SchedulersLab(**base, search=True, target=0.7), mode) == expected


@pytest.mark.parametrize("workload", ["scenario", "sharegpt", "fixed", "few-shot", "multi-turn", "closed-loop"])
def test_requests_do_not_depend_on_what_the_workload_leaves_out(workload):
    def requests(**change) -> list:  # noqa: ANN003
        lab = SchedulersLab(workload=workload, requests=40, **change)
        return [
            (r.id, r.arrival, r.prompt, r.output, None if r.tokens is None else r.tokens.tolist(), r.after, r.delay)
            for r in lab.workload_at(lab.rate)
        ]

    expected = requests()
    changes = {
        "prompt_len": 100,
        "tasks": 3,
        "examples_len": 100,
        "turns": 2,
        "think_s": 1.0,
        "system_len": 20,
        "question_len": 10,
        "concurrency": 3,
        "rate": 7.0,
    }
    for name in unread_by_workload(workload):
        assert requests(**{name: changes[name]}) == expected, name
    for name in schedulers.SERVING_ONLY:
        if name not in ("search",):
            value = {
                "block_size": 8,
                "watermark": 0.1,
                "preemption": "swap",
                "allocator": "buddy",
                "token_budget": 512,
                "chunk_size": 1024,
                "policy": "fcfs",
                "mixed_chunk": True,
                "prefix_caching": False,
                "max_seqs": 64,
                "target": 0.8,
                "ttft_slo_s": 1.0,
                "tpot_slo_ms": 50.0,
                "full_prompt_check": False,
                "async_scheduling": True,
                "host_tier_gb": 20.0,
                "model": "gpt-oss-20b",
                "spec_tokens": 2,
                "acceptance": "0.5",
                "drafter": "llama-3-8b",
            }[name]
            assert requests(**{name: value}) == expected, name
    assert requests(tp=2, kv_precision="fp8", mem_util=0.7) == expected


def test_a_search_reads_the_figures_summarize_gives():
    lab = SchedulersLab(requests=80)
    slo = lab.setup().slo
    for mode in MODES:
        for give_up in (None, 3):
            requests = [replace(r, arrival=r.arrival / 6.0) for r in lab.workload_at(1.0)]
            run = lab.run_mode(mode, requests, no_progress, give_up_after=give_up)
            full = summarize(run, slo)
            assert (run.stopped_early, attainment(run, slo), throughput(run)) == (
                full["stopped_early"],
                full["slo_attainment"],
                full["throughput_tok_s"],
            )


def test_requests_are_rebuilt_field_by_field():
    """The search builds `replace(r, arrival=...)` by hand; that needs Request's fields as they are."""
    assert [f.name for f in dataclasses.fields(Request)] == [
        "id",
        "arrival",
        "prompt",
        "output",
        "tokens",
        "after",
        "delay",
        "adapter",
        "images",
    ]


def test_the_itl_pairs_are_an_array_of_the_same_pairs():
    requests = poisson_workload("sharegpt", 60, 4.0, 2048, 0)
    run = V1Scheduler(cost_with(4000), V1Config(2048)).run(requests)
    assert run.itl.shape == (len(run.itl), 2) and run.itl.dtype == float
    assert summarize(run, SLO())["itl_s"]["count"] == int(run.itl[:, 1].sum())


def clone(scheduler):  # noqa: ANN001, ANN201
    """A deep copy (Python 3.14 no longer copies an `itertools.count`, as RadixCache holds: it is
    copied here at the value it stands at, read off its repr without advancing it)."""
    copyreg.pickle(itertools.count, lambda c: (itertools.count, tuple(int(x) for x in repr(c)[6:-1].split(","))))
    try:
        return copy.deepcopy(scheduler)
    finally:
        copyreg.dispatch_table.pop(itertools.count, None)


def state(s) -> tuple:  # noqa: ANN001
    """What an iteration may change in a scheduler, as plain values."""
    seqs = [(q.id, q.kv(s.dstep), list(q.blocks), q.mat, len(q.own)) for q in s.running.values()]
    common = (s.dstep, s.kv_tokens, s.decoded, seqs, [q.id for q in s.waiting])
    if isinstance(s, V1Scheduler):
        p = s.pool
        return (
            *common,
            list(p.free),
            list(p.ref),
            list(p.block_hash),
            dict(p.table),
            p.version,
            p.reusable,
            p.shared_extra,
            [q.id for q in s.prefilling],
            [q.id for q in s.leaving],
        )
    return (*common, s.pending, s.ratio, s.pool.available, s.tree.evictable_size, s.batch_is_full)


@settings(max_examples=25, deadline=None)
@given(
    rows=requests_st,
    shared=st.booleans(),
    tokens=st.integers(40, 400),
    block=st.sampled_from([1, 2, 4]),
    max_seqs=st.integers(1, 6),
    budget=st.integers(0, 60),
    mode=st.sampled_from(["v1", "sglang"]),
)
def test_a_quiet_iteration_is_iterate_and_a_plan_is_its_iterations(rows, shared, tokens, block, max_seqs, budget, mode):
    """Wherever a run stands: a quiet iteration (`_quiet_run`) changes what `_iterate` changes and adds
    what the loop adds for it, and a plan of k iterations is the next k quiet iterations (the one after
    is not quiet, unless the plan stopped at `most`)."""
    requests = small_workload(rows, shared)
    cost = cost_with(tokens)
    if mode == "v1":
        scheduler = V1Scheduler(cost, V1Config(256, block, max_seqs, max_seqs + budget, True))
    else:
        scheduler = RadixScheduler(
            cost,
            RadixCache(cost.kv_capacity_tokens),
            RadixConfig(256, max_seqs, budget + 1, budget + 8, "lpm", False, True),
        )

    def observe(s, step) -> None:  # noqa: ANN001
        if not s.running or step % 3:
            return  # (every third iteration: a copy of the scheduler costs more than the iteration)
        quiet, full = clone(s), clone(s)
        itl_s, itl_n = [], []
        ran, *sums = quiet._quiet_run(1, float("inf"), 0.0, 0.0, 0.0, s.now, itl_s, itl_n)
        if ran:
            dt, batch, fresh, occupied, used, cached = full._iterate()
            assert (batch, fresh) == (quiet.decoded, [])
            now = s.now + dt
            assert sums == [occupied * dt, used * dt, cached * dt]
            assert (itl_s, itl_n) == ([now - s.now], [batch])
            assert state(quiet) == state(full) and quiet.now == now
        most = 12
        planned, stepped = clone(s), clone(s)
        planned.quiet_array = 1
        k, plan = planned._quiet_plan(most, float("inf"))
        quiet_ones = 0
        while quiet_ones < most and stepped._quiet_run(1, float("inf"), 0.0, 0.0, 0.0, 0.0, [], [])[0]:
            quiet_ones += 1
        assert k == quiet_ones
        if plan is not None:
            flops, nbytes, occ, use, cache = (np.broadcast_to(np.asarray(a), (k,)).tolist() for a in plan)
            dts = cost.step_times(np.asarray(flops), np.asarray(nbytes)).tolist()
            replay = clone(s)
            for j in range(k):
                replay.now = 0.0
                _, *sums = replay._quiet_run(1, float("inf"), 0.0, 0.0, 0.0, 0.0, [], [])
                assert [replay.now, *sums] == [dts[j], occ[j] * dts[j], use[j] * dts[j], cache[j] * dts[j]]
            planned._quiet_commit(k)
            assert state(planned) == state(stepped) == state(replay)

    scheduler.run(requests, observer=observe)
