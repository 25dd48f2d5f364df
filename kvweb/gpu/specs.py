"""The paper GPU's hardware and model specs (SPEC section 1): public figures, decimal units.

A GPU is its HBM size, dense peak FLOP/s (16-bit, and FP8 where it has FP8 tensor cores), HBM
bandwidth, host link and NVLink; a model is its shape, from which parameter count, weight bytes
and KV bytes per token follow (at 16 bits; `CostModel` applies the chosen precision).

GPU figures are NVIDIA's datasheets: dense (not 2:4-sparse) tensor-core peaks; NVLink per GPU is
one direction of the total (A100 NVLink 3: 12 links, 600 GB/s in both directions together, so
300 GB/s each way; H100 and H200 NVLink 4: 18 links, 900 GB/s together, 450 GB/s each way,
nvidia.com/en-us/data-center/nvlink). One direction because a ring all-reduce sends and
receives at once, on the two directions of a link: the bytes a GPU sends go one way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from kvweb.gpu.layers import Attention, LatentAttention, LayerType, LinearAttention

BYTES_16 = 2  # bytes per element of a 16-bit (bf16/fp16) weight, activation or KV entry


@dataclass(frozen=True)
class GPUSpec:
    name: str
    hbm_bytes: float
    peak_flops: float  # dense bf16 FLOP/s
    hbm_bandwidth: float  # B/s
    link_bandwidth: float  # host link (PCIe class), B/s
    nvlink_bandwidth: float  # GPU-to-GPU, per GPU, one direction, B/s
    fp8_flops: float | None = None  # dense FP8 FLOP/s; None: no FP8 tensor cores
    # The memory as the card reports it (only a measured run reads these: kvweb/gpu/engine_memory.py;
    # the roofline keeps hbm_bytes): nvidia-smi's memory.total, and CUDA's total
    # (torch.cuda.mem_get_info()[1], what vLLM and SGLang read), less by what the driver keeps.
    # None: the decimal hbm_bytes.
    reported_bytes: float | None = None
    cuda_bytes: float | None = None


@dataclass(frozen=True)
class LLMSpec:
    """A decoder-only transformer. A mixture of experts has `experts` SwiGLU MLPs per layer
    (and a router, d_model x experts) of which `active_experts` run for each token, plus
    `shared_experts` of `shared_d_ff` that every token runs; its first `dense_layers` layers
    have one dense MLP of `dense_d_ff` instead.

    `layer_types` gives each layer's attention (kvweb/gpu/layers.py: full, sliding window,
    latent, linear); left empty, every layer is full attention with `kv_heads` x `head_dim`
    (every model the lecture knows)."""

    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int  # SwiGLU: three d_model x d_ff matrices (per expert)
    vocab: int
    tied_embeddings: bool = False
    experts: int = 1
    active_experts: int = 1
    shared_experts: int = 0
    shared_d_ff: int = 0
    dense_layers: int = 0
    dense_d_ff: int = 0
    layer_types: tuple[LayerType, ...] = ()

    def __post_init__(self) -> None:
        if self.layer_types and len(self.layer_types) != self.layers:
            raise ValueError(f"{self.name}: {len(self.layer_types)} layer types for {self.layers} layers")

    @cached_property
    def attention(self) -> tuple[LayerType, ...]:
        """Each layer's attention, in order."""
        return self.layer_types or (Attention(self.kv_heads, self.head_dim),) * self.layers

    @cached_property
    def groups(self) -> list[tuple[LayerType, int]]:
        """The layers grouped by attention (type and shape), in order of first appearance, with
        their counts."""
        return list(Counter(self.attention).items())

    def _mlp(self, index: int, experts: int) -> int:
        if index < self.dense_layers:
            return 3 * self.d_model * self.dense_d_ff
        router = self.d_model * self.experts if self.experts > 1 else 0
        return (
            router + experts * 3 * self.d_model * self.d_ff + self.shared_experts * 3 * self.d_model * self.shared_d_ff
        )

    def _layers(self, experts: int) -> int:
        return sum(a.params(self.d_model, self.heads) + self._mlp(i, experts) for i, a in enumerate(self.attention))

    @cached_property
    def attention_params(self) -> int:
        """Every layer's attention projections (what SGLang's data-parallel attention replicates)."""
        return sum(a.params(self.d_model, self.heads) for a in self.attention)

    @cached_property
    def expert_params(self) -> int:
        """One routed expert of every MoE layer: what a step reads per distinct expert it routes to."""
        return (self.layers - self.dense_layers) * 3 * self.d_model * self.d_ff if self.experts > 1 else 0

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.d_model * (1 if self.tied_embeddings else 2)

    @cached_property
    def params(self) -> int:
        """Every expert counted (what memory holds)."""
        return self._layers(self.experts) + self.embedding_params

    @cached_property
    def active_params(self) -> int:
        """Parameters a token uses: the FLOPs per token are twice this."""
        return self._layers(self.active_experts) + self.embedding_params

    @property
    def weight_bytes(self) -> int:
        """At 16 bits."""
        return self.params * BYTES_16

    @cached_property
    def kv_bytes_per_token(self) -> int:
        """The growing part at 16 bits, one GPU: K and V (or the latent) of every full and latent
        layer (sliding windows and fixed states do not grow with the context)."""
        return sum(a.kv_elements for a in self.attention if not a.window) * BYTES_16


GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in (
        # reported_bytes: nvidia-smi's total in MiB, as Modal lists its GPUs (modal-client PR #2797:
        # A100 40GB 40960 MiB, A100 80GB 81920 MiB, H100 81559 MiB) and as nvidia-smi prints it
        # (H100 80GB HBM3 "81559MiB": NVIDIA/nccl issue #1264; H200 "143771MiB" in many public logs).
        # cuda_bytes: PyTorch's "total capacity" / vLLM's "total_gpu_memory", printed to 0.01 GiB, so
        # good to about 10 MiB, and it moves with the driver by a few tenths of a GiB (H100: 79.11-79.33
        # GiB in public logs). A100-40GB 39.39 GiB (PyTorch OOM messages on A100 40GB); A100-80GB 79.15
        # GiB (a PyTorch OOM message beside nvidia-smi's 81920MiB; vLLM logs; less certain: H100 logs
        # print nearby figures); H100 79.22 GiB (vLLM PRs #10511 and #12126, H100-80G); H200 139.81 GiB
        # (a vLLM log "total_gpu_memory (139.81GiB)"; PyTorch OOM messages on 8xH200 print 139.80-139.81).
        GPUSpec(
            "A100-40GB",
            40e9,
            312e12,
            1555e9,
            25e9,
            300e9,
            reported_bytes=40960 * 2**20,
            cuda_bytes=round(39.39 * 2**30),
        ),
        GPUSpec(
            "A100-80GB",
            80e9,
            312e12,
            2039e9,
            25e9,
            300e9,
            reported_bytes=81920 * 2**20,
            cuda_bytes=round(79.15 * 2**30),
        ),
        GPUSpec(
            "H100-SXM",
            80e9,
            989e12,
            3350e9,
            50e9,
            450e9,
            fp8_flops=1979e12,
            reported_bytes=81559 * 2**20,
            cuda_bytes=round(79.22 * 2**30),
        ),
        GPUSpec(
            "H200",
            141e9,
            989e12,
            4800e9,
            50e9,
            450e9,
            fp8_flops=1979e12,
            reported_bytes=143771 * 2**20,
            cuda_bytes=round(139.81 * 2**30),
        ),
    )
}

# Real models from their Hugging Face config.json (num_hidden_layers, hidden_size,
# num_attention_heads, num_key_value_heads, head_dim = hidden_size / heads, intermediate_size,
# vocab_size, tie_word_embeddings; Mixtral: num_local_experts 8, num_experts_per_tok 2).
# Layer norms are left out everywhere, as are Qwen2.5's q/k/v biases ((heads + 2 kv_heads) x
# head_dim per layer: 129 thousand parameters in Qwen2.5-7B, 0.002%).
MODELS: dict[str, LLMSpec] = {
    m.name: m
    for m in (
        # d_ff 13653 gives a three-matrix MLP OPT-13B's parameter count. The lecture's model has
        # its own LM head (13.10e9 parameters); the real OPT-13B ties it to the embedding (12.84e9).
        LLMSpec("opt-13b-like", 40, 5120, 40, 40, 128, 13653, 50272),
        LLMSpec("opt-13b", 40, 5120, 40, 40, 128, 13653, 50272, tied_embeddings=True),
        LLMSpec("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256),
        LLMSpec("llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256),
        # Llama 3.1 keeps Llama 3's shapes (it changes RoPE scaling and the context to 128K)
        LLMSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256),  # meta-llama/Llama-3.1-8B
        LLMSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256),  # meta-llama/Llama-3.1-70B
        LLMSpec("llama-3.1-405b", 126, 16384, 128, 8, 128, 53248, 128256),  # meta-llama/Llama-3.1-405B
        LLMSpec("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064),  # Qwen/Qwen2.5-7B
        LLMSpec("qwen2.5-72b", 80, 8192, 64, 8, 128, 29568, 152064),  # Qwen/Qwen2.5-72B
        LLMSpec(
            "mixtral-8x7b",
            32,
            4096,
            32,
            8,
            128,
            14336,
            32000,  # mistralai/Mixtral-8x7B-v0.1
            experts=8,
            active_experts=2,
        ),
        # Today's models, layer by layer (issue 27): each is also kvweb/gpu/configs/NAME.json, written
        # from its published config.json (docs/gpu.md cites them), and parses to exactly this spec.
        # deepseek-ai/DeepSeek-V3: MLA (latent 512 + rope 64) in all 61 layers, 256 routed experts
        # (top 8) + 1 shared of 2048, the first 3 layers dense (18432); the MTP module left out.
        LLMSpec(
            "deepseek-v3",
            61,
            7168,
            128,
            1,
            576,
            2048,
            129280,
            experts=256,
            active_experts=8,
            shared_experts=1,
            shared_d_ff=2048,
            dense_layers=3,
            dense_d_ff=18432,
            layer_types=(LatentAttention(512, 64, 1536, 128, 128),) * 61,
        ),
        # openai/gpt-oss-120b and -20b: 128-token sliding window and full attention alternating,
        # 8 KV heads of 64; 128 (or 32) experts of 2880, top 4.
        LLMSpec(
            "gpt-oss-120b",
            36,
            2880,
            64,
            8,
            64,
            2880,
            201088,
            experts=128,
            active_experts=4,
            layer_types=(Attention(8, 64, window=128), Attention(8, 64)) * 18,
        ),
        LLMSpec(
            "gpt-oss-20b",
            24,
            2880,
            64,
            8,
            64,
            2880,
            201088,
            experts=32,
            active_experts=4,
            layer_types=(Attention(8, 64, window=128), Attention(8, 64)) * 12,
        ),
        # google/gemma-3-27b-it (text_config): 5 local layers (window 1024) to 1 global, 16 KV heads of
        # 128; the embedding is tied (HF's default); the vision tower left out.
        LLMSpec(
            "gemma-3-27b",
            62,
            5376,
            32,
            16,
            128,
            21504,
            262208,
            tied_embeddings=True,
            layer_types=((Attention(16, 128, window=1024),) * 5 + (Attention(16, 128),)) * 10
            + (Attention(16, 128, window=1024),) * 2,
        ),
        # Qwen/Qwen3-32B: 64 query and 8 KV heads of 128 (8192 wide, over a d_model of 5120), SwiGLU 25600.
        LLMSpec("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936),
        # Qwen/Qwen3-235B-A22B: 94 layers, 4 KV heads of 128, 128 experts of 1536 (top 8), no shared expert.
        LLMSpec("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 1536, 151936, experts=128, active_experts=8),
        # Qwen/Qwen3-Next-80B-A3B-Instruct: one gated-attention layer (2 KV heads of 256, output gate)
        # in four, the others gated DeltaNet (16 key heads, 32 value heads of 128, conv 4); 512
        # experts of 512, top 10, and one shared expert of 512.
        LLMSpec(
            "qwen3-next-80b-a3b",
            48,
            2048,
            16,
            2,
            256,
            512,
            151936,
            experts=512,
            active_experts=10,
            shared_experts=1,
            shared_d_ff=512,
            layer_types=((LinearAttention(16, 128, 32, 128, 4),) * 3 + (Attention(2, 256, gate=True),)) * 12,
        ),
    )
}
