"""Step times from kernel latencies measured on real GPUs, not from a roofline ("Time you can trust").

A step is priced as the operations it runs, each looked up in tables measured by NVIDIA's
AIConfigurator (aiconfigurator-core 0.12.0, Apache-2.0; derived by scripts/derive_measured.py into
kvweb/gpu/measured/, whose README names the files and versions):

- per layer, the GEMMs at m = tokens in the step, their n and k split over the tp GPUs as vLLM splits
  them (QKV fused, O, gate and up fused, down); the LM head at m = requests in the step;
- attention per layer group: decode as one batched kernel at the batch's mean context, each prefill
  chunk of n tokens after c cached ones as prefill(n + c) - prefill(c) (causal pairs: exactly the
  pairs the chunk adds), never less than a fresh prefill of n;
- a mixture of experts' fused MoE kernel at the step's tokens (shapes the tables have only), routed as
  AIConfigurator itself assumes (power law, alpha 1.2: at a few tokens fewer experts are touched than
  with even routing, at many the hottest expert holds the step);
- two all-reduces per layer of tokens x d_model 16-bit values when tp > 1;
- one per-step overhead per engine (scheduling, sampling, launches: nothing in the tables measures it),
  fitted on half of the measured deployments (bench/silicon.py, docs/accuracy.md).

Not priced: norms, RoPE, activations, residual adds and the embedding (memory-bound and small; the
fitted overhead absorbs their mean). Latent (MLA) and linear attention have no table here and are refused.

Interpolation: multilinear in log(latency) over log(coordinates) between grid points (latency grows
as a power of size between them). Below a table's first point the first latency is used (a smaller
operation is launch-bound, no cheaper); above its last point the last latency is scaled by
(x / last)^p, p = 2 for a prefill's length (causal pairs), else 1 (work in proportion).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np

from kvweb.gpu.layers import Attention
from kvweb.gpu.specs import BYTES_16, GPUSpec, LLMSpec

TABLES = Path(__file__).parent / "measured"
TABLE_GPUS = {"A100-80GB": "a100_sxm", "H100-SXM": "h100_sxm", "H200": "h200_sxm", "B200": "b200_sxm"}
ENGINES = ("vllm", "sglang")
WEIGHT_PRECISIONS = {"16-bit": "bfloat16", "fp8": "fp8", "fp8-block": "fp8_block"}
KV_PRECISIONS = {"16-bit": "bfloat16", "fp8": "fp8"}
# Per engine, fitted on the fit half of the measured deployments (bench/silicon.py FIT_MODELS; docs/accuracy.md):
# the step overhead, closed_loop's share of a wave's other prefills a first token waits for, and the time
# a first token spends outside the engine's steps (HTTP, tokenizer, detokenizer, client)
STEP_OVERHEAD_S = {"vllm": 0.68e-3, "sglang": 1.24e-3}
QUEUED_SHARE = {"vllm": 0.09, "sglang": 0.20}
TTFT_OUTSIDE_S = {"vllm": 39.5e-3, "sglang": 245.1e-3}


@dataclass(frozen=True)
class Table:
    """Latencies (seconds) on a grid; `grow[i]`: the power the latency scales with past the last point."""

    axes: tuple[np.ndarray, ...]
    seconds: np.ndarray
    grow: tuple[float, ...]

    def __call__(self, *point: float) -> float:
        corners: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
        scale = 1.0
        for axis, x, g in zip(self.axes, point, self.grow):
            if x <= axis[0]:
                i0 = i1 = 0
                w = 0.0
            elif x >= axis[-1]:
                i0 = i1 = len(axis) - 1
                w = 0.0
                scale *= (x / axis[-1]) ** g
            else:
                i1 = int(np.searchsorted(axis, x))
                i0 = i1 - 1
                w = float(np.log(x / axis[i0]) / np.log(axis[i1] / axis[i0]))
            corners = [(c + (i0,), p * (1 - w)) for c, p in corners] + [(c + (i1,), p * w) for c, p in corners if w]
        return float(scale * np.exp(sum(p * np.log(self.seconds[c]) for c, p in corners)))


def _table(axes: Sequence[Sequence[float]], us: list, grow: Sequence[float]) -> Table:
    return Table(tuple(np.asarray(a, dtype=float) for a in axes), np.asarray(us, dtype=float) * 1e-6, tuple(grow))


@cache
def kernel_tables(gpu: str, engine: str) -> dict:
    """One (GPU, engine) file as Tables: gemm[dtype](m, n, k), context[key](s), generation[key](batch, kv_len),
    allreduce[tp](bytes), moe[key](tokens)."""
    raw = json.loads((TABLES / f"{gpu}_{engine}.json").read_text())
    return {
        "versions": raw["versions"],
        "gemm": {d: _table((t["m"], t["n"], t["k"]), t["us"], (1, 1, 1)) for d, t in raw["gemm"].items()},
        "context": {k: _table((t["s"],), t["us"], (2,)) for k, t in raw["context_attention"].items()},
        "generation": {
            k: _table((t["batch"], t["kv_len"]), t["us"], (1, 1)) for k, t in raw["generation_attention"].items()
        },
        "allreduce": {int(tp): _table((t["bytes"],), t["us"], (1,)) for tp, t in raw["allreduce"].items()},
        "moe": {k: _table((t["tokens"],), t["us"], (1,)) for k, t in raw["moe"].items()},
    }


def silicon_rows() -> list[dict]:
    """The measured deployments (kvweb/gpu/measured/silicon_rows.json) as dicts."""
    raw = json.loads((TABLES / "silicon_rows.json").read_text())
    return [dict(zip(raw["columns"], row)) for row in raw["rows"]]


@dataclass(frozen=True)
class MeasuredCost:
    """Seconds per step from measured kernels, for `model` on `tp` x `gpu` under `engine`: the same
    prefill_cost / decode_step_cost as CostModel, plus step_cost for a mixed step."""

    gpu: GPUSpec
    model: LLMSpec
    engine: str = "vllm"
    tp: int = 1
    weight_precision: str = "16-bit"  # one of WEIGHT_PRECISIONS (fp8: per-tensor scales; fp8-block: 128x128 blocks)
    kv_precision: str = "16-bit"
    moe_precision: str | None = None  # the experts' table dtype (e.g. w4a16_mxfp4); None: as the weights
    step_overhead_s: float | None = None  # None: the engine's STEP_OVERHEAD_S

    def __post_init__(self) -> None:
        if self.gpu.name not in TABLE_GPUS:
            raise ValueError(f"no measured kernels for {self.gpu.name}; measured: {', '.join(TABLE_GPUS)}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}")
        if self.step_overhead_s is None:
            object.__setattr__(self, "step_overhead_s", STEP_OVERHEAD_S[self.engine])
        if self.weight_precision not in WEIGHT_PRECISIONS or self.kv_precision not in KV_PRECISIONS:
            raise ValueError(
                f"weight precision one of {', '.join(WEIGHT_PRECISIONS)}, KV one of {', '.join(KV_PRECISIONS)}"
            )
        if self.model.heads % self.tp:
            raise ValueError(f"{self.model.name}: {self.model.heads} heads do not split over {self.tp} GPUs")
        for a, _ in self.model.groups:
            if not isinstance(a, Attention) or a.gate:
                raise ValueError(f"{self.model.name}: no measured kernels for {a.kind} attention layers")
        self._attention_keys  # every table this model needs, or a ValueError naming the missing one
        if self.model.experts > 1:
            self._moe_table

    @cached_property
    def _tables(self) -> dict:
        return kernel_tables(TABLE_GPUS[self.gpu.name], self.engine)

    @property
    def source(self) -> str:
        v = self._tables["versions"]
        name = "vLLM" if self.engine == "vllm" else "SGLang"
        return (
            f"measured kernels, {name} {v['gemm']} (all-reduce {v['comm']}) on {self.gpu.name}, "
            f"aiconfigurator-core 0.12.0 data"
        )

    def _gemm_table(self, dtype: str) -> Table:
        table = self._tables["gemm"].get(dtype)
        if table is None:
            raise ValueError(f"no measured {dtype} GEMMs for {self.engine} on {self.gpu.name}")
        return table

    @cached_property
    def _gemms(self) -> list[tuple[Table, int, int, int]]:
        """(table, n, k, count over the layers) of every GEMM run per token, one GPU's share."""
        m, tp = self.model, self.tp
        weights = self._gemm_table(WEIGHT_PRECISIONS[self.weight_precision])
        out = []
        for a, layers in m.groups:
            qkv = (m.heads // tp + 2 * a.kv_heads_per_gpu(tp)) * a.head_dim
            out += [(weights, qkv, m.d_model, layers), (weights, m.d_model, m.heads * a.head_dim // tp, layers)]
        dense = m.layers if m.experts == 1 else m.dense_layers
        dense_ff = m.d_ff if m.experts == 1 else m.dense_d_ff
        if dense:
            out += [(weights, 2 * dense_ff // tp, m.d_model, dense), (weights, m.d_model, dense_ff // tp, dense)]
        if m.experts > 1:
            moe_layers = m.layers - m.dense_layers
            out.append((self._gemm_table("bfloat16"), m.experts, m.d_model, moe_layers))  # the router
            if m.shared_experts:
                ff = m.shared_experts * m.shared_d_ff
                out += [(weights, 2 * ff // tp, m.d_model, moe_layers), (weights, m.d_model, ff // tp, moe_layers)]
        return out

    @cached_property
    def _moe_table(self) -> Table:
        m = self.model
        dtype = self.moe_precision or WEIGHT_PRECISIONS[self.weight_precision]
        key = f"h{m.d_model}_i{m.d_ff}_k{m.active_experts}_e{m.experts}_{dtype}_tp{self.tp}"
        table = self._tables["moe"].get(key)
        if table is None:
            raise ValueError(f"no measured MoE kernel {key} for {self.engine} on {self.gpu.name}")
        return table

    @cached_property
    def _attention_keys(self) -> list[tuple[str, int]]:
        """(table key, layers) per attention group."""
        out = []
        for a, layers in self.model.groups:
            assert isinstance(a, Attention)
            key = (
                f"h{self.model.heads // self.tp}_kv{a.kv_heads_per_gpu(self.tp)}_d{a.head_dim}_w{a.window}_"
                f"{KV_PRECISIONS[self.kv_precision]}"
            )
            for kind in ("context", "generation"):
                if key not in self._tables[kind]:
                    raise ValueError(f"no measured {kind} attention {key} for {self.engine} on {self.gpu.name}")
            out.append((key, layers))
        return out

    # -- parts ---------------------------------------------------------------
    def step_parts(self, decode_contexts: Sequence[int], prefill_chunks: Sequence[tuple[int, int]]) -> dict[str, float]:
        """Seconds of each kind of work in one step running the decodes (one per context) and the
        prefill chunks ((new tokens, cached tokens) each), on one GPU of the group."""
        chunks = [(n, c) for n, c in prefill_chunks if n > 0]
        tokens = len(decode_contexts) + sum(n for n, _ in chunks)
        requests = len(decode_contexts) + len(chunks)
        if not tokens:
            return {"gemm": 0.0, "moe": 0.0, "attention": 0.0, "allreduce": 0.0, "overhead": self.step_overhead_s}
        gemm = sum(count * t(tokens, n, k) for t, n, k, count in self._gemms)
        m = self.model
        gemm += self._gemm_table("bfloat16")(requests, m.vocab / self.tp, m.d_model)  # LM head, last tokens only
        moe = (m.layers - m.dense_layers) * self._moe_table(tokens) if m.experts > 1 else 0.0
        attention = 0.0
        for key, layers in self._attention_keys:
            if decode_contexts:
                mean = sum(decode_contexts) / len(decode_contexts)
                attention += layers * self._tables["generation"][key](len(decode_contexts), max(mean, 1.0))
            prefill = self._tables["context"][key]
            for n, c in chunks:
                attention += layers * (max(prefill(n + c) - prefill(c), prefill(n)) if c else prefill(n))
        allreduce = 0.0
        if self.tp > 1:
            allreduce = 2 * m.layers * self._tables["allreduce"][self.tp](tokens * m.d_model * BYTES_16)
        return {
            "gemm": gemm,
            "moe": moe,
            "attention": attention,
            "allreduce": allreduce,
            "overhead": self.step_overhead_s,
        }

    # -- public costs (seconds, as CostModel's) --------------------------------
    def step_cost(self, decode_contexts: Sequence[int], prefill_chunks: Sequence[tuple[int, int]] = ()) -> float:
        return sum(self.step_parts(decode_contexts, prefill_chunks).values())

    def prefill_cost(self, n_tokens: int, cached: int = 0) -> float:
        return self.step_cost((), ((n_tokens, cached),))

    def decode_step_cost(self, batch: int, total_context: int) -> float:
        """`batch` decodes holding `total_context` tokens between them (priced at their mean)."""
        mean = total_context / batch if batch else 0
        return self.step_cost([mean] * batch)

    def closed_loop(self, concurrency: int, isl: int, osl: int) -> tuple[float, float]:
        """(TTFT, TPOT) seconds of a closed-loop benchmark (`closed_loop`) with the engine's fitted terms."""
        return closed_loop(self, concurrency, isl, osl, QUEUED_SHARE[self.engine], TTFT_OUTSIDE_S[self.engine])


def closed_loop(
    cost: object, concurrency: int, isl: int, osl: int, queued: float, outside_s: float = 0.0
) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds of a closed-loop benchmark at `concurrency` C with fixed lengths,
    analytically, for any cost with prefill_cost and decode_step_cost (CostModel or MeasuredCost).

    A request's life in the engine is L = C t_p + osl t_d: the GPU runs, per request, its prefill (t_p,
    at isl) and its share of the decode steps (t_d at batch C and mean context isl + osl / 2), every
    prefill stalling the decodes. The first token waits its own prefill and a share `queued` of the
    C - 1 others arriving with it, t_w = t_p (1 + queued (C - 1) / 2): queued = 1 is lockstep waves (all
    C arrive together, as a benchmark starts), 0 arrivals spread evenly (no two prefills meet); real
    runs lie between. TTFT = outside_s + t_w, outside_s the time no step measures (HTTP, tokenizer,
    client); TPOT = (L - t_w) / (osl - 1). queued and outside_s are fitted (MeasuredCost.closed_loop).
    """
    c = concurrency
    t_p = cost.prefill_cost(isl)
    t_d = cost.decode_step_cost(c, int(c * (isl + osl / 2)))
    wait = t_p * (1 + queued * (c - 1) / 2)
    return outside_s + wait, (c * t_p + osl * t_d - wait) / max(osl - 1, 1)


@dataclass(frozen=True)
class Sample:
    """One measured closed-loop run with its kernel-only step times (no overhead), for the fit."""

    prefill_s: float
    decode_s: float
    concurrency: int
    osl: int
    ttft_s: float
    tpot_s: float


def fit_relative(a: Sequence[float], b: Sequence[float], y: Sequence[float]) -> float:
    """The x minimizing sum(((a + b x - y) / y)^2): least squares on relative errors, closed form."""
    a, b, y = (np.asarray(v, dtype=float) for v in (a, b, y))
    w = b / y
    return float(np.sum(w * (y - a) / y) / np.sum(w * w))


def fit_closed_loop(samples: Sequence[Sample]) -> tuple[float, float, float]:
    """(step overhead s, queued share, outside s) that best explain the samples through `closed_loop`:
    for each share on a 0.01 grid in [0, 1], the overhead by least squares on TPOT's relative errors
    (TPOT is affine in it), then the outside time on TTFT's (TTFT is affine in it); the triple whose
    TTFT and TPOT relative errors have the least sum of squares."""
    p, d, c, n, y_ttft, y_tpot = (
        np.array([getattr(s, f) for s in samples], dtype=float)
        for f in ("prefill_s", "decode_s", "concurrency", "osl", "ttft_s", "tpot_s")
    )
    best = (np.inf, 0.0, 0.0, 0.0)
    for share in np.linspace(0, 1, 101):
        wait = 1 + share * (c - 1) / 2  # the steps' part of TTFT = wait x t_p
        span = np.maximum(n - 1, 1)
        overhead = fit_relative((c * p + n * d - wait * p) / span, (c + n - wait) / span, y_tpot)
        steps = wait * (p + overhead)
        outside = fit_relative(steps, np.ones_like(steps), y_ttft)
        tpot = (c * (p + overhead) + n * (d + overhead) - steps) / span
        loss = float(np.sum(((steps + outside) / y_ttft - 1) ** 2) + np.sum((tpot / y_tpot - 1) ** 2))
        if loss < best[0]:
            best = (loss, overhead, float(share), outside)
    return best[1], best[2], best[3]
