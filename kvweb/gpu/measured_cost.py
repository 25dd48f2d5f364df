"""The schedulers' cost model with step times from measured kernels (`kvweb.gpu.measured`).

The schedulers price a step as `step_time(flops, bytes)` of work summed over its requests
(`CostModel.decode_work` and `prefill_work`, read once as per-request and per-token
coefficients: `kvweb.serving.loop.step_cost`). `MeasuredCostModel` keeps that interface and its
memory and capacity figures (CostModel's), and gives the two sums other meanings, so every
scheduler and its quiet stretches run unchanged:

- the first, "flops", counts the step's tokens: a decode adds 1, a prefill chunk its tokens;
- the second, "bytes", carries attention seconds, which add up over the step's requests: the
  decodes' are linear in their contexts (a per-step, a per-request and a per-token term, fitted
  by least squares to the generation-attention table over batches 1-256 and contexts 128-32k; the
  per-step term stands where the roofline has the weights, read once a step), a prefill chunk's
  are its own table lookup (causal pairs after its cached tokens).

A step then costs overhead + G(tokens) + attention seconds, G the step's token-bound operations
at that many tokens: the layer GEMMs, the experts, the all-reduces, and the LM head at as many
rows as requests (at most MAX_LM_ROWS: a prefill's tokens need no logits but its last), looked up
on a grid of token counts and interpolated linearly in log-log.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache, cached_property, lru_cache
from typing import Any

import numpy as np

from kvweb.gpu.calibration import BenchRun, Calibration, fit
from kvweb.gpu.cost import CostModel
from kvweb.gpu.engine_memory import (
    VLLM_BLOCK_TOKENS,
    VLLM_MAX_NUM_SEQS,
    EngineMemory,
    sglang_default_fraction,
    sglang_memory,
    vllm_memory,
)
from kvweb.gpu.measured import TABLE_GPUS, TABLES, TTFT_OUTSIDE_S, MeasuredCost
from kvweb.gpu.specs import GPUSpec, LLMSpec
from kvweb.gpu.weights import PrecisionError
from kvweb.lab import ParamError

MAX_LM_ROWS = 256  # the most requests a step holds (max_num_seqs): the LM head's rows
GRID = np.unique(np.round(np.geomspace(1, 65536, 97)).astype(int))  # token counts G is looked up at
DECODE_FIT = [(b, c) for b in (1, 8, 32, 128, 256) for c in (128, 1024, 4096, 32768)]  # (batch, context)
# auto: measured where kernel tables exist for the GPU, model, precisions and engine, else the roofline
COST_MODELS = ("auto", "roofline", "measured")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
# a weight precision that quantizes the experts only: (the other GEMMs' precision, the experts' kernel table)
MOE_TABLES = {"mxfp4": ("16-bit", "w4a16_mxfp4")}


@dataclass(frozen=True)
class MeasuredCostModel(CostModel):
    """CostModel's memory, capacity and swap prices; step times from `engine`'s measured kernels."""

    engine: str = "vllm"
    kernel_overhead_s: float | None = None  # the engine's step overhead; None: the recorded fit (kvweb/gpu/measured.py)
    calibration: Calibration | None = None  # the fit to the user's runs that set kernel_overhead_s, if any
    # memory as the engine counts it (kvweb/gpu/engine_memory.py): vLLM's profile run
    max_num_batched_tokens: int | None = None  # None: vLLM's default for this GPU (8192 or 2048)
    max_num_seqs: int = VLLM_MAX_NUM_SEQS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gpu.name not in TABLE_GPUS:
            raise ValueError(f"no measured kernels for {self.gpu.name}; they exist for {', '.join(TABLE_GPUS)}")
        if not (TABLES / f"{TABLE_GPUS[self.gpu.name]}_{self.engine}.json").exists():
            raise ValueError(f"no measured {self.engine} kernels for {self.gpu.name}")
        (
            self._token_seconds,
            self._decode_attention,
        )  # every table the model needs, or a ValueError naming the missing one

    @cached_property
    def kernels(self) -> MeasuredCost:
        weights, experts = MOE_TABLES.get(self.weight_precision, (self.weight_precision, None))
        return MeasuredCost(
            self.gpu,
            self.model,
            self.engine,
            self.tp,
            weights,
            self.kv_precision,
            experts,
            step_overhead_s=self.kernel_overhead_s,
        )

    @property
    def ttft_outside_s(self) -> float:
        """The engine's time outside its steps in a first token (kvweb/gpu/measured.py TTFT_OUTSIDE_S,
        fitted on half the measured deployments), or the one fitted to the user's own runs."""
        return self.calibration.outside_s if self.calibration else TTFT_OUTSIDE_S[self.engine]

    @property
    def source(self) -> str:
        return self.kernels.source

    @cached_property
    def _token_seconds(self) -> tuple[np.ndarray, np.ndarray]:
        """log(tokens) and log(seconds of the token-bound operations) on GRID."""

        def token_bound(parts: dict[str, float]) -> float:
            return parts["gemm"] + parts["moe"] + parts["allreduce"]

        k = self.kernels
        lm_rows = np.minimum(GRID, MAX_LM_ROWS)
        # a prefill of n tokens has 1 row of logits, n decodes have n: the difference is the LM head's
        seconds = [
            token_bound(k.step_parts((), ((int(n), 0),)))
            + token_bound(k.step_parts([1] * int(r), ()))
            - token_bound(k.step_parts((), ((int(r), 0),)))
            for n, r in zip(GRID, lm_rows)
        ]
        return np.log(GRID.astype(float)), np.log(np.asarray(seconds))

    @cached_property
    def _decode_attention(self) -> tuple[float, float, float]:
        """Seconds of the decodes' attention per step, per decoding request, per context token."""
        a = np.array([[1, b, b * c] for b, c in DECODE_FIT], dtype=float)
        y = np.array([self.kernels.step_parts([c] * b, ())["attention"] for b, c in DECODE_FIT])
        return tuple(max(float(v), 0.0) for v in np.linalg.lstsq(a, y, rcond=None)[0])

    @cached_property
    def _overhead(self) -> float:
        return self.kernels.step_parts((), ())["overhead"]

    # -- the schedulers' interface (CostModel's names, the meanings above) ----------------
    def decode_work(self, batch: int, total_context: int) -> tuple[float, float]:
        per_step, per_request, per_token = self._decode_attention
        return float(batch), per_step + per_request * batch + per_token * total_context

    def prefill_work(self, n_tokens: int, cached: int = 0) -> tuple[float, float]:
        key = (n_tokens, cached)
        work = self._prefill_works.get(key)
        if work is None:
            work = float(n_tokens), self.kernels.step_parts((), ((n_tokens, cached),))["attention"]
            self._prefill_works[key] = work
        return work

    @cached_property
    def _token_bound(self) -> dict[float, float]:
        """G by token count, filled as steps ask (a run's steps repeat a few counts)."""
        return {}

    def _seconds_of_tokens(self, tokens: float) -> float:
        """G: seconds of the token-bound operations at `tokens` (linear in log-log between grid
        points; beyond the grid in proportion to the tokens)."""
        x, y = self._token_seconds
        if tokens > GRID[-1]:
            return math.exp(y[-1]) * tokens / GRID[-1]
        return math.exp(float(np.interp(math.log(max(tokens, 1.0)), x, y)))

    def step_time(self, flops: float, bytes_moved: float) -> float:
        """A step of `flops` tokens and `bytes_moved` attention seconds."""
        seconds = self._token_bound.get(flops)
        if seconds is None:
            seconds = self._token_bound[flops] = self._seconds_of_tokens(flops) if flops > 0 else 0.0
        return self._overhead + seconds + bytes_moved

    def step_times(self, flops: np.ndarray, bytes_moved: np.ndarray) -> np.ndarray:
        return np.array([self.step_time(f, b) for f, b in zip(flops.tolist(), bytes_moved.tolist())])

    # -- memory as the engine counts it (kvweb/gpu/engine_memory.py) -----------------------
    # CostModel's `kv_bytes_free_per_gpu` (usable - weights), `fits` (a token of KV) and
    # `capacity_requests` follow from `usable_bytes`; `kv_capacity_tokens` is in the engine's blocks.
    @cached_property
    def engine_memory(self) -> EngineMemory:
        """One GPU's memory as `engine` counts it: vLLM's gpu_memory_utilization or SGLang's
        mem_fraction_static is `mem_util`, of the total the card reports through CUDA."""
        weights = self.weight_bytes_per_gpu
        if self.engine == "sglang":
            return sglang_memory(self.gpu, self.tp, self.mem_util, weights)
        return vllm_memory(
            self.gpu,
            self.model,
            self.tp,
            self.mem_util,
            weights,
            self.max_num_batched_tokens,
            self.max_num_seqs,
            self.attention_dp,
        )

    @property
    def usable_bytes(self) -> float:
        """Per GPU: the engine's budget for weights and KV (vLLM: utilization x total less the profile
        run's activations, the non-torch memory and the CUDA graph estimate; SGLang: fraction x the
        free memory before loading)."""
        return self.engine_memory.usable

    @property
    def kv_capacity_tokens(self) -> int:
        """CostModel's count, in vLLM's whole blocks of 16 ("GPU KV cache size: N tokens"); SGLang
        counts single tokens ("KV Cache is allocated. #tokens: N")."""
        tokens = super().kv_capacity_tokens
        if self.engine != "vllm":
            return tokens
        share = self.tp if self.attention_dp else 1
        return tokens // share // VLLM_BLOCK_TOKENS * VLLM_BLOCK_TOKENS * share

    def fit(self) -> dict[str, object]:
        """CostModel's report, its sentence in the engine's terms, and the breakdown (`engine_memory`)."""
        report = super().fit()
        em, gib = self.engine_memory, 2**30
        if report.get("fits") is False and self.splits:
            name = ENGINE_NAMES[self.engine]
            knob = "gpu_memory_utilization" if self.engine == "vllm" else "mem_fraction_static"
            rest = (
                f"{em.activation / gib:.2f} GiB of profile-run activations, {em.non_torch / gib:.2f} GiB outside "
                f"torch and {em.graphs / gib:.2f} GiB of CUDA graphs"
                if self.engine == "vllm"
                else f"{em.non_torch / gib:.2f} GiB of CUDA context and NCCL before loading"
            )
            report["fit_note"] = (
                f"{self.model.name} does not fit on {self.where} as {name} counts memory: its weights take "
                f"{em.weights / gib:.2f} GiB{'' if self.tp == 1 else ' per GPU'} of {em.requested / gib:.2f} GiB requested "
                f"({knob} {self.mem_util:g} of the {em.total / gib:.2f} GiB CUDA reports), less {rest}, so nothing is "
                "priced as if it ran; ignore_weights=true prices it as a what-if"
            )
        default = {"default_fraction": sglang_default_fraction(self.gpu, self.tp)} if self.engine == "sglang" else {}
        return {**report, "engine_memory": {**em.as_dict(), **default}}


def priced(
    kind: str,
    engine: str,
    gpu: GPUSpec,
    model: LLMSpec,
    assumptions: Mapping[str, Any],
    runs: tuple[BenchRun, ...] = (),
) -> CostModel:
    """A cost model of `kind` (one of COST_MODELS); a measured one without tables for this GPU,
    model or precision is refused with one message naming what is missing (`auto` then takes the
    roofline). `runs`: the user's benchmark runs (kvweb/gpu/calibration.py); an engine's own runs set
    its step overhead."""
    if kind == "roofline":
        return roofline(gpu, model, assumptions)
    try:
        cost = _measured(engine, gpu, model, tuple(sorted(assumptions.items())))
    except NoKernels:
        if kind == "auto":
            return roofline(gpu, model, assumptions)
        raise
    mine = tuple(r for r in runs if r.engine == engine)
    return _calibrated(cost, mine) if mine else cost


def roofline(gpu: GPUSpec, model: LLMSpec, assumptions: Mapping[str, Any]) -> CostModel:
    """The roofline CostModel; a weight precision the model cannot take (MXFP4 without experts) is
    one message naming the parameter."""
    try:
        return CostModel(gpu, model, **assumptions)
    except PrecisionError as err:
        raise ParamError(str(err)) from None


@lru_cache(maxsize=16)
def _calibrated(cost: MeasuredCostModel, runs: tuple[BenchRun, ...]) -> MeasuredCostModel:
    calibration = fit(runs, cost.kernels)
    return replace(cost, kernel_overhead_s=calibration.step_overhead_s, calibration=calibration)


@lru_cache(maxsize=64)
def _measured(engine: str, gpu: GPUSpec, model: LLMSpec, assumptions: tuple[tuple[str, Any], ...]) -> CostModel:
    """One measured cost model per choice (its tables are read and fitted once: ~20 ms)."""
    try:
        return MeasuredCostModel(gpu, model, **dict(assumptions), engine=engine)
    except PrecisionError as err:
        raise ParamError(str(err)) from None
    except ValueError as err:
        raise NoKernels(f"cost_model: measured: {err}; use cost_model=roofline") from None


class NoKernels(ParamError):
    """No measured kernel table for a choice: `measured` refuses it, `auto` prices it by the roofline."""


@cache
def _bands() -> tuple[dict[str, dict[str, float]], str]:
    """The held-out errors of the schedulers' own closed-loop replay where bench.silicon --schedulers
    wrote them (what the labs run), else of the analytic closed loop; and how they were measured."""
    raw = json.loads((TABLES / "bands.json").read_text())
    if raw.get("held_out_replay_mape"):
        return raw["held_out_replay_mape"], " replayed through the schedulers"
    return raw["held_out_mape"], ""


def error_band(gpu: str, engine: str) -> dict[str, Any]:
    """The measured model's error against real deployments it was not fitted on (bench/silicon.py,
    docs/accuracy.md): the rows of this GPU and engine, else of this engine, else all of them."""
    (bands, how), short = _bands(), gpu.split("-")[0]
    for key, basis in (
        (f"{short} {engine}", f"{ENGINE_NAMES[engine]} {short}"),
        (engine, ENGINE_NAMES[engine]),
        ("", "vLLM and SGLang"),
    ):
        if key in bands:
            return {**bands[key], "basis": f"held-out {basis} deployments{how}"}
    raise KeyError("bands.json has no rows")


def is_measured(cost: CostModel) -> bool:
    """Whether measured kernels price the steps (cost_model=measured, or auto where they exist)."""
    return isinstance(cost, MeasuredCostModel)


def step_cost(cost: CostModel) -> dict[str, str]:
    """A result's `step_cost` line (`cost_source`) where measured kernels price the steps; nothing for
    the roofline, whose JSON stays as it was before measured pricing existed."""
    return {"step_cost": cost_source(cost)} if is_measured(cost) else {}


def cost_source(cost: CostModel) -> str:
    """Where a cost model's step times come from, in one line, with the measured model's error."""
    if isinstance(cost, MeasuredCostModel):
        band = error_band(cost.gpu.name, cost.engine)
        line = (
            f"{cost.source}; error TPOT ±{band['tpot_pct']:.0f} %, TTFT ±{band['ttft_pct']:.0f} % (MAPE on "
            f"{band['rows']} {band['basis']}, docs/accuracy.md)"
        )
        c = cost.calibration
        if c is None:
            return line
        ttft, tpot = c.worst()
        # one concurrency's TTFT mixes the outside time with that concurrency's queueing: on measured
        # deployments it did not carry to other concurrencies (docs/accuracy.md, "campaigns differ")
        alone = len({run[0] for run in c.residuals}) == 1
        return (
            f"{line}; calibrated to your {len(c.residuals)} run{'s' if len(c.residuals) > 1 else ''}: step "
            f"overhead {1e3 * c.step_overhead_s:.2f} ms, outside the steps {1e3 * c.outside_s:.1f} ms, worst "
            f"residual TTFT {100 * ttft:.1f} %, TPOT {100 * tpot:.1f} %"
            + (
                "; all at one concurrency, so TTFT at another may be far off: add runs at other concurrencies"
                if alone
                else ""
            )
        )
    return (
        f"paper roofline: compute {cost.compute_eff:g} and bandwidth {cost.memory_eff:g} of peak, "
        f"{cost.step_overhead_s * 1e3:g} ms a step (assumptions)"
    )
