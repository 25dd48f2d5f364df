"""The paper GPU's cost model: a roofline for LLM serving (SPEC section 1), over `tp` GPUs.

Decimal units throughout (1 GB = 1e9 bytes). A step costs
max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency))
+ its all-reduces + a fixed per-step overhead, so a short prefill can never be cheaper than one
read of the weights. The defaults are the lecture's paper GPU: one GPU, 16-bit weights and KV,
compute efficiency 0.7, 0.5 ms per step, and an OPT-13B-like model whose LM head is not tied to
the embedding.

Tensor parallelism (Megatron-style, as vLLM runs it): every weight matrix, the embedding and the
LM head are split evenly over the `tp` GPUs, and so are the query heads (`tp` must divide them,
as vLLM requires). KV heads are split too; when there are fewer than `tp` of them each GPU keeps
ceil(kv_heads / tp) of them (replicas: 4 KV heads on 8 GPUs are each held twice). Every GPU
holds its share of every token's KV, so the group holds as many tokens as one GPU has room for.
Each layer ends its attention and its MLP with an all-reduce of the tokens' 16-bit activations
(tokens x d_model x 2 B): a ring all-reduce sends 2 (tp - 1) / tp of those bytes from each GPU
over one direction of its NVLink, plus a fixed latency per all-reduce; the all-reduces do not
overlap the layer's work, so their time adds to the roofline's.

Precision: weights 16-bit, FP8 (per-tensor scales, or fp8-block: a scale per 128 x 128 block), INT8
or INT4 (2, 1, 1, 1, 0.5 bytes per parameter; scales left out; the embedding and LM head stay 16-bit,
as quantized checkpoints keep them), or MXFP4 (routed experts at 4.25 bits, everything else 16-bit,
as gpt-oss ships; refused for a model without experts) and KV 16-bit or FP8 (2 or 1 bytes per
element). FP8 weights run on the GPU's
FP8 tensor cores where it has them (H100, H200: W8A8); otherwise, and for INT8 and INT4, the
weights are dequantized and multiplied at 16 bits (weight-only quantization: fewer bytes, the
16-bit peak). One peak prices all of a step's FLOPs, attention included.

A mixture of experts holds every expert's weights in memory; a token's FLOPs count only its
active experts, and a step reads the experts its tokens route to (the expected number of distinct
ones, E (1 - (1 - k/E)^tokens)).

Layer types (kvweb/gpu/layers.py): full and latent layers grow with every token (the "growing
part", `kv_bytes_per_token*`), window layers keep their last tokens, linear layers a fixed state;
`kv_bytes_per_sequence*` and `capacity_requests` count them all for a request of a given length.
A latent cache is not split by heads (every GPU holds it whole), unless `attention_dp` (SGLang's
data-parallel attention): then each GPU holds its own requests' cache and the attention weights
whole.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from kvweb.gpu.layers import LayerType, kept_tokens
from kvweb.gpu.specs import BYTES_16, GPUSpec, LLMSpec


# How a swap copies a block over the host link: once (the lecture), or once per layer for K
# and once for V (vLLM V0's CacheEngine._swap: 2 x layers small copies per block).
SWAP_COPIES = ("per-block", "per-layer-kv")
TP_SIZES = (1, 2, 4, 8)
# bytes per parameter; fp8-block: FP8 with a scale per 128 x 128 block (DeepSeek's, Qwen3's FP8 checkpoints; the
# scales left out); mxfp4: the routed experts in OCP MXFP4 (EXPERT_BYTES), the rest 16-bit, as gpt-oss ships
WEIGHT_PRECISIONS = {"16-bit": 2, "fp8": 1, "fp8-block": 1, "int8": 1, "int4": 0.5, "mxfp4": 2}
EXPERT_BYTES = {"mxfp4": (4 * 32 + 8) / 8 / 32}  # 4-bit values and one 8-bit scale per 32: 4.25 bits
FP8_WEIGHTS = ("fp8", "fp8-block")
KV_PRECISIONS = {"16-bit": 2, "fp8": 1}  # bytes per K or V element
PREFILL_PRICES_KEPT = 8192  # (n_tokens, cached) pairs a cost model remembers (about 2 MB at most)


@dataclass(frozen=True)
class CostModel:
    """The assumptions every cost depends on, each with a stated default (the lecture's).

    Work and capacity are per GPU of the tensor-parallel group: all `tp` GPUs do the same
    share of every step at the same time."""

    gpu: GPUSpec
    model: LLMSpec
    mem_util: float = 0.9  # like vLLM's gpu_memory_utilization
    compute_eff: float = 0.7
    memory_eff: float = 0.8
    step_overhead_s: float = 0.5e-3
    block_overhead_s: float = 10e-6  # per copy over the host link
    link_bandwidth: float | None = None  # host link, B/s; None: the GPU's own
    swap_copies: str = "per-block"  # one of SWAP_COPIES
    ignore_weights: bool = False  # what-if: the weights take no memory (a model too big still runs)
    tp: int = 1  # tensor-parallel GPUs, one of TP_SIZES
    weight_precision: str = "16-bit"  # one of WEIGHT_PRECISIONS
    kv_precision: str = "16-bit"  # one of KV_PRECISIONS
    interconnect_bandwidth: float | None = None  # GPU to GPU, one direction, B/s; None: the GPU's NVLink
    allreduce_latency_s: float = 10e-6  # fixed cost of each all-reduce
    attention_dp: bool = False  # SGLang's data-parallel attention: each GPU holds its own requests' cache whole

    def __post_init__(self) -> None:
        for name, allowed in (("swap_copies", SWAP_COPIES), ("tp", TP_SIZES),
                              ("weight_precision", WEIGHT_PRECISIONS), ("kv_precision", KV_PRECISIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}")
        if self.weight_precision in EXPERT_BYTES and self.model.experts == 1:
            raise ValueError(f"weight_precision {self.weight_precision} quantizes routed experts only (as gpt-oss ships); "
                             f"{self.model.name} has none: use 16-bit, fp8, fp8-block, int8 or int4")

    # -- bytes -------------------------------------------------------------
    @property
    def _bytes_per_param(self) -> float:
        return WEIGHT_PRECISIONS[self.weight_precision]

    @property
    def _expert_bytes_per_param(self) -> float:
        """Bytes of a routed expert's parameter: the weight precision's, or MXFP4's 4.25 bits."""
        return EXPERT_BYTES.get(self.weight_precision, self._bytes_per_param)

    def _weights(self, params: float, embedding: float, experts: float = 0) -> float:
        """Bytes of `params` parameters of which `embedding` are the embedding and LM head and
        `experts` routed experts': a quantized checkpoint keeps the embedding and LM head in 16 bits
        (as FP8, INT8 and INT4 checkpoints do); MXFP4 quantizes only the experts."""
        if self._expert_bytes_per_param == self._bytes_per_param:
            return (params - embedding) * self._bytes_per_param + embedding * BYTES_16
        rest = (params - embedding - experts) * self._bytes_per_param
        return rest + experts * self._expert_bytes_per_param + embedding * BYTES_16

    @cached_property
    def _replicated_params(self) -> int:
        """Parameters every GPU holds whole: the attention's under data-parallel attention."""
        return self.model.attention_params if self.attention_dp else 0

    def _per_gpu(self, params: float, embedding: float, experts: float = 0) -> float:
        """One GPU's share of those weights: split over the group, replicated ones held whole."""
        whole = self._replicated_params * self._bytes_per_param
        return whole + (self._weights(params, embedding, experts) - whole) / self.tp

    @cached_property
    def _routed_params(self) -> int:
        """Every routed expert's parameters, over the MoE layers."""
        return self.model.experts * self.model.expert_params

    @property
    def weight_bytes(self) -> float:  # an int but for int4
        """All the weights the group holds, every expert, at the weight precision (one copy, and
        the tp - 1 more of the attention under data-parallel attention)."""
        extra = self._replicated_params * self._bytes_per_param * (self.tp - 1)
        return self._weights(self.model.params, self.model.embedding_params, self._routed_params) + extra

    @cached_property
    def weight_bytes_per_gpu(self) -> float:
        return self._per_gpu(self.model.params, self.model.embedding_params, self._routed_params)

    def experts_touched(self, tokens: float) -> float:
        """Expected distinct routed experts a step of `tokens` tokens runs per MoE layer, each
        token picking `active_experts` of `experts` at random: E (1 - (1 - k/E)^tokens); k for
        one token, nearly E for a big batch."""
        m = self.model
        return m.experts * (1 - (1 - m.active_experts / m.experts) ** tokens) if m.experts > 1 else 0.0

    def step_weight_bytes(self, tokens: float = 1) -> float:
        """Weight bytes one GPU reads in a step of `tokens` tokens: its share of every weight but
        the routed experts, and of the experts its tokens route to (at least one token's: a step
        with no token priced as one reads what a one-token step reads, so the serving engines'
        affine decode price, read off batches 0 and 1, stays today's k experts per step)."""
        m = self.model
        routed = self.experts_touched(max(tokens, 1)) - m.active_experts if m.experts > 1 else 0
        experts = (m.active_experts + routed) * m.expert_params if m.experts > 1 else 0
        return self._per_gpu(m.active_params + routed * m.expert_params, m.embedding_params, experts)

    @property
    def _attention_tp(self) -> int:
        """GPUs one request's attention is split over: 1 under data-parallel attention."""
        return 1 if self.attention_dp else self.tp

    @property
    def kv_heads_per_gpu(self) -> int:
        """ceil(kv_heads / tp): split when there are at least tp of them, else replicated (the
        most of any layer; a latent counts as one head, held whole)."""
        return max(a.kv_heads_per_gpu(self._attention_tp) for a, _ in self.model.groups)

    @cached_property
    def kv_bytes_per_token_per_gpu(self) -> int:
        """The growing part on one GPU: 2 (K and V) x full layers x KV heads on one GPU x head_dim
        x bytes per element, plus the latent of every latent layer (whole on every GPU)."""
        tp = self._attention_tp
        return sum(n * a.kv_elements_per_gpu(tp) for a, n in self.model.groups if not a.window) * \
            KV_PRECISIONS[self.kv_precision]

    @property
    def _copies(self) -> int:
        """GPUs a request's cache is on: all tp (each a share), or one under data-parallel attention."""
        return 1 if self.attention_dp else self.tp

    @property
    def kv_bytes_per_token(self) -> int:
        """A token's KV over the whole group (replicated heads counted on every GPU holding them)."""
        return self.kv_bytes_per_token_per_gpu * self._copies

    def kv_bytes_per_layer(self, context: int, block_size: int) -> list[int]:
        """One request of `context` tokens, each layer's bytes on one GPU holding it: full and latent
        layers every token, window layers the window, in whole blocks; linear layers their state."""
        tp, kv = self._attention_tp, KV_PRECISIONS[self.kv_precision]
        return [(kept_tokens(context, a.window, block_size) * a.kv_elements_per_gpu(tp) + a.state_elements_per_gpu(tp))
                * kv for a in self.model.attention]

    def kv_bytes_per_sequence_per_gpu(self, context: int, block_size: int) -> int:
        return sum(self.kv_bytes_per_layer(context, block_size))

    def kv_bytes_per_sequence(self, context: int, block_size: int) -> int:
        """One request of `context` tokens over the whole group."""
        return self.kv_bytes_per_sequence_per_gpu(context, block_size) * self._copies

    def capacity_requests(self, context: int, block_size: int) -> int:
        """Requests of `context` tokens whose cache fits beside the weights, over the group: each GPU
        holds a share of every request, or under data-parallel attention its own requests whole."""
        if not self.splits:
            return 0
        per_gpu = self.kv_bytes_free_per_gpu // self.kv_bytes_per_sequence_per_gpu(context, block_size)
        return int(per_gpu) * (self.tp if self.attention_dp else 1)

    @property
    def usable_bytes(self) -> float:
        """Per GPU."""
        return self.mem_util * self.gpu.hbm_bytes

    @property
    def kv_bytes_free_per_gpu(self) -> float:
        return max(0.0, self.usable_bytes - (0 if self.ignore_weights else self.weight_bytes_per_gpu))

    @property
    def splits(self) -> bool:
        """Whether the query heads divide evenly over the tp GPUs (vLLM refuses otherwise); under
        data-parallel attention no head is split."""
        return self.attention_dp or self.model.heads % self.tp == 0

    @property
    def _capacity_bytes_per_token(self) -> int:
        """What a token takes for capacity in tokens: the growing part, or where nothing grows
        without bound (every layer a window or a state), the window layers' part."""
        tp = self._attention_tp
        return self.kv_bytes_per_token_per_gpu or \
            sum(n * a.kv_elements_per_gpu(tp) for a, n in self.model.groups) * KV_PRECISIONS[self.kv_precision]

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV that fit beside the weights (0 when the weights alone do not fit or the
        model cannot be split): each GPU holds its share of each of them (under data-parallel
        attention, its own requests' tokens whole). Hybrid models: tokens of the growing part."""
        per_token = self._capacity_bytes_per_token
        if not self.splits or not per_token:
            return 0
        return int(self.kv_bytes_free_per_gpu // per_token) * (self.tp if self.attention_dp else 1)

    @property
    def fits(self) -> bool:
        """Whether this model can run here at all: its weights and at least one token of KV."""
        return self.kv_capacity_tokens > 0

    @property
    def where(self) -> str:
        return f"one {self.gpu.name}" if self.tp == 1 else f"{self.tp} x {self.gpu.name}"

    def fit(self) -> dict[str, object]:
        """Whether the configuration can run, with one plain sentence when it cannot (or when it
        is a what-if); every lab that prices work reports this beside its figures."""
        m, g, tp = self.model, self.gpu, self.tp
        weights, usable = f"{self.weight_bytes_per_gpu / 1e9:.1f} GB", f"{self.usable_bytes / 1e9:.1f} GB"
        share = "" if tp == 1 else " per GPU"
        note = None
        if not self.splits:
            note = (f"{m.name} cannot be split over {tp} GPUs: its {m.heads} query heads are not a multiple "
                    f"of {tp}, so nothing is priced")
        elif not self.fits:
            note = (f"{m.name} does not fit on {self.where}: its weights take {weights}{share} and {usable} is "
                    f"usable ({self.mem_util:.0%} of {g.hbm_bytes / 1e9:g} GB), so nothing is priced as if it ran; "
                    "ignore_weights=true prices it as a what-if")
        elif self.ignore_weights:
            real = replace(self, ignore_weights=False).fits
            note = (f"what-if: the weights of {m.name} ({weights}) are left out of {g.name}'s {usable}; "
                    f"for real it {'fits' if real else 'does not fit'}")
            # named as the what-if it is (`fits` is left out: a reader of it sees a priced run)
            return {"fits_what_if": True, "fits_for_real": real, **self._fit_figures(note)}
        return {"fits": self.fits, **self._fit_figures(note)}

    def _fit_figures(self, note: str | None) -> dict[str, object]:
        """Memory figures, each named by its scope: one GPU's, or the tensor-parallel group's
        (total; token counts are the group's)."""
        tp = self.tp
        return {"fit_note": note, "tp": tp, "weight_bytes_total": self.weight_bytes,
                "weight_bytes_per_gpu": self.weight_bytes_per_gpu, "usable_bytes_per_gpu": self.usable_bytes,
                "kv_capacity_tokens": self.kv_capacity_tokens,
                "kv_bytes_free_per_gpu": self.kv_bytes_free_per_gpu,
                "kv_bytes_free_total": self.kv_bytes_free_per_gpu * tp}

    def kv_capacity_blocks(self, block_size: int) -> int:
        return self.kv_capacity_tokens // block_size

    # -- time --------------------------------------------------------------
    @property
    def peak_flops(self) -> float:
        """FP8 weights on FP8 tensor cores, every other case at the 16-bit peak."""
        fp8 = self.gpu.fp8_flops if self.weight_precision in FP8_WEIGHTS else None
        return fp8 or self.gpu.peak_flops

    @property
    def interconnect(self) -> float:
        return self.gpu.nvlink_bandwidth if self.interconnect_bandwidth is None else self.interconnect_bandwidth

    @property
    def allreduces_per_step(self) -> int:
        """Two per layer (after attention, after the MLP); none on one GPU."""
        return 0 if self.tp == 1 else 2 * self.model.layers

    def allreduce_bytes_time(self, tokens: float) -> float:
        """Seconds the ring all-reduces of a step of `tokens` tokens spend moving bytes: each of
        them sends 2 (tp - 1) / tp x tokens x d_model x 2 B from every GPU."""
        ring = 2 * (self.tp - 1) / self.tp * tokens * self.model.d_model * BYTES_16
        return self.allreduces_per_step * ring / self.interconnect

    def allreduce_time(self, tokens: float) -> float:
        """A step's all-reduces: bytes over the interconnect plus a latency each."""
        return self.allreduce_bytes_time(tokens) + self.allreduces_per_step * self.allreduce_latency_s

    def step_time(self, flops: float, bytes_moved: float) -> float:
        """The roofline of one GPU's work, plus the all-reduces' latencies and the step overhead
        (their bytes' time is carried in the work: see `_with_allreduce`)."""
        flop_rate, byte_rate, allreduce_s, overhead_s = self._step_constants
        compute, memory = flops / flop_rate, bytes_moved / byte_rate
        return (memory if memory > compute else compute) + allreduce_s + overhead_s  # max(), without its call

    def step_times(self, flops: np.ndarray, bytes_moved: np.ndarray) -> np.ndarray:
        """`step_time` of many steps at once, elementwise: the same operations in the same
        order, so each element equals `step_time` of that step to the last bit."""
        flop_rate, byte_rate, allreduce_s, overhead_s = self._step_constants
        return np.maximum(flops / flop_rate, bytes_moved / byte_rate) + allreduce_s + overhead_s

    @cached_property
    def _step_constants(self) -> tuple[float, float, float, float]:
        """What `step_time` needs, computed once: the engines price every step with it."""
        return (self.peak_flops * self.compute_eff, self.gpu.hbm_bandwidth * self.memory_eff,
                self.allreduces_per_step * self.allreduce_latency_s, self.step_overhead_s)

    # -- work counts -------------------------------------------------------
    def _linear_flops(self, tokens: float, logits: float) -> float:
        m = self.model
        return (2.0 * (m.active_params - m.embedding_params) * tokens + 2.0 * m.d_model * m.vocab * logits) / self.tp

    def _with_allreduce(self, flops: float, bytes_moved: float, tokens: float) -> tuple[float, float]:
        """Work with the all-reduces' byte time t added to both sides as its equivalent
        (t x attainable FLOP/s, t x attainable B/s): max(C + t, M + t) = max(C, M) + t, and it
        stays exact for any sum of works, which is how a simulator prices a whole batch."""
        t = self.allreduce_bytes_time(tokens)
        return (flops + t * self.peak_flops * self.compute_eff,
                bytes_moved + t * self.gpu.hbm_bandwidth * self.memory_eff)

    def _attention_parts(self, layer_pairs: Callable[[LayerType], tuple[float, float]],
                         decode: bool) -> list[tuple[LayerType, float, float]]:
        """(layer type, FLOPs, KV bytes) of one GPU's attention per layer group; `layer_pairs`
        gives a layer type's (query-key pairs, cached tokens or states read)."""
        m, kv, tp = self.model, KV_PRECISIONS[self.kv_precision], self._attention_tp
        share = self.tp if self.attention_dp else 1  # each GPU reads only its own requests' cache
        parts = []
        for a, n in m.groups:
            pairs, read = layer_pairs(a)
            nbytes = n * read * (a.kv_elements_per_gpu(tp) + a.state_elements_per_gpu(tp)) * kv
            parts.append((a, a.attention_flops(n, m.heads, self.tp, pairs, decode), nbytes if share == 1 else nbytes / share))
        return parts

    def _attention_counts(self, layer_pairs: Callable[[LayerType], tuple[float, float]], decode: bool) -> tuple[float, float]:
        parts = self._attention_parts(layer_pairs, decode)
        return sum(p[1] for p in parts), sum(p[2] for p in parts)

    @staticmethod
    def _decode_pairs(batch: int, total_context: int) -> Callable[[LayerType], tuple[float, float]]:
        def pairs(a: LayerType) -> tuple[float, float]:
            if a.kind == "linear":
                return batch, 2 * batch
            read = min(total_context, batch * a.window) if a.window else total_context
            return read, read
        return pairs

    def decode_attention(self, batch: int, total_context: int) -> list[dict[str, object]]:
        """A decode step's attention per layer group, one GPU's: FLOPs and KV bytes read (a window
        reads at most its window, an absorbed latent layer the latent, a linear layer its state)."""
        return [{"kind": a.kind, "layers": n, "attention_flops": f, "kv_bytes_read": b}
                for (a, f, b), (_, n) in zip(self._attention_parts(self._decode_pairs(batch, total_context), True),
                                             self.model.groups)]

    def prefill_counts(self, n_tokens: int, cached: int = 0) -> tuple[float, float]:
        """One GPU's (FLOPs, HBM bytes) to prefill n tokens after `cached` tokens already in the
        cache. Causal attention: token i attends to cached + i keys (a window: at most its
        window); linear layers read and write their state once. Logits only for the last token."""
        n, c = n_tokens, cached

        def pairs(a: LayerType) -> tuple[float, float]:
            if a.kind == "linear":
                return n, 2
            if a.window:
                m = max(0, min(n, a.window - c))  # the first m tokens see all of the cache
                return m * c + m * (m + 1) / 2 + (n - m) * a.window, n + min(c, a.window)
            return n * c + n * (n + 1) / 2, n + c

        attention_flops, kv_bytes = self._attention_counts(pairs, decode=False)
        return self._linear_flops(n, 1) + attention_flops, self.step_weight_bytes(n) + kv_bytes

    def decode_counts(self, batch: int, total_context: int) -> tuple[float, float]:
        """One GPU's (FLOPs, HBM bytes) of one decode step for `batch` sequences holding
        `total_context` tokens between them: weights read once (the experts the batch routes to),
        every sequence's KV read once (a window layer at most its window per sequence, an upper
        bound from the total; a linear layer its state, read and written)."""
        attention_flops, kv_bytes = self._attention_counts(self._decode_pairs(batch, total_context), decode=True)
        return self._linear_flops(batch, batch) + attention_flops, self.step_weight_bytes(batch) + kv_bytes

    def prefill_work(self, n_tokens: int, cached: int = 0) -> tuple[float, float]:
        """`prefill_counts` with the all-reduces' bytes time in it (equal to it on one GPU).
        Remembered per (n_tokens, cached): a serving run prices every admission with it."""
        key = (n_tokens, cached)
        work = self._prefill_works.get(key)
        if work is None:
            work = self._with_allreduce(*self.prefill_counts(n_tokens, cached), n_tokens)
            if len(self._prefill_works) < PREFILL_PRICES_KEPT:
                self._prefill_works[key] = work
        return work

    @cached_property
    def _prefill_works(self) -> dict[tuple[int, int], tuple[float, float]]:
        return {}

    def decode_work(self, batch: int, total_context: int) -> tuple[float, float]:
        """`decode_counts` with the all-reduces' bytes time in it (equal to it on one GPU)."""
        return self._with_allreduce(*self.decode_counts(batch, total_context), batch)

    # -- public costs ------------------------------------------------------
    def prefill_cost(self, n_tokens: int, cached: int = 0) -> float:
        return self.step_time(*self.prefill_work(n_tokens, cached))

    def decode_step_cost(self, batch: int, total_context: int) -> float:
        return self.step_time(*self.decode_work(batch, total_context))

    @property
    def link(self) -> float:
        return self.gpu.link_bandwidth if self.link_bandwidth is None else self.link_bandwidth

    @property
    def copies_per_block(self) -> int:
        return 1 if self.swap_copies == "per-block" else 2 * self.model.layers

    def swap_cost(self, n_tokens: int, block_size: int) -> float:
        """One direction over the host link: bytes / link + an overhead per copy. Every GPU of
        the group moves its own share over its own link at the same time."""
        copies = math.ceil(n_tokens / block_size) * self.copies_per_block
        return n_tokens * self.kv_bytes_per_token_per_gpu / self.link + copies * self.block_overhead_s

    def swap_roundtrip_cost(self, n_tokens: int, block_size: int) -> float:
        return 2 * self.swap_cost(n_tokens, block_size)

    def recompute_cost(self, n_tokens: int) -> float:
        """Recompute drops the KV and prefills prompt + generated tokens in one go."""
        return self.prefill_cost(n_tokens)

    def intensity(self, flops: float, bytes_moved: float) -> float:
        return flops / bytes_moved

    def attainable_flops(self, intensity: float) -> float:
        return min(self.peak_flops * self.compute_eff, intensity * self.gpu.hbm_bandwidth * self.memory_eff)

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where the roofline turns from memory- to compute-bound."""
        return self.peak_flops * self.compute_eff / (self.gpu.hbm_bandwidth * self.memory_eff)


def prefill_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, **assumptions: float) -> float:
    return CostModel(gpu, model, **assumptions).prefill_cost(n_tokens)


def decode_step_cost(model: LLMSpec, gpu: GPUSpec, batch: int, context_lengths: Sequence[int] | int, **assumptions: float) -> float:
    """`context_lengths`: one length shared by the whole batch, or one per sequence."""
    total = context_lengths * batch if isinstance(context_lengths, int) else sum(context_lengths)
    return CostModel(gpu, model, **assumptions).decode_step_cost(batch, total)


def swap_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, block_size: int, per_block_overhead: float = 10e-6) -> float:
    return CostModel(gpu, model, block_overhead_s=per_block_overhead).swap_cost(n_tokens, block_size)


def recompute_cost(model: LLMSpec, gpu: GPUSpec, n_tokens: int, **assumptions: float) -> float:
    return CostModel(gpu, model, **assumptions).recompute_cost(n_tokens)
