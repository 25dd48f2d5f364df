"""What one layer's attention keeps per request, by type (issue 27): the four kinds of layer the
models served in 2026 mix.

- `Attention`: full attention (KV heads x head dim per token, for every token), or sliding-window
  attention when it has a `window` (the same per token, for the last `window` tokens only).
- `LatentAttention` (DeepSeek's MLA): one latent vector (rank + rope dim) per token, shared by all
  heads, so tensor parallelism cannot split it by heads.
- `LinearAttention` (gated DeltaNet, as Qwen3-Next's): a fixed recurrent state per request and a
  short convolution state, nothing per token.

Each type gives its elements per token (the growing part), its fixed state per request, the
tokens it keeps at a context, its parameters and its attention FLOPs; `CostModel` turns elements
into bytes at the KV precision and splits them over GPUs. Figures are per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

# The names the kinds go by in results, views and config.json's `layer_types`.
KINDS = ("full", "sliding", "latent", "linear")


def kept_tokens(context: int, window: int, block_size: int) -> int:
    """Tokens of KV a layer holds at `context` tokens, in whole blocks as a paged engine keeps
    them: every block for full attention (window 0); for a window, the blocks holding the last
    `window` tokens (a block wholly before the window is freed, one the window starts inside is
    kept whole)."""
    if context <= 0:
        return 0
    if not window or context <= window:
        return math.ceil(context / block_size) * block_size
    first, last = (context - window) // block_size, (context - 1) // block_size
    return (last - first + 1) * block_size


@dataclass(frozen=True)
class Attention:
    """Grouped-query attention: `kv_heads` K and V heads of `head_dim`. `window` > 0: sliding
    window of that many tokens. `gate`: an output gate (a second query-sized projection, as
    Qwen3-Next's gated attention has)."""

    kv_heads: int
    head_dim: int
    window: int = 0
    gate: bool = False

    @property
    def kind(self) -> str:
        return "sliding" if self.window else "full"

    @property
    def kv_elements(self) -> int:
        """K and V elements per token, all heads."""
        return 2 * self.kv_heads * self.head_dim

    def kv_elements_per_gpu(self, tp: int) -> int:
        """KV heads split over the GPUs, replicated when fewer than tp (ceil(kv_heads / tp) each)."""
        return 2 * -(-self.kv_heads // tp) * self.head_dim

    def kv_heads_per_gpu(self, tp: int) -> int:
        return -(-self.kv_heads // tp)

    state_elements = 0

    def state_elements_per_gpu(self, tp: int) -> int:
        return 0

    def params(self, d_model: int, heads: int) -> int:
        """Q (twice with a gate), K, V and O projections."""
        return d_model * self.head_dim * ((3 if self.gate else 2) * heads + 2 * self.kv_heads)

    def attention_flops(self, layers: int, heads: int, tp: int, pairs: float, decode: bool) -> float:
        """QK^T and AV: 2 matmuls x 2 FLOPs per multiply-add, per (query, key) pair, one GPU's
        query heads."""
        return 4.0 * layers * (heads / tp) * self.head_dim * pairs


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3): the cache keeps, per token, one latent of
    `latent` (kv_lora_rank) plus one shared rope key of `rope_dim`; queries go through a rank
    `q_rank` bottleneck (0: none); heads have `nope_dim` + `rope_dim` query/key dims and `v_dim`
    value dims."""

    latent: int
    rope_dim: int
    q_rank: int
    nope_dim: int
    v_dim: int

    kind = "latent"
    window = 0
    state_elements = 0

    @property
    def kv_elements(self) -> int:
        return self.latent + self.rope_dim

    def kv_elements_per_gpu(self, tp: int) -> int:
        """Not split by heads: every GPU of the group holds the whole latent (vLLM's and SGLang's
        default)."""
        return self.kv_elements

    def kv_heads_per_gpu(self, tp: int) -> int:
        return 1

    def state_elements_per_gpu(self, tp: int) -> int:
        return 0

    def params(self, d_model: int, heads: int) -> int:
        qk = self.nope_dim + self.rope_dim
        q = d_model * self.q_rank + self.q_rank * heads * qk if self.q_rank else d_model * heads * qk
        kv = d_model * (self.latent + self.rope_dim) + self.latent * heads * (self.nope_dim + self.v_dim)
        return q + kv + heads * self.v_dim * d_model

    def attention_flops(self, layers: int, heads: int, tp: int, pairs: float, decode: bool) -> float:
        """Prefill expands the latent into per-head keys and values (nope + rope dims, v dims);
        decode runs absorbed: every head scores against the latent + rope key and sums latents."""
        qk, v = (self.latent + self.rope_dim, self.latent) if decode else (self.nope_dim + self.rope_dim, self.v_dim)
        return 2.0 * layers * (heads / tp) * (qk + v) * pairs


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet (Qwen3-Next's linear attention): per request a recurrent state of
    value_heads x key_dim x value_dim and a causal convolution over the last conv_kernel - 1
    inputs of the q, k and v channels; nothing grows with the context."""

    key_heads: int
    key_dim: int
    value_heads: int
    value_dim: int
    conv_kernel: int

    kind = "linear"
    window = 0
    kv_elements = 0

    def kv_elements_per_gpu(self, tp: int) -> int:
        return 0

    def kv_heads_per_gpu(self, tp: int) -> int:
        return 0

    def state_elements_per_gpu(self, tp: int) -> int:
        """Heads split over the GPUs, as vLLM and SGLang split a linear-attention layer."""
        return self.state_elements // tp

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim

    @property
    def state_elements(self) -> int:
        """Recurrent state plus convolution state, per request."""
        return self.value_heads * self.key_dim * self.value_dim + self.conv_channels * (self.conv_kernel - 1)

    def params(self, d_model: int, heads: int) -> int:
        """q, k, v, z and the two gates in, the convolution, out (norms and per-head scalars left out)."""
        inner = self.value_heads * self.value_dim
        return (
            d_model * (2 * self.key_heads * self.key_dim + 2 * inner + 2 * self.value_heads)
            + self.conv_channels * self.conv_kernel
            + inner * d_model
        )

    def attention_flops(self, layers: int, heads: int, tp: int, pairs: float, decode: bool) -> float:
        """No pairs: the state costs about 6 FLOPs per element per token (S k, the rank-one
        update, S q), its value heads split over the GPUs; `pairs` here counts tokens."""
        return 6.0 * layers * (self.value_heads / tp) * self.key_dim * self.value_dim * pairs


LayerType = Union[Attention, LatentAttention, LinearAttention]
