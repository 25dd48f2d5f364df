"""The capacity planner: the cheapest fleet that serves a workload at a target rate within an SLO.

The grid is GPU type x tensor parallelism x weight precision x KV precision x scheduler x
replicas x router (one replica needs no router: it is planned once, with the first router).
Before anything is simulated the roofline rules out what cannot work, counted by reason:

- "does not fit": the model's weights (at the weight precision, split over tp GPUs) leave no
  room for KV on the GPU, or its query heads do not split over tp (`CostModel.fits`);
- "no routed experts to quantize": MXFP4 weights for a model without experts (MXFP4 quantizes only the
  experts, as gpt-oss ships);
- "no measured kernels" (a plan priced with `cost_model=measured`, or `auto`, the default, where
  some candidate has them: `pricing`): no kernel tables for the candidate's GPU, scheduler's engine,
  model or precision;
- "runs no LoRA adapters" (a workload with adapters): the candidate's scheduler does not model
  them (the registry's trait `adapters`: vllm-v1 and sglang);
- "no KV cache beside the adapter slots": max_loras slots of the adapters' rank leave the replica
  no KV block (`LoraConfig.kv_blocks`);
- "cannot reach the rate": even with every step full, the replicas cannot keep up with the
  target rate (`rate_bound`).

Every other candidate is a real simulation (`candidate.evaluate`), each seeded from the plan's
seed and its own key, so its figures do not depend on the order in which a backend finishes
them (`backends.py`). Out come every candidate's figures, the cheapest that meets the SLO
(ties: the lower latency, then the key) and the Pareto front of cost per hour against a
latency figure (the SLO's percentile of TTFT or of TPOT).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from itertools import product
from typing import Any

from kvweb.fleet.candidate import Candidate, Workload
from kvweb.gpu import MODELS
from kvweb.gpu.measured_cost import is_measured
from kvweb.gpu.weights import precision_refusal
from kvweb.lab import ParamError
from kvweb.prefix.modes import MAX_SEQS, MODES
from kvweb.serving.memory.paged_memory import BLOCK_SIZE

# Dollars per GPU-hour, on demand, by default: the middle of the "specialty cloud" range of
# mercatus-ai.com's cloud GPU pricing guide (May 2026: A100 80GB $1.10-1.50, H100 SXM5
# $2.50-3.50, H200 SXM5 $3.50-4.50); that table has no A100 40GB row, so its price is ours, below
# the 80 GB's. Hyperscalers charge 1.5-2x these; the plan's `prices` replaces any of them.
GPU_PRICES: dict[str, float] = {"A100-40GB": 1.00, "A100-80GB": 1.30, "H100-SXM": 3.00, "H200": 4.00}
DOES_NOT_FIT = "does not fit"
TOO_SLOW = "cannot reach the rate"
NO_KERNELS = "no measured kernels"  # a measured plan only
NO_EXPERTS = "no routed experts to quantize"
NO_ADAPTERS = "runs no LoRA adapters"  # a workload with adapters only
NO_KV_BESIDE_SLOTS = "no KV cache beside the adapter slots"
PRUNE_REASONS = (DOES_NOT_FIT, TOO_SLOW)
LATENCIES = ("ttft", "tpot")  # what the Pareto front weighs against cost


def candidate_seed(plan_seed: int, candidate: Candidate) -> int:
    """A candidate's own seed: the plan's seed and the candidate's key, hashed (CRC-32, the same
    in every process, unlike `hash`), never the order it is evaluated in."""
    return zlib.crc32(f"{plan_seed}:{candidate.key}".encode())


def grid(
    gpus: Sequence[str],
    tps: Sequence[int],
    weight_precisions: Sequence[str],
    kv_precisions: Sequence[str],
    schedulers: Sequence[str],
    replicas: Sequence[int],
    routers: Sequence[str],
) -> list[Candidate]:
    """Every combination, in the order given; a single replica once, with the first router."""
    return [
        Candidate(g, tp, w, kv, s, n, r)
        for g, tp, w, kv, s, n, r in product(gpus, tps, weight_precisions, kv_precisions, schedulers, replicas, routers)
        if n > 1 or r == routers[0]
    ]


def rate_bound(candidate: Candidate, workload: Workload) -> float:
    """The highest arrival rate (requests/s) the candidate's replicas could keep up with on these
    requests, from the roofline alone. A replica serving them needs at least the longer of:
    - compute: every prompt token through the model once, 2 FLOPs per active parameter per token
      on each of its tp GPUs' share, at peak x compute efficiency;
    - steps: every output token after the first is one request's place in a step, a step holds at
      most MAX_SEQS requests, and no step costs less than a one-token decode (weights read once,
      the step overhead, the all-reduces' latency).
    The N replicas share the requests, so the rate bound is N x requests / that time."""
    cost = candidate.cost_model(workload.model, workload.pricing)
    requests = workload.arrivals()
    model = cost.model
    flops = 2.0 * (model.active_params - model.embedding_params) / cost.tp * sum(r.prompt for r in requests)
    steps = math.ceil(sum(r.output - 1 for r in requests) / MAX_SEQS)
    seconds = max(flops / (cost.peak_flops * cost.compute_eff), steps * cost.decode_step_cost(1, 0))
    return candidate.replicas * len(requests) / seconds  # > 0: every prompt has a token


def roofline(candidate: Candidate, workload: Workload) -> tuple[str | None, float]:
    """Why the roofline rules the candidate out (None: it does not), and its `rate_bound` (0 when
    the model does not fit)."""
    if precision_refusal(MODELS[workload.model], candidate.weight_precision):
        return NO_EXPERTS, 0.0
    if workload.loras and not MODES[candidate.scheduler].adapters:
        return NO_ADAPTERS, 0.0
    try:
        cost = candidate.cost_model(workload.model, workload.pricing)
    except ParamError:
        return NO_KERNELS, 0.0
    if not cost.fits:
        return DOES_NOT_FIT, 0.0
    if workload.lora and workload.loras and workload.lora.kv_blocks(cost, BLOCK_SIZE) < 2:
        return NO_KV_BESIDE_SLOTS, 0.0
    bound = rate_bound(candidate, workload)
    return (TOO_SLOW if bound < workload.rate else None), bound


def pricing(candidates: Iterable[Candidate], model: str, cost_model: str) -> str:
    """What prices a plan's candidates: `cost_model=auto` is measured kernels if any candidate has
    them (the others are then pruned as having none: candidates priced two ways would not compare),
    else the roofline."""
    if cost_model != "auto":
        return cost_model
    # one candidate per cost model (replicas and routers share one): a big grid has few
    distinct = {(c.gpu, c.tp, c.weight_precision, c.kv_precision, MODES[c.scheduler].engine): c for c in candidates}
    for c in distinct.values():
        try:
            if is_measured(c.cost_model(model, "auto")):
                return "measured"
        except ParamError:
            continue  # a precision the model cannot take: pruned whatever prices it
    return "roofline"


def cost_per_hour(candidate: Candidate, prices: Mapping[str, float]) -> float:
    return candidate.gpus * prices[candidate.gpu]


def latency_of(row: Mapping[str, Any], latency: str, percentile: str) -> float:
    return row[f"{latency}_{percentile}_s"]


def pareto(rows: Iterable[dict[str, Any]], latency: str, percentile: str) -> list[dict[str, Any]]:
    """The rows no other row beats on both cost per hour and latency (at least as good on both,
    better on one), cheapest first; of rows equal on both, the first by key. A row without the
    latency (its fleet finished no request) is on no front."""
    front: list[dict[str, Any]] = []
    timed = [r for r in rows if latency_of(r, latency, percentile) is not None]
    for row in sorted(timed, key=lambda r: (r["cost_per_hour"], latency_of(r, latency, percentile), r["key"])):
        if not front or latency_of(row, latency, percentile) < latency_of(front[-1], latency, percentile):
            front.append(row)
    return front


def cheapest(rows: Iterable[dict[str, Any]], latency: str, percentile: str) -> dict[str, Any] | None:
    """The cheapest row that meets the SLO (ties: the lower latency, then the key), or None."""
    meeting = [r for r in rows if r["meets_slo"]]
    return min(meeting, key=lambda r: (r["cost_per_hour"], latency_of(r, latency, percentile), r["key"]), default=None)


Evaluator = Callable[[list[tuple[Candidate, Workload, int]]], list[dict[str, Any]]]


def plan(
    candidates: Sequence[Candidate],
    workload: Workload,
    prices: Mapping[str, float],
    latency: str,
    evaluate_all: Evaluator,
) -> dict[str, Any]:
    """Prune, evaluate the rest with `evaluate_all` (a backend: figures in the order of its jobs),
    and rank. Rows come in key order, whatever order the grid was given in."""
    rows, jobs = [], []
    for c in sorted(candidates, key=lambda c: c.key):
        why, bound = roofline(c, workload)
        row = {
            "key": c.key,
            **asdict(c),
            "gpus": c.gpus,
            "cost_per_hour": cost_per_hour(c, prices),
            "rate_bound_per_s": bound,
            "pruned": why,
        }
        rows.append(row)
        if why is None:
            jobs.append((c, workload, candidate_seed(workload.seed, c)))
    figures = iter(evaluate_all(jobs))
    for row in rows:
        if row["pruned"] is None:
            row.update(next(figures))
            row["cost_per_million_tokens"] = (
                row["cost_per_hour"] / (3600 * row["throughput_tok_s"]) * 1e6 if row["throughput_tok_s"] > 0 else None
            )
    evaluated = [r for r in rows if r["pruned"] is None]
    return {
        "candidates_total": len(rows),
        "evaluated": len(evaluated),
        "pruned": {
            why: sum(r["pruned"] == why for r in rows)
            for why in PRUNE_REASONS
            + ((NO_KERNELS,) if workload.pricing == "measured" else ())
            + ((NO_EXPERTS,) if any(r["pruned"] == NO_EXPERTS for r in rows) else ())
            + ((NO_ADAPTERS,) if workload.loras else ())
            + ((NO_KV_BESIDE_SLOTS,) if any(r["pruned"] == NO_KV_BESIDE_SLOTS for r in rows) else ())
        },
        "cheapest": cheapest(evaluated, latency, workload.percentile),
        "pareto": pareto(evaluated, latency, workload.percentile),
        "candidates": rows,
    }
