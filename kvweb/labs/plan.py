"""Lab `plan`: the capacity planner (kvweb/fleet/planner.py) on the lab contract.

The grid's axes are comma-separated lists (one text parameter each, so the same schema makes the
CLI flags, the widgets and the URL); the run evaluates the candidates one after another,
reporting each and stopping between two when cancelled. `kvweb plan` runs the same lab on local
processes or Ray (kvweb/fleet/backends.py): the browser has neither.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import param

from kvweb.budget import (
    ADVANCES,
    ADAPTER_STEPS,
    DECODE_STEPS,
    ENGINE_BLOCKS,
    FLEET_REQUESTS,
    GROUP_STEPS,
    PAGED_SETUP,
    PLAN_CANDIDATES,
    POOL_BLOCKS,
    PROBED_BLOCKS,
    SLOT_SETUP,
    V1_POOL_SETUP,
    Estimate,
    Unit,
    in_turn,
)
from kvweb.fleet.backends import Processes, RayBackend, Serial
from kvweb.fleet.candidate import PERCENTILES, Candidate, Workload
from kvweb.fleet.planner import GPU_PRICES, LATENCIES, grid, plan, pricing, roofline
from kvweb.fleet.routers import ROUTERS
from kvweb.gpu import GPUS, KV_PRECISIONS, MODELS, TP_SIZES, WEIGHT_PRECISIONS, CostModel
from kvweb.gpu.explain import Explanation
from kvweb.labs.engine import TraceReplay, batch_at_most, cost_model_param, trace_held
from kvweb.lab import ADVANCED, Lab, ParamError, Progress, Text, no_progress, shown
from kvweb.parsing import to_number
from kvweb.prefix.modes import MAX_SEQS, MODES
from kvweb.serving.memory.hybrid_kv import kv_layout
from kvweb.serving.load.traces import mean_rate
from kvweb.serving.load.workload import SHAPES, Request
from kvweb.serving.memory.lora import LORA_RANKS, TARGETS, LoraConfig, lora_refusal
from kvweb.labs.modes_lab import LORA_SETTINGS, MAX_LORAS

MAX_CANDIDATES = 4096  # grid points before pruning


def kv_groups(cost: CostModel, scheduler: str, block_size: int = 16) -> int:
    """The KV cache groups a vLLM V1 replica slides at every decode step, request by request, on a
    model whose layers are not all alike; 0 where its quiet steps run as arrays."""
    layout = kv_layout(cost, block_size)
    return len(layout.groups) if MODES[scheduler].layers_apart == "groups" and layout.hybrid else 0


def fleet_work(
    requests: list[Request],
    replicas: int,
    probed: int,
    kv_tokens: int,
    max_seqs: int,
    scheduler: str,
    block_size: int = 16,
    rounds: float = 0.0,
    transfers: bool = False,
    groups: int = 0,
    trace: bool = False,
    max_loras: int = 0,
    host_tokens: int = 0,
) -> list[tuple[float, Unit]]:
    """One fleet simulation's work (a plan's candidate, a fleet lab's router or split run): its
    requests and their blocks through the schedulers (vLLM V1's and SGLang's quiet steps run as
    arrays: counting every output token step by step made the estimate 3-5x high), the decode steps of the batches each replica's `kv_tokens` hold (the slow runs: long
    outputs in little memory), vLLM V1's blocks hashed into its pool (with `transfers`, a split's
    decode side hashes each prompt again as it reserves it), every replica advanced at each arrival
    and at `rounds` more times, and each decision's prefix probes: the prompt's blocks read on
    `probed` replicas (a request without content is shared with none: nothing to read), and each
    replica's pool of `kv_tokens` in blocks (SGLang's: in token slots, arrays, memory only), set up whatever
    the requests and held until the run ends; with `groups` (`kv_groups`), each decode step slides every group;
    with `trace` (requests replayed from a trace), the token ids its requests carry and SGLang's pools caching them
    (`trace_held`); with `host_tokens`, SGLang's host tier's slots, set up with each pool; with LoRA adapters, the
    general steps of batches of at most `max_loras` adapters
    (`adapter_batch`). The figures,
    estimate beside CPU time: docs/fleet.md,
    `python -m bench.fleet --estimates`; the pools: docs/input.md, `python -m bench.estimates`."""
    tokens = sum(r.prompt + r.output for r in requests)
    prompts = sum(r.prompt for r in requests)
    batch = batch_at_most(requests, kv_tokens, max_seqs)
    outputs = sum(r.output for r in requests)
    steps = outputs / batch
    hashed = (tokens + (prompts if transfers else 0)) / block_size if MODES[scheduler].hashes_blocks else 0
    blocks = MODES[scheduler].cell == "block"
    # SGLang's host tier is a radix tree over slots of its own, made with the pool (vLLM V1's fills as it goes)
    pools = replicas * (kv_tokens / block_size if blocks else kv_tokens + host_tokens)
    return [
        (pools, (V1_POOL_SETUP if MODES[scheduler].hashes_blocks else PAGED_SETUP) if blocks else SLOT_SETUP),
        (len(requests), FLEET_REQUESTS),
        (tokens / block_size, ENGINE_BLOCKS),
        (steps * groups, GROUP_STEPS) if groups else (steps, DECODE_STEPS),
        *([(outputs / adapter_batch(requests, batch, max_loras), ADAPTER_STEPS)] if max_loras else []),
        (hashed, POOL_BLOCKS),
        ((len(requests) + rounds) * replicas, ADVANCES),
        (sum(r.prompt for r in requests if r.tokens is not None) / block_size * probed, PROBED_BLOCKS),
        *(trace_held(requests, pools if not blocks else 0) if trace else ()),
    ]


def adapter_batch(requests: list[Request], batch: int, max_loras: int) -> float:
    """Requests one engine runs at once, about, when a batch holds at most `max_loras` adapters
    (vLLM's `scheduled_loras` check): of the `batch` memory allows, the base model's requests, and
    of the adapters' ones the share that `max_loras` times the chance that two of them share an
    adapter (the sum of the adapters' squared shares) gives."""
    per_adapter = Counter(r.adapter for r in requests if r.adapter)
    adapted = sum(per_adapter.values())
    if not adapted:
        return batch
    shared = sum((c / adapted) ** 2 for c in per_adapter.values())
    base = 1 - adapted / len(requests)
    return max(1.0, batch * (base + (1 - base) * min(1.0, max_loras * shared)))


def choices(name: str, text: str, allowed: Sequence[Any]) -> list[Any]:
    """A comma-separated list of allowed values, each once, in the order given."""
    by_text = {str(a): a for a in allowed}
    items = [t.strip() for t in text.split(",")]
    for t in items:
        if t not in by_text:
            raise ParamError(
                f"{name}: {shown(t)} is not allowed; expected a comma-separated list of {', '.join(by_text)}"
            )
    return [by_text[t] for t in dict.fromkeys(items)]


def price_table(text: str) -> dict[str, float]:
    """GPU_PRICES with the `GPU=dollars` items of a comma-separated text put in their place."""
    prices = dict(GPU_PRICES)
    for item in filter(None, (t.strip() for t in text.split(","))):
        gpu, _, value = item.partition("=")
        dollars = to_number(value)
        if gpu.strip() not in GPUS or dollars is None or not 0 < dollars <= 1000:
            raise ParamError(
                f"prices: {shown(item)} is not allowed; expected GPU=dollars per GPU-hour (above 0, at "
                f"most 1000) for a GPU of {', '.join(GPUS)}, items separated by commas"
            )
        prices[gpu.strip()] = dollars
    return prices


class PlanLab(Lab, TraceReplay):
    lab_name = "plan"
    title = "Capacity planner: the cheapest fleet within the SLO"
    summary = (
        "A workload, a target rate and an SLO in; out, the cheapest fleet that meets it and the Pareto front of "
        "cost per hour against latency, over GPU type x tensor parallelism x weight and KV precision x scheduler "
        "x replicas x router. The roofline first prunes what cannot work (the model does not fit; the replicas "
        "cannot reach the rate); every other candidate is a simulation of its replicas serving the requests."
    )

    model = param.Selector(objects=list(MODELS), default="llama-3.1-70b", doc="the model every replica serves")
    cost_model = cost_model_param("auto")
    rate = param.Number(10.0, bounds=(0.01, 1000.0), doc="target arrival rate, requests per second (Poisson)")
    requests = param.Integer(200, bounds=(1, 5000), doc="requests each candidate serves")
    workload = param.Selector(
        objects=[*SHAPES, "trace"],
        default="sharegpt",
        doc="request lengths: a named length shape, or a trace replayed (trace_file or "
        "trace_preset: its own requests and rate)",
    )
    ttft_slo_s = param.Number(2.0, bounds=(0.01, 600.0), doc="SLO: time to first token, seconds")
    tpot_slo_ms = param.Number(100.0, bounds=(1.0, 10_000.0), doc="SLO: mean time per output token after the first, ms")
    percentile = param.Selector(
        objects=list(PERCENTILES), default="p90", doc="SLO: TTFT and TPOT are read at this percentile of the requests"
    )
    attainment = param.Number(
        0.9,
        bounds=(0.5, 1.0),
        doc="SLO: share of requests within both limits (rejected ones count as misses), at least",
    )
    gpus = Text("A100-80GB,H100-SXM,H200", max_length=200, doc=f"GPU types to try, comma-separated: {', '.join(GPUS)}")
    tps = Text(
        ",".join(map(str, TP_SIZES)),
        max_length=40,
        doc="tensor-parallel GPUs per replica to try, comma-separated: 1, 2, 4, 8",
    )
    weight_precisions = Text(
        "16-bit,fp8", max_length=60, doc=f"weight precisions to try, comma-separated: {', '.join(WEIGHT_PRECISIONS)}"
    )
    kv_precisions = Text(
        "16-bit", max_length=40, doc=f"KV precisions to try, comma-separated: {', '.join(KV_PRECISIONS)}"
    )
    schedulers = Text(
        "vllm-v1,sglang",
        max_length=60,
        doc="schedulers to try, comma-separated: paper (the papers' engine), vllm-v1, sglang",
    )
    replicas = Text("1,2", max_length=80, doc="replica counts to try, comma-separated, each 1 to 32")
    routers = Text(
        "round-robin",
        max_length=120,
        doc=f"routers to try with more than one replica, comma-separated: {', '.join(ROUTERS)}",
    )
    latency = param.Selector(
        objects=list(LATENCIES), default="ttft", doc="the Pareto front's latency: TTFT or TPOT at the SLO's percentile"
    )
    prices = Text(
        "",
        max_length=200,
        precedence=ADVANCED,
        doc="dollars per GPU-hour replacing the defaults, e.g. H100-SXM=2.5,H200=3.2 (defaults: "
        + ", ".join(f"{g} {p:g}" for g, p in GPU_PRICES.items())
        + "; docs/fleet.md)",
    )
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="seed of arrivals and lengths")
    prompt_len = param.Integer(
        128, bounds=(1, 8191), precedence=ADVANCED, doc="fixed: prompt tokens; uniform: the largest prompt"
    )
    output_len = param.Integer(
        128, bounds=(1, 8191), precedence=ADVANCED, doc="fixed: output tokens; uniform: the largest output"
    )
    max_len = param.Integer(
        4096,
        bounds=(2, 32768),
        precedence=ADVANCED,
        doc="the model's limit on prompt + output tokens (longer draws are clipped)",
    )
    loras = param.Integer(
        0,
        bounds=(0, MAX_LORAS),
        doc="LoRA adapters the requests use (adapter i with weight 1 / i); every replica keeps max_loras "
        "adapter slots beside its KV cache, and candidates whose scheduler runs no adapters (the "
        "papers' engine) are pruned; 0: off",
    )
    max_loras = param.Integer(
        1,
        bounds=(1, 64),
        doc="loras: vLLM's max_loras (SGLang's max_loras_per_batch) on every replica: the distinct adapters "
        "one batch may use and the GPU slots taken from its KV cache",
    )
    lora_rank = param.Selector(
        objects=list(LORA_RANKS), default=16, precedence=ADVANCED, doc="loras: the rank every slot is allocated at"
    )
    lora_targets = param.Selector(
        objects=list(TARGETS),
        default="qkvo",
        precedence=ADVANCED,
        doc="loras: the modules each adapter adds to: q, k, v, o, or every linear layer",
    )

    def check(self) -> None:
        self.candidates()
        why = lora_refusal(MODELS[self.model], self.lora_targets) if self.loras else None
        if why:
            raise ParamError(f"loras: {self.loras} is not allowed with model {self.model}; {why}")
        if self.workload == "trace":
            self.replayed()  # read, and its window holds a request
        price_table(self.prices)
        if self.workload in ("fixed", "uniform") and self.prompt_len + self.output_len > self.max_len:
            raise ParamError(
                f"prompt_len + output_len: {self.prompt_len + self.output_len} is not allowed; "
                f"max_len is {self.max_len}"
            )

    def candidates(self) -> list[Candidate]:
        replicas = []
        for t in (t.strip() for t in self.replicas.split(",")):
            n = to_number(t, integer=True)
            if n is None or not 1 <= n <= 32:
                raise ParamError(
                    f"replicas: {shown(t)} is not allowed; expected a comma-separated list of integers from 1 to 32"
                )
            replicas.append(n)
        axes = (
            choices("gpus", self.gpus, list(GPUS)),
            choices("tps", self.tps, TP_SIZES),
            choices("weight_precisions", self.weight_precisions, list(WEIGHT_PRECISIONS)),
            choices("kv_precisions", self.kv_precisions, list(KV_PRECISIONS)),
            choices("schedulers", self.schedulers, list(MODES)),
            list(dict.fromkeys(replicas)),
            choices("routers", self.routers, list(ROUTERS)),
        )
        candidates = grid(*axes)
        if len(candidates) > MAX_CANDIDATES:
            raise ParamError(
                f"gpus/tps/weight_precisions/kv_precisions/schedulers/replicas/routers: {len(candidates):,} "
                f"candidates is not allowed; expected at most {MAX_CANDIDATES:,} candidates in the grid"
            )
        return candidates

    def ignored(self) -> tuple[str, ...]:
        """A trace brings its own requests and rate; without adapters their slots' settings are unread."""
        lora = () if self.loras else LORA_SETTINGS
        return (*(("rate", "requests", "seed") if self.workload == "trace" else self.replay_ignored()), *lora)

    def workload_spec(self) -> Workload:
        """What every candidate serves; a trace's target rate is its mean rate as replayed."""
        trace = (self.trace_file, self.trace_preset, self.trace_scale, self.trace_start, self.trace_duration)
        rate = mean_rate(self.replayed()) if self.workload == "trace" else self.rate
        return Workload(
            self.model,
            self.workload,
            self.requests,
            rate,
            self.seed,
            self.max_len,
            self.prompt_len,
            self.output_len,
            self.ttft_slo_s,
            self.tpot_slo_ms / 1e3,
            self.percentile,
            self.attainment,
            pricing(self.candidates(), self.model, self.cost_model),
            trace if self.workload == "trace" else None,
            self.loras,
            LoraConfig(self.max_loras, self.lora_rank, self.lora_targets) if self.loras else None,
        )

    def estimate(self) -> Estimate:
        """Every candidate priced by the roofline and its cost model, and each one it leaves: one fleet
        simulation of its replicas (`fleet_work`)."""
        workload = self.workload_spec()
        requests = workload.arrivals()
        candidates = self.candidates()
        left = [c for c in candidates if roofline(c, workload)[0] is None]
        costs = [c.cost_model(self.model, self.cost_model) for c in left]
        return in_turn(
            [(len(candidates), PLAN_CANDIDATES)],
            *(
                fleet_work(
                    requests,
                    c.replicas,
                    c.replicas,
                    cost.kv_capacity_tokens,
                    MAX_SEQS,
                    c.scheduler,
                    groups=kv_groups(cost, c.scheduler),
                    trace=self.workload == "trace",
                    max_loras=workload.lora.max_loras if workload.lora else 0,
                )
                for c, cost in zip(left, costs)
            ),
            lower=(
                "trace_duration" if self.workload == "trace" else "requests",
                "gpus",
                "tps",
                "schedulers",
                "replicas",
            ),
        )

    def explain(self, result: dict[str, Any]) -> dict[str, dict[str, Explanation]]:
        """The cheapest candidate's cost with its formula and values: per hour, and per million
        output tokens at its simulated throughput (nothing when no candidate meets the SLO)."""
        best = result["cheapest"]
        if best is None:
            return {}
        price = result["prices_per_gpu_hour"][best["gpu"]]
        source = (
            "source: {0} dollars per {1} GPU-hour (the plan's prices), the candidate's simulated run",
            (price, best["gpu"]),
        )
        hour = Explanation(
            "cost per hour",
            "GPUs × dollars per GPU-hour",
            (("GPUs", best["gpus"], ""), ("dollars per GPU-hour", price, "$")),
            best["cost_per_hour"],
            "$",
            source,
        )
        out = {"cost_per_hour": {best["key"]: hour}}
        if best["cost_per_million_tokens"] is not None:
            out["cost_per_million_tokens"] = {
                best["key"]: Explanation(
                    "cost per million output tokens",
                    "cost per hour ÷ (3600 × throughput) × 1,000,000",
                    (
                        ("cost per hour", best["cost_per_hour"], "$"),
                        ("throughput", best["throughput_tok_s"], "tokens/s"),
                    ),
                    best["cost_per_million_tokens"],
                    "$",
                    source,
                )
            }
        return out

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        """The plan, its candidates evaluated here one after another."""
        return self.plan(progress, Serial())

    def plan(self, progress: Progress, backend: Serial | Processes | RayBackend) -> dict[str, Any]:
        """The plan on a backend (the figures are the same on every one)."""

        def done(finished: int, total: int, key: str) -> None:
            progress(finished / total, f"{finished}/{total} candidates: {key}")

        prices = price_table(self.prices)
        workload = self.workload_spec()
        result = plan(self.candidates(), workload, prices, self.latency, lambda jobs: backend.map(jobs, done))
        # auto says what it chose; a roofline or measured plan's JSON is as it was
        return {
            **result,
            "prices_per_gpu_hour": prices,
            **({"pricing": workload.pricing} if self.cost_model == "auto" else {}),
        }
