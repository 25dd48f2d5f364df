"""Memory as the engine counts it ("Time you can trust", item 2): what vLLM and SGLang leave for KV.

The roofline (`CostModel`) gives the KV cache what is left of the GPU's decimal HBM x mem_util once
the weights are in. The engines count otherwise, and a measured run (`MeasuredCostModel`, and only
it) follows them:

- **The total** is what the card reports through CUDA (`torch.cuda.mem_get_info()[1]`), not the
  datasheet's decimal figure: an H100's "80 GB" is 81 559 MiB in nvidia-smi and about 79.22 GiB
  through CUDA (the driver keeps the rest). `GPUSpec.cuda_bytes` (else `reported_bytes`, else
  `hbm_bytes`).
- **vLLM V1** (`gpu_worker.determine_available_memory`): requested = gpu_memory_utilization x total;
  KV = requested - (weights as loaded + the profile run's torch peak + the non-torch memory that
  grew during it + the CUDA graph estimate, subtracted by default since v0.21). The snapshot it
  measures from is taken after the CUDA context and NCCL are up, so they sit in the 1 - utilization
  margin, not in the budget. "Available KV cache memory" is that figure; "GPU KV cache size" is
  whole blocks of it (16 tokens each).
- **SGLang** (`model_runner.profile_max_num_token`): total_gpu_memory is the *free* memory before
  the weights load (after the CUDA context and NCCL); KV = free after loading - total_gpu_memory x
  (1 - mem_fraction_static) = mem_fraction_static x free before - weights. Activations and CUDA
  graphs live in the 1 - fraction reserve; nothing is profiled.

Each term is simple; which are assumptions is said beside each constant (docs/accuracy.md, "Memory
as the engine counts it"). No engine log was compared with these figures on a GPU here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvweb.gpu.specs import BYTES_16, GPUSpec, LLMSpec

GiB = 1 << 30
MiB = 1 << 20

# NCCL's buffers per GPU by tensor-parallel size: aiconfigurator-core 0.12.0,
# aiconfigurator_core/systems/h100_sxm.yaml `misc.nccl_mem` (the same in a100_sxm, h200_sxm and
# b200_sxm.yaml), there marked "some nonofficial correction based on observations". Read, not copied
# as code: 0 on one GPU, 342 MB on 2, 392 MB on 4 and 8.
NCCL_BYTES = {1: 0, 2: 358_612_992, 4: 411_041_792, 8: 411_041_792}
# Assumption: non-torch memory that vLLM's profile run sees grow on one GPU (cuBLAS/cuBLASLt
# workspaces and the like). vLLM's logs of 1-GPU runs print "non_torch_memory takes" 0.09-0.35 GiB
# (vLLM PR #12126: 0.16 GiB on an H100; issue #14447: 0.20 GiB); 0.2 GiB, plus NCCL_BYTES for tp > 1
# (its lazily allocated buffers; an assumption: vLLM initialises NCCL before its snapshot).
NON_TORCH_BYTES = int(0.2 * GiB)
# Assumption: the CUDA context (and the libraries it loads) that SGLang's free memory before loading
# leaves out: 0.5 GiB. aiconfigurator's `other_mem` says it was "551MB" before it became a 3.5 GB
# safety reserve (its own padding, not an engine's term, so not used here).
CUDA_CONTEXT_BYTES = int(0.5 * GiB)
# Assumption: vLLM's CUDA graph estimate (`profile_cudagraph_memory`, on by default since v0.21:
# "Estimated CUDA graph memory: X GiB total"), one constant per GPU. Public logs of dense and MoE
# models print 0.30-1.58 GiB (gpustack/runner PR #251: 0.36 GiB; vLLM issue #45178 and PR #51590
# report overestimates of several GiB on large MoE deployments); 0.5 GiB.
VLLM_CUDA_GRAPH_BYTES = int(0.5 * GiB)
VLLM_BLOCK_TOKENS = 16  # vLLM's default block_size: "GPU KV cache size" is whole blocks
VLLM_MAX_NUM_SEQS = 256  # max_num_seqs (vLLM's default for an API server): the profile run's sampler rows
LOGIT_BYTES = 4  # the sampler's logits are float32
ENGINES = ("vllm", "sglang")


def total_bytes(gpu: GPUSpec) -> float:
    """The GPU's memory as CUDA reports it (what both engines read), else as nvidia-smi does, else the
    datasheet's decimal figure."""
    return gpu.cuda_bytes or gpu.reported_bytes or gpu.hbm_bytes


def vllm_token_budget(gpu: GPUSpec) -> int:
    """vLLM's default max_num_batched_tokens for an API server: 8192 on GPUs of 70 GiB and more except
    A100s, else 2048 (the rule kvweb/serving/schedulers/v1_scheduler.py `default_token_budget` follows)."""
    return 8192 if gpu.hbm_bytes >= 70 * GiB and "A100" not in gpu.name else 2048


def activation_bytes(
    model: LLMSpec, tp: int, tokens: int, seqs: int = VLLM_MAX_NUM_SEQS, attention_dp: bool = False
) -> float:
    """The profile run's torch peak on one GPU, modelled simply: `tokens` tokens through one layer,
    16-bit, with these live at once: the hidden states (tokens x d_model, whole on every GPU), the
    fused QKV output (query heads and KV heads on this GPU x head_dim), the MLP's gate and up outputs
    (2 x its width / tp; an MoE's width is its active experts' and shared experts'); plus the
    sampler's float32 logits for `seqs` requests over the whole vocabulary. An assumption: the sort
    buffers of top-k/top-p sampling, the activation's output and allocator rounding are left out."""
    m = model
    attention_tp = 1 if attention_dp else tp
    qkv = (m.heads // attention_tp + 2 * math.ceil(m.kv_heads / attention_tp)) * m.head_dim
    width = m.active_experts * m.d_ff + m.shared_experts * m.shared_d_ff if m.experts > 1 else m.d_ff
    if m.dense_layers:
        width = max(width, m.dense_d_ff)
    per_token = m.d_model + qkv + 2 * width / tp
    return tokens * per_token * BYTES_16 + seqs * m.vocab * LOGIT_BYTES


def non_torch_bytes(tp: int) -> int:
    """What vLLM's profile run sees grow outside torch on one GPU (an assumption: see NON_TORCH_BYTES)."""
    return NON_TORCH_BYTES + NCCL_BYTES[tp]


def sglang_defaults(gpu: GPUSpec, tp: int) -> tuple[int, int]:
    """SGLang's chunked_prefill_size and cuda_graph_max_bs by nvidia-smi's total (server_args.py
    `_handle_gpu_memory_settings`, 0.5.x): under 20 GiB 2048 and 8; under 35 GiB 2048 and 24 (80 from
    tp 4); under 60 GiB (A100-40GB) 4096 and 32 (160); under 160 GiB (H100, A100-80GB, H200) 8192 and
    256 (512); above, 16384 and 512. (kvweb/serving/schedulers/radix_scheduler.py `default_chunk_size` gives an
    A100-40GB 8192.)"""
    gib = (gpu.reported_bytes or gpu.hbm_bytes) / GiB
    small = tp < 4
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 2048, 24 if small else 80
    if gib < 60:
        return 4096, 32 if small else 160
    if gib < 160:
        return 8192, 256 if small else 512
    return 16384, 512


def sglang_default_fraction(gpu: GPUSpec, tp: int) -> float:
    """SGLang's default mem_fraction_static (server_args.py `_handle_gpu_memory_settings`, 0.5.x), in
    MiB of nvidia-smi's total: reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x
    cuda_graph_max_bs + tp x 1024 / 8, at least 10 GiB on GPUs over 60 GiB; fraction = (total -
    reserved) / total, rounded to 3 places (no speculative decoding, no data-parallel attention)."""
    total_mib = (gpu.reported_bytes or gpu.hbm_bytes) / MiB
    chunk, bs = sglang_defaults(gpu, tp)
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * bs + tp / 8 * 1024
    if total_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((total_mib - reserved) / total_mib, 3)


@dataclass(frozen=True)
class EngineMemory:
    """One GPU's memory as `engine` counts it, in bytes. `requested` is the engine's budget (vLLM:
    utilization x total; SGLang: fraction x free before loading); `kv` what it gives the KV cache."""

    engine: str
    total: float
    fraction: float  # gpu_memory_utilization or mem_fraction_static
    requested: float
    weights: float
    activation: float  # in the budget under vLLM; SGLang's lies in its 1 - fraction reserve (0 here)
    non_torch: float  # vLLM: grown during the profile run; SGLang: context + NCCL before loading (outside the budget)
    graphs: float  # vLLM's CUDA graph estimate; SGLang's lies in its reserve (0 here)

    @property
    def usable(self) -> float:
        """The budget left for weights and KV."""
        inside = self.activation + self.graphs + (self.non_torch if self.engine == "vllm" else 0.0)
        return max(0.0, self.requested - inside)

    @property
    def kv(self) -> float:
        return max(0.0, self.usable - self.weights)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "kv": self.kv, "units": "bytes, one GPU"}


def vllm_memory(
    gpu: GPUSpec,
    model: LLMSpec,
    tp: int,
    utilization: float,
    weights: float,
    tokens: int | None = None,
    seqs: int = VLLM_MAX_NUM_SEQS,
    attention_dp: bool = False,
) -> EngineMemory:
    """vLLM V1's accounting on one GPU of `tp` (`weights`: that GPU's weight bytes as loaded)."""
    total = total_bytes(gpu)
    budget = vllm_token_budget(gpu) if tokens is None else tokens
    return EngineMemory(
        "vllm",
        total,
        utilization,
        utilization * total,
        weights,
        activation_bytes(model, tp, budget, seqs, attention_dp),
        non_torch_bytes(tp),
        VLLM_CUDA_GRAPH_BYTES,
    )


def sglang_memory(gpu: GPUSpec, tp: int, fraction: float, weights: float) -> EngineMemory:
    """SGLang's accounting on one GPU of `tp`: fraction x (total - context - NCCL) - weights."""
    total = total_bytes(gpu)
    outside = CUDA_CONTEXT_BYTES + NCCL_BYTES[tp]
    return EngineMemory("sglang", total, fraction, fraction * (total - outside), weights, 0.0, outside, 0.0)
