"""Lab `engine`: one serving run on the paper GPU, a memory manager beside another.

Also holds `ServingLab`, the parameters every serving lab shares (scenario, workload,
memory knobs, SLO, the paper GPU's assumptions), so `max-rate` and `sweep` read them the same way.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np
import param

from kvweb.gpu.calibration import parse_runs
from kvweb.gpu.measured_cost import COST_MODELS, is_measured
from kvweb.budget import (
    ENGINE_BLOCKS,
    ENGINE_REQUESTS,
    HASHED_BLOCKS,
    MAP_CELLS,
    STEP_TOKENS,
    TRACE_SLOTS,
    TRACE_TOKENS,
    Estimate,
    Unit,
    work,
)
from kvweb.serving.loop.engine_setup import MEMORIES, PREEMPTIONS, SCENARIOS, Setup, ignored_by
from kvweb.lab import ADVANCED, ParamError, Progress, Text, no_progress
from kvweb.memo import Memo
from kvweb.labs.fragmentation import allocator_param
from kvweb.labs.paper_gpu import PaperGPULab
from kvweb.serving.loop.metrics import SLO, summarize
from kvweb.serving.load.traces import Trace, chosen, presets, replay
from kvweb.serving.load.workload import SHAPES, Request, closed_loop_workload
from kvweb.serving.memory.paged_memory import BLOCK_SIZE

PAPER = (
    "vLLM paper (Kwon et al., SOSP 2023), section 6.2, Fig. 12, ShareGPT: vLLM sustains 1.7-2.7x "
    "the request rate of Orca (Oracle) and 2.7-8x that of Orca (Max) at similar latency (request "
    "rates, not throughput); section 3.1, Fig. 2: only 20.4-38.2 % of the KV memory of those systems "
    "holds token states. This simulator is not expected to match those figures, only to move the same way."
)


# Runs the engine lab remembers (least recently used dropped first), shared by every session:
# a run is a pure function of its key, and results are only read.
RUNS_KEPT = 4
_RUNS: Memo[dict[str, Any]] = Memo(RUNS_KEPT)


def cost_model_param(default: str = "roofline") -> param.Selector:
    """The serving labs' and the planner's choice of step prices (kvweb/gpu/measured_cost.py): the
    lecture's engine labs keep the roofline, the schedulers, fleet and plan labs price by measured
    kernels wherever they exist (`auto`)."""
    return param.Selector(
        objects=list(COST_MODELS),
        default=default,
        doc="how a step is priced: roofline (the paper GPU's, with its assumptions), measured "
        "(kernels measured on H100-SXM, H200 and A100-80GB, vLLM's or SGLang's, from "
        "aiconfigurator-core 0.12.0, plus the engine's fitted step overhead; docs/accuracy.md) "
        "or auto (measured where kernels exist for the GPU, model and precision, else roofline; "
        "the result's step_cost says which)",
    )


def trace_held(requests: list[Request], slots: float = 0.0) -> list[tuple[float, Unit]]:
    """The memory a trace's requests hold while a run lasts: their token ids, and `slots` of SGLang's pools
    caching them (kvweb/budget.py, TRACE_TOKENS)."""
    ids = sum(len(r.tokens) for r in requests if r.tokens is not None)
    return [(ids, TRACE_TOKENS), (slots if ids else 0.0, TRACE_SLOTS)]


class TraceReplay(param.Parameterized):
    """The parameters of a replayed trace (docs/traces.md), shared by the serving labs and the planner
    (each with `workload`, one of whose values is trace)."""

    trace_preset = param.Selector(
        objects=["none", *presets()],
        default="none",
        precedence=ADVANCED,
        doc="workload=trace: a trace shipped with kvweb, replayed when no trace_file or trace "
        "is given: synthetic, in the formats of Mooncake (with shared prefixes), Azure's "
        "LLM inference traces and BurstGPT (docs/traces.md)",
    )
    trace_file = Text(
        "",
        max_length=100,
        precedence=ADVANCED,
        doc="workload=trace: a trace file (Mooncake JSONL, Azure or BurstGPT CSV, kvweb CSV or JSON): on "
        "the command line its path; in the app the file picked, named by its name, rows and digest",
    )
    trace_scale = param.Number(
        1.0,
        bounds=(0.1, 10.0),
        precedence=ADVANCED,
        doc="workload=trace: replay at this multiple of the trace's rate (2: twice as fast)",
    )
    trace_start = param.Number(
        0.0,
        bounds=(0.0, 10_000_000.0),
        precedence=ADVANCED,
        doc="workload=trace: replay from this second of the trace (its first row is at 0)",
    )
    trace_duration = param.Number(
        0.0,
        bounds=(0.0, 10_000_000.0),
        precedence=ADVANCED,
        doc="workload=trace: replay this many seconds of the trace (0: to its end)",
    )

    def replay_ignored(self) -> tuple[str, ...]:
        """Only a trace is scaled and cut. (A trace file or preset may be chosen before workload=trace.)"""
        return () if self.workload == "trace" else ("trace_scale", "trace_start", "trace_duration")

    def trace_read(self) -> Trace:
        """The trace of workload=trace: the file's, else the preset's."""
        return chosen(self.trace_file, self.trace_preset)

    def replayed(self) -> list[Request]:
        """The trace's requests, scaled and cut."""
        return replay(self.trace_read(), self.trace_scale, self.trace_start, self.trace_duration)


class ServingLab(PaperGPULab, TraceReplay):
    """Parameters shared by the serving labs (no lab_name: not a lab by itself)."""

    scenario = param.Selector(
        objects=list(SCENARIOS),
        default="A",
        doc="A: OPT-13B-like on A100-40GB, ShareGPT-like (memory-tight); B: Llama-3-8B on H100-SXM, long prompts (roomy)",
    )
    cost_model = cost_model_param()
    workload = param.Selector(
        objects=["scenario", *SHAPES, "closed-loop", "trace"],
        default="scenario",
        doc="request lengths: the scenario's own, a named shape, or the uploaded trace; "
        "closed-loop: `concurrency` clients, each sending its next request (prompt_len in, "
        "output_len out) the moment its last one finishes, as vllm bench serve "
        "--max-concurrency does (no arrival rate)",
    )
    rate = param.Number(2.0, bounds=(0.01, 1000.0), doc="Poisson arrival rate, requests per second")
    requests = param.Integer(1000, bounds=(1, 5000), doc="requests to serve (a trace brings its own)")
    concurrency = param.Integer(
        16,
        bounds=(1, 1024),
        precedence=ADVANCED,
        doc="closed-loop: requests kept in flight (clients, each with one request at a time)",
    )
    block_size = param.Integer(
        BLOCK_SIZE, bounds=(1, 256), doc="paged: tokens per KV block (also the unit of swap copies)"
    )
    watermark = param.Number(0.01, bounds=(0.0, 0.5), doc="paged: fraction of blocks kept free when admitting")
    preemption = param.Selector(
        objects=list(PREEMPTIONS),
        default="recompute",
        doc="how a preempted request comes back: recompute its KV, or swap it out and in over the host link",
    )
    allocator = allocator_param(precedence=ADVANCED)
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="seed of arrivals and lengths")
    prompt_len = param.Integer(
        128, bounds=(1, 8191), doc="fixed: prompt tokens; uniform: the largest prompt", precedence=ADVANCED
    )
    output_len = param.Integer(
        128, bounds=(1, 8191), doc="fixed: output tokens; uniform: the largest output", precedence=ADVANCED
    )
    ttft_slo_s = param.Number(2.0, bounds=(0.01, 600.0), doc="SLO: time to first token, seconds", precedence=ADVANCED)
    tpot_slo_ms = param.Number(
        100.0, bounds=(1.0, 10_000.0), doc="SLO: mean time per output token after the first, ms", precedence=ADVANCED
    )
    trace = Text(
        "",
        max_length=4000,
        precedence=ADVANCED,
        doc="workload=trace: rows of arrival (s), prompt_len, output_len as CSV (rows split by newlines or ';') or JSON",
    )
    calibration = Text(
        "",
        max_length=4000,
        precedence=ADVANCED,
        doc="cost_model=measured: your own vllm bench serve or sglang.bench_serving results at a fixed "
        "--max-concurrency (their JSON summaries: max_concurrency, completed, total_input_tokens, "
        "total_output_tokens, mean_ttft_ms, mean_tpot_ms; one object, a list or JSON lines): the "
        "engine's step overhead is fitted to them",
    )

    def check(self) -> None:
        if self.calibration.strip() and self.cost_model == "roofline":
            raise ParamError("calibration: given, but cost_model is roofline; set cost_model to measured to use it")
        cost = self.setup().cost_model()  # a precision the model cannot take, or no measured kernels: a ParamError
        if self.calibration.strip() and not is_measured(cost):
            raise ParamError(
                f"calibration: given, but no measured kernels price {cost.model.name} on {cost.gpu.name} "
                "(cost_model=auto takes the roofline there); set cost_model to measured to see why"
            )
        max_len = self.setup().spec.max_len
        if self.workload == "trace":
            self.workload_at(self.rate)  # read, and its window holds a request
        elif self.trace.strip():
            raise ParamError(f"trace: given, but workload is '{self.workload}'; set workload to trace to use it")
        if self.workload in ("fixed", "uniform", "closed-loop") and self.prompt_len + self.output_len > max_len:
            raise ParamError(
                f"prompt_len + output_len: {self.prompt_len + self.output_len} is not allowed; "
                f"scenario {self.scenario} allows at most {max_len}"
            )

    def setup(self, memory: str = "paged") -> Setup:
        return Setup(
            self.scenario,
            memory,
            self.block_size,
            self.watermark,
            self.preemption,
            self.allocator,
            slo=SLO(self.ttft_slo_s, self.tpot_slo_ms / 1e3),
            assumptions=self.assumptions(),
            pricing=self.cost_model,
            runs=parse_runs(self.calibration) if self.calibration.strip() else (),
        )

    def ignored(self) -> tuple[str, ...]:
        """A closed loop sends each request when one finishes: no arrival rate is read."""
        return (*(("rate",) if self.workload == "closed-loop" else ()), *self.replay_ignored())

    def trace_read(self) -> Trace:
        """The trace of workload=trace: the file's, else the pasted rows, else the preset's."""
        return chosen(self.trace_file, self.trace_preset, self.trace)

    def workload_at(self, rate: float) -> list[Request]:
        if self.workload == "trace":
            return self.replayed()
        if self.workload == "closed-loop":  # no rate: each request arrives when one finishes
            return closed_loop_workload(
                "fixed",
                self.requests,
                self.concurrency,
                self.setup().spec.max_len,
                self.seed,
                self.prompt_len,
                self.output_len,
            )
        shape = "" if self.workload == "scenario" else self.workload
        return self.setup().workload(self.requests, rate, self.seed, shape, self.prompt_len, self.output_len)

    def scenario_info(self) -> dict[str, Any]:
        setup = self.setup()
        cost = setup.cost_model()
        return {
            "name": self.scenario,
            "about": setup.spec.about,
            "gpu": setup.spec.gpu,
            "model": setup.spec.model,
            "max_len": setup.spec.max_len,
            "kv_capacity_tokens": cost.kv_capacity_tokens,
            "kv_capacity_blocks": cost.kv_capacity_blocks(self.block_size),
            "kv_bytes_per_token_total": cost.kv_bytes_per_token,
            "units": "decimal (1 GB = 1e9 B)",
            "host_tokens": cost.kv_capacity_tokens,
        }  # swap space: the engine's default, as large as the GPU's KV

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        """`serve`'s result beside whether the scenario's model fits under these assumptions;
        when it does not, nothing is served and no serving figure is made up."""
        cost = self.setup().cost_model()
        served = self.serve(progress) if cost.fits else {}  # (a what-if is served)
        replayed = {"replayed": self.replay_summary()} if self.workload == "trace" else {}
        return {**cost.fit(), "scenario": self.scenario_info(), **replayed, **served}

    def replay_summary(self) -> dict[str, Any]:
        """The trace read and the part of it served: its rows, the window's and the scale."""
        return {
            **self.trace_read().summary(),
            "served_rows": len(self.workload_at(self.rate)),
            "scale": self.trace_scale,
            "window_start_s": self.trace_start,
            "window_s": self.trace_duration,
        }

    def serve(self, progress: Progress) -> dict[str, Any]:
        raise NotImplementedError

    def work_knobs(self) -> dict[str, tuple[str, ...]]:
        """The parameters a serving run's work grows with (`lower`) and shrinks with (`higher`)."""
        lengths = ("prompt_len", "output_len") if self.workload in ("fixed", "uniform", "closed-loop") else ()
        count = ("trace_duration",) if self.workload == "trace" else ("requests",)  # a trace brings its own requests
        return {"lower": (*count, *lengths), "higher": ("block_size",)}

    def served_work(
        self,
        requests: list[Request],
        block_size: int = 0,
        map_cells: int = 0,
        stepwise: bool = False,
        max_seqs: int = Setup.max_seqs,
        frame_work: Sequence[tuple[float, Unit]] = (),
    ) -> list[tuple[float, Unit]]:
        """One simulated run's work: its requests and its tokens in blocks of `block_size` (0: a
        reserved manager, about 16 tokens of work each); `stepwise` (a scheduler that goes through
        every decode step, not only those where something happens, and caches prefixes), its output
        tokens and its blocks hashed too; when traced, the memory maps it draws (`frames_at_most`, of
        `map_cells` cells each, or costing `frame_work` each)."""
        tokens = sum(r.prompt + r.output for r in requests)
        parts = [(len(requests), ENGINE_REQUESTS), (tokens / (block_size or 16), ENGINE_BLOCKS)]
        if stepwise:
            parts += [(sum(r.output for r in requests), STEP_TOKENS), (tokens / block_size, HASHED_BLOCKS)]
        if (map_cells or frame_work) and requests:
            cost = self.setup().cost_model()
            prompt = sum(r.prompt for r in requests) // len(requests)
            serial_s = sum(r.output for r in requests) * cost.decode_step_cost(1, 0) + len(
                requests
            ) * cost.prefill_cost(prompt)  # one request at a time, one token a step
            together = batch_at_most(requests, cost.kv_capacity_tokens, max_seqs)  # a full batch's steps take longer
            if self.workload == "closed-loop":  # never more in flight than the clients
                together = min(together, self.concurrency)
            horizon = max((r.arrival for r in requests), default=0.0) or 1.0
            longest = horizon + sum(r.delay for r in requests) + 4 * serial_s / together
            frames = frames_at_most(horizon, longest)
            parts += [(frames * n, unit) for n, unit in ((map_cells, MAP_CELLS), *frame_work) if n]
        return parts


def batch_at_most(requests: list[Request], kv_tokens: int, max_seqs: int) -> int:
    """Requests one engine runs at once, about: as many as its KV memory holds at their mean
    length, and the batch limit allow."""
    tokens = sum(r.prompt + r.output for r in requests)
    return max(1, min(max_seqs, len(requests), kv_tokens * len(requests) // max(tokens, 1)))


def frames_at_most(horizon: float, longest_s: float) -> int:
    """Memory maps a traced run of at most `longest_s` simulated seconds draws (TraceRecorder:
    one every horizon / 50 s, 80 at most, then every other dropped and the interval doubled)."""
    interval = horizon / 50
    if longest_s <= 80 * interval:
        return math.ceil(longest_s / interval) + 1
    return 80 + 40 * math.ceil(math.log2(longest_s / (80 * interval))) + 1


class EngineLab(ServingLab):
    lab_name = "engine"
    title = "Serving engine: paged vs reserved KV memory"
    summary = (
        "Continuous batching on the paper GPU: requests arrive, are admitted FCFS while memory "
        "allows, decode one token per step, and are preempted when paged memory runs out. "
        "The memory map shows who holds which block or reserved range over simulated time."
    )

    memory = param.Selector(
        objects=list(MEMORIES),
        default="paged",
        doc="KV memory manager: reserved max / pow2 / oracle (Orca), or paged (vLLM)",
    )
    compare = param.Selector(
        objects=["none", *MEMORIES],
        default="oracle",
        doc="a second manager run on the same requests, shown side by side",
    )

    def estimate(self) -> Estimate:
        """Each manager's traced run: paged memory's map has a cell per block, a reserved one's 1024."""
        requests = self.workload_at(self.rate)
        kinds = [self.memory] + ([] if self.compare == "none" else [self.compare])
        blocks = self.setup().cost_model().kv_capacity_blocks(self.block_size)
        runs = [
            self.served_work(requests, self.block_size, blocks)
            if kind == "paged"
            else self.served_work(requests, 0, 1024)
            for kind in kinds
        ]
        held = trace_held(requests) if self.workload == "trace" else []
        return work(*(part for run in runs for part in run), *held, **self.work_knobs())

    def serve(self, progress: Progress) -> dict[str, Any]:
        requests = self.workload_at(self.rate)
        kinds = [self.memory] + ([] if self.compare == "none" else [self.compare])
        runs = []
        for i, kind in enumerate(kinds):

            def part(fraction: float, message: str, i: int = i) -> None:
                progress((i + fraction) / len(kinds), f"{kind}: {message}")

            runs.append(self.served_once(kind, requests, part))
        result = dict(runs[0])
        result["compare"] = runs[1] if len(runs) > 1 else None
        frame_lists = [r["trace"]["frames"] for r in runs]
        result["timeline"] = timeline(frame_lists)
        result["opening_step"] = opening_step(frame_lists, result["timeline"])
        result["submitted"] = len(requests)
        result["paper"] = PAPER
        return result

    def served_once(self, kind: str, requests: list[Request], progress: Progress) -> dict[str, Any]:
        """One manager's summarized, traced run, remembered: it depends only on the parameters
        besides `memory` and `compare` and those the manager ignores (`ignored_by`), so changing
        `compare`, or the block size beside a reserved manager, runs just the manager whose
        inputs changed (in the browser that halves the wait)."""
        key = self.key(("compare", *ignored_by(kind)), memory=kind)

        def serve() -> dict[str, Any]:
            setup = self.setup(kind)
            run = setup.run(requests, progress, trace=True)
            return {"memory": kind, **summarize(run, setup.slo), "trace": run.trace}

        return _RUNS.get(key, serve)


def timeline(frame_lists: list[list[dict[str, Any]]]) -> dict[str, list]:
    """One clock for side-by-side maps: every frame time of every run, and for each run the
    frame on show at that time (its latest frame not after it)."""
    times = sorted({f["t"] for frames in frame_lists for f in frames})
    shown = []
    for frames in frame_lists:
        starts = [f["t"] for f in frames]
        shown.append([max(0, bisect_right(starts, t) - 1) for t in times])
    return {"t": times, "frames": shown}


def opening_step(frame_lists: list[list[dict[str, Any]]], clock: dict[str, list]) -> int:
    """The step the lab opens on: the first that shows the most of preemption at once (cells
    it freed, work come back, KV swapped out on the host), or, in a run without any, the
    one with the most memory held."""
    shown = [[frames[at[i]] for frames, at in zip(frame_lists, clock["frames"])] for i in range(len(clock["t"]))]
    shows = [sum(any(f[key] for f in frames) for key in ("freed", "returned", "host")) for frames in shown]
    if any(shows):
        return shows.index(max(shows))
    cells = [[int(np.count_nonzero(np.asarray(f["owner"]) >= 0)) for f in frames] for frames in frame_lists]
    held = [sum(count[at[i]] for count, at in zip(cells, clock["frames"])) for i in range(len(clock["t"]))]
    return max(range(len(held)), key=held.__getitem__, default=0)
