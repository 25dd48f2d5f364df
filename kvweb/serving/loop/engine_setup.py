"""The reference scenarios and one place that turns choices into a ready engine run.

Scenario A is memory-tight (OPT-13B-like on an A100-40GB: about 12 thousand tokens of KV,
ShareGPT-like requests); B is roomy (Llama-3-8B on an H100: over 400 thousand tokens, long
prompts). Labs, benchmarks and tests build their runs here so they all mean the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from kvweb.serving.memory.allocator import ALLOCATORS
from kvweb.serving.loop.engine_trace import TraceRecorder
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.gpu.calibration import BenchRun
from kvweb.gpu.measured_cost import is_measured, priced
from kvweb.lab import Progress, no_progress
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.memory.paged_memory import BLOCK_SIZE, PagedMemory
from kvweb.serving.schedulers.paper_scheduler import MemoryManager, PaperConfig, PaperScheduler
from kvweb.serving.memory.reserved_memory import ReservedMemory
from kvweb.serving.loop.sequence import Run
from kvweb.serving.load.workload import Request, poisson_workload


@dataclass(frozen=True)
class Scenario:
    name: str
    gpu: str
    model: str
    lengths: str  # a workload length shape
    max_len: int  # the model's limit on prompt + output
    about: str


SCENARIOS = {
    "A": Scenario(
        "A",
        "A100-40GB",
        "opt-13b-like",
        "sharegpt",
        2048,
        "memory-tight: OPT-13B-like on A100-40GB, ShareGPT-like requests",
    ),
    "B": Scenario("B", "H100-SXM", "llama-3-8b", "long-context", 8192, "roomy: Llama-3-8B on H100-SXM, long prompts"),
}
MEMORIES = ("max", "pow2", "oracle", "paged")
PREEMPTIONS = ("recompute", "swap")


@lru_cache(maxsize=8)
def _cost_model(
    gpu: str, model: str, assumptions: tuple[tuple[str, Any], ...], kind: str, engine: str, runs: tuple[BenchRun, ...]
) -> CostModel:
    return priced(kind, engine, GPUS[gpu], MODELS[model], dict(assumptions), runs)


def ignored_by(memory: str) -> tuple[str, ...]:
    """The `Setup` choices a memory manager's runs do not depend on (a lab that remembers runs
    leaves them out of its key). Reserved memory never runs short (its reservation covers all
    growth), so nothing is ever preempted: block size (paged blocks, swap copies), watermark and
    preemption mode never come into play. Paged memory has no contiguous allocator."""
    return ("allocator",) if memory == "paged" else ("block_size", "watermark", "preemption")


@dataclass(frozen=True)
class Setup:
    """Every choice a serving run depends on, besides the requests."""

    scenario: str = "A"
    memory: str = "paged"
    block_size: int = BLOCK_SIZE
    watermark: float = 0.01
    preemption: str = "recompute"
    allocator: str = "first-fit"
    max_seqs: int = 256
    slo: SLO = SLO()
    assumptions: Mapping[str, Any] = field(default_factory=dict)  # CostModel keywords; none: its defaults
    model: str = ""  # a model of MODELS in place of the scenario's ("": the scenario's)
    gpu: str = ""  # a GPU of GPUS in place of the scenario's ("": the scenario's)
    max_len: int = 0  # the limit on prompt + output in place of the scenario's (0: the scenario's)
    pricing: str = "roofline"  # one of COST_MODELS
    kernels: str = "vllm"  # the engine whose measured kernels price the steps (a measured `pricing` only)
    runs: tuple[BenchRun, ...] = ()  # the user's benchmark runs the measured model is calibrated to
    # auto: the engines whose kernels must all exist for any to price (the modes a lab compares side
    # by side: steps priced two ways in one comparison would mislead); else all take the roofline
    alike: tuple[str, ...] = ()

    @property
    def spec(self) -> Scenario:
        """The scenario, with the GPU and the length limit given in place of its own."""
        spec = SCENARIOS[self.scenario]
        if not (self.gpu or self.max_len):
            return spec
        return replace(spec, gpu=self.gpu or spec.gpu, max_len=self.max_len or spec.max_len)

    def cost_model(self) -> CostModel:
        """The scenario's cost model under these assumptions: one object per distinct choice (the
        last few kept), so the runs of a max-rate search share the prefill prices it remembers."""
        pricing = self.pricing
        if pricing == "auto" and not all(is_measured(self.with_(kernels=e, alike=()).cost_model()) for e in self.alike):
            pricing = "roofline"
        return _cost_model(
            self.spec.gpu,
            self.model or self.spec.model,
            tuple(sorted(self.assumptions.items())),
            pricing,
            *((self.kernels, self.runs) if pricing != "roofline" else ("", ())),
        )

    def memory_manager(self, cost: CostModel) -> MemoryManager:
        if self.memory == "paged":
            return PagedMemory(cost.kv_capacity_blocks(self.block_size), self.block_size, self.watermark)
        return ReservedMemory(self.memory, ALLOCATORS[self.allocator](cost.kv_capacity_tokens), self.spec.max_len)

    def with_(self, **changes: object) -> Setup:
        return replace(self, **changes)  # type: ignore[arg-type]

    def workload(
        self, n: int, rate: float, seed: int, lengths: str = "", prompt_len: int = 128, output_len: int = 128
    ) -> list[Request]:
        """Poisson arrivals with the scenario's lengths (or the named shape)."""
        return poisson_workload(lengths or self.spec.lengths, n, rate, self.spec.max_len, seed, prompt_len, output_len)

    def engine(self, give_up_after: int | None = None) -> PaperScheduler:
        """The papers' engine with these choices, to `run` (or `start` and `advance` step by step)."""
        cost = self.cost_model()
        config = PaperConfig(self.spec.max_len, self.preemption, self.block_size, self.max_seqs)
        return PaperScheduler(cost, self.memory_manager(cost), config, self.slo, give_up_after)

    def run(
        self,
        requests: list[Request],
        progress: Progress = no_progress,
        trace: bool = False,
        give_up_after: int | None = None,
        max_cells: int = 1024,
    ) -> Run:
        engine = self.engine(give_up_after)
        recorder = None
        if trace:
            horizon = max((r.arrival for r in requests), default=0.0) or 1.0
            recorder = TraceRecorder(horizon / 200, max_cells=max_cells)
        return engine.run(requests, progress, trace=recorder)
