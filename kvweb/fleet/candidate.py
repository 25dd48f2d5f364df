"""A candidate fleet, the workload it must serve, and `evaluate`: one candidate's simulated figures.

A candidate is one configuration the capacity planner (`planner.py`) prices: a GPU type, the
tensor-parallel GPUs of each replica, the weight and KV precision, the scheduler every replica
runs, the number of replicas and the router in front of them. `evaluate` is the one function
that simulates it; the planner, its backends and the lab call nothing else. It is the fleet's
simulation (kvweb/fleet/fleet.py): the candidate's replicas on one clock behind its router,
every request routed at its arrival, the figures from the union of the replicas' requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.gpu.measured_cost import priced
from kvweb.fleet.fleet import serve
from kvweb.prefix.modes import MODES, Settings
from kvweb.serving.loop.continuous_batching import ContinuousBatching, prefix_figures
from kvweb.serving.loop.metrics import SLO, attainment, distribution, throughput, tpot, ttft
from kvweb.serving.load.traces import chosen, replay
from kvweb.serving.load.workload import Request, poisson_workload, with_adapters
from kvweb.serving.memory.lora import LoraConfig

PERCENTILES = ("p50", "p90", "p99")


@dataclass(frozen=True)
class Candidate:
    """One fleet configuration: `replicas` copies of a `tp`-GPU group behind one router."""

    gpu: str
    tp: int
    weight_precision: str
    kv_precision: str
    scheduler: str
    replicas: int
    router: str

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Candidate:
        """The candidate a plan's row stands for (the row holds its fields)."""
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    @property
    def key(self) -> str:
        """A stable name: the candidate's seed and the order of the plan's tables come from it."""
        return (
            f"{self.gpu}/tp{self.tp}/w-{self.weight_precision}/kv-{self.kv_precision}/{self.scheduler}"
            f"/x{self.replicas}/{self.router}"
        )

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp

    def cost_model(self, model: str, pricing: str = "roofline") -> CostModel:
        """One replica's step prices: the roofline (the paper GPU's assumptions at their defaults) or
        its scheduler's measured kernels (a ParamError where there are none)."""
        return priced(
            pricing,
            MODES[self.scheduler].engine,
            GPUS[self.gpu],
            MODELS[model],
            {"tp": self.tp, "weight_precision": self.weight_precision, "kv_precision": self.kv_precision},
        )


@dataclass(frozen=True)
class Workload:
    """What the fleet must serve, and the SLO it must meet. Every candidate serves the same
    requests (from `seed`: common random numbers, so candidates are compared like with like)."""

    model: str
    shape: str  # a length shape of serving/load/workload.py
    requests: int
    rate: float  # target arrival rate, requests per second (Poisson)
    seed: int
    max_len: int  # the model's limit on prompt + output
    prompt_len: int = 128  # fixed / uniform shapes
    output_len: int = 128
    ttft_slo_s: float = 2.0
    tpot_slo_s: float = 0.1
    percentile: str = "p90"  # the SLO's TTFT and TPOT are read at this percentile
    attainment: float = 0.9  # share of requests meeting both (rejected ones count as misses), at least
    pricing: str = "roofline"  # how steps are priced: one of COST_MODELS (kvweb/gpu/measured_cost.py)
    # shape "trace": trace_file, trace_preset, trace_scale, trace_start, trace_duration (serving/load/traces.py; a file
    # is found in the processes of this machine, a preset anywhere)
    trace: tuple[str, str, float, float, float] | None = None
    loras: int = 0  # LoRA adapters the requests use (serving/memory/lora.py; 0: none)
    lora: LoraConfig | None = None  # every replica's adapter slots (with loras > 0)

    def arrivals(self) -> list[Request]:
        """The requests, made once per workload (the planner's bounds read them for every candidate)."""
        return _arrivals(self)

    @property
    def slo(self) -> SLO:
        return SLO(self.ttft_slo_s, self.tpot_slo_s)


@lru_cache(maxsize=4)
def _arrivals(workload: Workload) -> list[Request]:
    w = workload
    if w.trace is not None:
        file_key, preset_name, scale, start, duration = w.trace
        requests = replay(chosen(file_key, preset_name), scale, start, duration)
    else:
        requests = poisson_workload(w.shape, w.requests, w.rate, w.max_len, w.seed, w.prompt_len, w.output_len)
    return with_adapters(requests, w.loras, w.seed)


def replica(candidate: Candidate, workload: Workload) -> ContinuousBatching:
    """One replica with the candidate's scheduler at the engines' defaults (`Settings`: for the GPU,
    vLLM's token budget and SGLang's chunk size; 16-token blocks), not started; with LoRA adapters,
    their slots taken from its KV cache."""
    cost = candidate.cost_model(workload.model, workload.pricing)
    return MODES[candidate.scheduler].make(Settings(cost, workload.max_len, workload.slo, lora=workload.lora))


def evaluate(candidate: Candidate, workload: Workload, seed: int) -> dict[str, Any]:
    """The candidate's fleet figures on the workload: TTFT and TPOT percentiles (seconds), SLO
    attainment and whether the SLO is met, throughput, requests finished and rejected, the
    fleet's prefix hit rate, and with LoRA adapters the loads of adapters into the replicas' slots. `seed` is the candidate's own (planner.candidate_seed), for a
    router's random choices: the routers at their defaults make none (the cost router's
    temperature is 0), so it is not read yet."""
    fleet = serve(workload.arrivals(), lambda: replica(candidate, workload), candidate.replicas, candidate.router)
    run = fleet.merged()
    seqs, slo = run.sequences, workload.slo
    ttfts, tpots = [ttft(s, run.outside_s) for s in seqs], [tpot(s) for s in seqs]
    attained = attainment(run, slo, ttfts, tpots)
    first, per_token = distribution(ttfts), distribution(tpots)
    q = workload.percentile
    meets = bool(seqs) and attained >= workload.attainment and first[q] <= slo.ttft_s and per_token[q] <= slo.tpot_s
    return {
        **{f"ttft_{p}_s": first[p] for p in PERCENTILES},
        **{f"tpot_{p}_s": per_token[p] for p in PERCENTILES},
        "slo_attainment": attained,
        "meets_slo": meets,
        "throughput_tok_s": throughput(run),
        "finished": len(seqs),
        "rejected": len(run.rejected),
        "preemptions": run.preemptions,
        "prefix_hit_rate": prefix_figures(run)["prefix_hit_rate"],
        **({"adapter_loads": sum(a["loads"] for a in fleet.adapters)} if fleet.adapters else {}),
    }
