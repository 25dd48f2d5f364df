"""A work estimate before every run, and the budget it must stay under.

Many runs the parameter bounds allow take minutes (a browser is 2-3x slower again), so every
lab counts its work from its parameters, without running anything (`Lab.estimate`), in a unit
of its own with a stated cost per unit. A run whose estimate is over the budget is refused
with one plain line naming the estimate, the budget and the parameters to change. Unit costs
are CPU seconds of CPython on the 2-core machine of docs/input.md (what a run takes there when
idle), measured by `bench/caps.py --budget` and the runs of issue 25; they are the slow end of
what was measured, so an accepted run should not take much longer than its estimate.

The same counts give the run's peak memory: a unit that holds memory while its run lasts (a
replica's pool, a block of a prefix cache) states its bytes, measured by `bench/estimates.py` (the
growth of a child's peak resident set), and a run estimated over `MEMORY_MB` is refused the same
way, so that a run from outside never reaches the served app's cap per run (app/child.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BUDGET_S = 20.0  # seconds of work a run may take (the CLI's --budget raises it)
# Memory a run may take above what the library holds once imported (about 150 MB): within 1 GB in all, and
# under the served app's cap of 1024 MB of address space per run (its child starts at 144 MB) with room to spare
MEMORY_MB = 768.0
MB = 2**20


@dataclass(frozen=True)
class Unit:
    """What a lab counts, and what one of them costs."""

    name: str  # plural, as read after a count: "memory-map cells drawn"
    seconds: float
    bytes: float = 0.0  # memory one holds until its run ends (0: none that grows with the count)


@dataclass(frozen=True)
class Estimate:
    """A run's work: so many of each unit, and the parameters it grows with (`lower`, the main ones
    first) or shrinks with (`higher`); `held`, the units of memory it holds at its peak."""

    parts: tuple[tuple[float, Unit], ...]
    lower: tuple[str, ...] = ()
    higher: tuple[str, ...] = ()
    held: tuple[tuple[float, Unit], ...] = ()

    @property
    def seconds(self) -> float:
        return sum(n * unit.seconds for n, unit in self.parts)

    @property
    def bytes(self) -> float:
        """The run's peak memory above the imported library's."""
        return _bytes(self.held)


def _bytes(parts: Iterable[tuple[float, Unit]]) -> float:
    return sum(n * unit.bytes for n, unit in parts)


def _added(parts: Iterable[tuple[float, Unit]]) -> tuple[tuple[float, Unit], ...]:
    total: dict[Unit, float] = {}
    for n, unit in parts:
        total[unit] = total.get(unit, 0.0) + n
    return tuple((n, unit) for unit, n in total.items())


def work(*parts: tuple[float, Unit], lower: tuple[str, ...] = (), higher: tuple[str, ...] = ()) -> Estimate:
    """An estimate of these parts, those of one unit added up; one run, which holds all their memory at once."""
    added = _added(parts)
    return Estimate(added, lower, higher, tuple((n, unit) for n, unit in added if unit.bytes and n))


def in_turn(*runs: Iterable[tuple[float, Unit]], lower: tuple[str, ...] = (), higher: tuple[str, ...] = ()) -> Estimate:
    """Runs one after another, each letting go of its pools when it ends (a fleet per router, a
    planner's candidates): their work adds up, and their peak memory is the largest run's."""
    each = [work(*run) for run in runs]
    return Estimate(
        _added(part for run in each for part in run.parts),
        lower,
        higher,
        max((run.held for run in each), key=_bytes, default=()),
    )


# The units labs count in, and what one costs (bench/caps.py --budget checks them on real runs). Memory,
# measured on the schedulers' largest runs (docs/input.md; bench/estimates.py checks it): the frames of a traced run
# stay in its result (0.3 bytes a cell drawn, frames thinned), and vLLM V1's and SGLang's prefix caches outlive
# their runs (SGLang's radix trees are reference cycles, freed when Python's collector next runs: a search's
# runs pile up), 100 bytes a block in all; a fleet's pools, below.
FIXED = Unit("seconds of a run its bounds keep short", 1.0)
MAP_CELLS = Unit("memory-map cells drawn", 6e-8, bytes=0.3)
# The maps of a model whose layers are not all alike (vLLM V1's KV cache groups, SGLang's pools): each
# frame scans its pools (numpy passes over every unit of a pool that is drawn unit by unit) and draws,
# one by one, what requests and the cache hold (bench/hybrid_maps.py measures both)
MAP_SCANS = Unit("pool units scanned for memory maps", 4e-9)
GROUP_PAGES = Unit("KV cache group pages drawn", 1.6e-7)
POOL_SLOTS = Unit("pool slots drawn", 2e-8)
ENGINE_REQUESTS = Unit("requests through the papers' engine", 2.5e-4)
ENGINE_BLOCKS = Unit("KV blocks filled", 1.2e-6)
STEP_TOKENS = Unit("tokens decoded step by step", 1e-6)
HASHED_BLOCKS = Unit("KV blocks prefix-cached", 2e-7, bytes=100)
CACHE_BLOCKS = Unit("blocks inserted into a prefix cache", 5e-8)
PEEKS = Unit("prefix-cache lookups", 7e-7)
HASHED_PEEKS = Unit("lookups in a block-hash table", 9e-6)
HASHES = Unit("blocks hashed", 1e-8)
MODEL_PAIRS = Unit("mini-model attention pairs", 6e-6)
MODEL_CALLS = Unit("mini-model forward calls", 2e-4)
FLEET_REQUESTS = Unit("requests through a fleet's replicas", 1.5e-4)  # each admitted, stepped, finished, summarized
POOL_BLOCKS = Unit("blocks hashed into vLLM V1's block pool", 1e-6)  # a fleet's vLLM V1 replicas: every full block
PROBED_BLOCKS = Unit("prefix blocks probed by routers", 2e-7)  # a fleet's: each prompt's blocks, on each replica probed
DECODE_STEPS = Unit("decode steps of batches memory allows", 4e-7)  # a fleet's: output tokens / batch_at_most
# ... where vLLM V1 keeps a model's kinds of layer in KV cache groups: each step slides each group's window, request
# by request, not as arrays (3.0-3.3 us a group measured on gpt-oss-120b and gemma-3-27b; bench/estimates.py)
GROUP_STEPS = Unit("decode steps x vLLM V1's KV cache groups", 3.5e-6)
# ... and with LoRA adapters waiting for one of `max_loras` slots the steps go through the scheduler's general step,
# not the quiet ones (about 6 us each: a fleet of vLLM V1 replicas, 1,000 adapters, max_loras 1; docs/fleet.md)
ADAPTER_STEPS = Unit("decode steps of batches the adapter slots allow", 6e-6)
# ... and in the schedulers lab the steps adapters add to a vLLM V1 run, beyond those of the batches memory allows
# (its tokens and requests counted apart): 4 us each, fitted to its runs with 1000 adapters and max_loras 1
# (ShareGPT-like 2000 and 5000 requests at 20/s, long-context on scenario B; docs/today.md)
SLOT_STEPS = Unit("decode steps the adapter slots add", 4e-6)
# The planner prices every candidate of its grid by the roofline (and under cost_model=auto probes its pricing) before
# it simulates the ones left: 0.62 ms each measured on a grid of 2,688 that the roofline pruned whole (5 Dec)
PLAN_CANDIDATES = Unit("plan candidates priced", 6.5e-4)
# A fleet's replica brought to the next event or step (its steps counted apart), with the stretch of quiet steps it
# runs on the way (SGLang's: about 110 us an advance measured on the fleet lab's ShareGPT-like default, 5 Dec)
ADVANCES = Unit("replica advances", 2.5e-5)
CONTEXT_READS = Unit("mini-model tokens x context", 2.5e-6)  # a prefill or a cached decode: one batched call
# A fleet's replica sets up its KV pool when it is made, whatever its requests, a block at a time, and holds it
# until its fleet run ends (block_size 1: vLLM V1's 3.2e-7 s and 152-154 bytes, the papers' engine 4.5e-8 s and
# 39 bytes; bench/estimates.py, docs/input.md)
V1_POOL_SETUP = Unit("blocks set up in vLLM V1's replicas' pools", 3.2e-7, bytes=160)
PAGED_SETUP = Unit("blocks set up in the papers' engine's replicas' pools", 4.5e-8, bytes=45)
# ... SGLang's: arrays of token slots, 2.9 ns a slot (a fleet of 15 replicas with host tiers of 10 M slots each), 5.1-5.3
# bytes a slot on 8 and 32 replicas
SLOT_SETUP = Unit("token slots set up in SGLang's replicas' pools", 3e-9, bytes=5.5)
# A trace's requests carry their token ids (int64) for as long as the lab runs; a trace, bounded only by its
# MAX_TOKENS, can bring gigabytes, where the generated workloads' caps keep theirs to a few MB (not counted). 10
# bytes a token: the id's 8, and what a fleet run's caches and records grow by with the trace (docs/traces.md: a
# whole Mooncake-sized trace, 144 M ids, and windows of it: peak / estimate 0.93-0.98). SGLang's replicas fill
# their pools with the trace's prompts: a radix tree's keys as bytes, its slots and the slot arrays they are cut
# from, 26 bytes a slot on the same runs.
TRACE_TOKENS = Unit("token ids a trace's requests carry", 0.0, bytes=10)
TRACE_SLOTS = Unit("token slots of SGLang's replicas' pools caching a trace", 0.0, bytes=26)


def constant(seconds: float) -> Estimate:
    """The estimate of a lab that is short at any value its bounds allow."""
    return Estimate(((seconds, FIXED),))


def refused(estimate: Estimate, budget_s: float = BUDGET_S, memory_mb: float = MEMORY_MB) -> str | None:
    """The line that refuses a run over the budget of time or of memory (`refusal`), or None: the one
    check every face makes (`Lab.admit`)."""
    if estimate.seconds > budget_s:
        return refusal(estimate, budget_s)
    if estimate.bytes > memory_mb * MB:
        return memory_refusal(estimate, memory_mb)
    return None


def _counted(parts: Iterable[tuple[float, Unit]]) -> str:
    counted = ", ".join(f"{n:,.0f} {unit.name}" for n, unit in parts if unit is not FIXED and n)
    return f" ({counted})" if counted else ""


def _change(estimate: Estimate, otherwise: str) -> str:
    """Lower the parameters the run grows with, or raise those it shrinks with."""
    lower, higher = "/".join(estimate.lower), "/".join(estimate.higher)
    change = " or ".join(f"{verb} {names}" for verb, names in (("lower", lower), ("raise", higher)) if names)
    return change or otherwise


def refusal(estimate: Estimate, budget_s: float) -> str:
    """The one line that refuses a run over the budget. It starts with the parameters to change, as
    a bad value's line starts with its name (`from_query` puts those back to their defaults first)."""
    seconds = f"{estimate.seconds:,.0f}" if estimate.seconds >= 1 else f"{estimate.seconds:.2g}"
    return (
        f"{', '.join(estimate.lower + estimate.higher) or 'work'}: this run is estimated at "
        f"{seconds} s of work{_counted(p for p in estimate.parts if p[1].seconds)}, over the budget of {budget_s:g} s; "
        f"{_change(estimate, 'raise --budget')}"
    )


def memory_refusal(estimate: Estimate, memory_mb: float) -> str:
    """The line that refuses a run over the memory budget, in the form of `refusal`: what it holds at its peak."""
    return (
        f"{', '.join(estimate.lower + estimate.higher) or 'memory'}: this run is estimated at "
        f"{estimate.bytes / MB:,.0f} MB of memory{_counted(estimate.held)}, over the budget of {memory_mb:,.0f} MB; "
        f"{_change(estimate, 'raise --memory-budget')}"
    )
