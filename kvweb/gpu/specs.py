"""The paper GPU's hardware and model specs (SPEC section 1): public figures, decimal units.

A GPU is its HBM size, dense peak FLOP/s, HBM bandwidth and host link; a model is its
shape, from which parameter count, weight bytes and KV bytes per token follow.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    name: str
    hbm_bytes: float
    peak_flops: float  # dense bf16 FLOP/s
    hbm_bandwidth: float  # B/s
    link_bandwidth: float  # host link (PCIe class), B/s


@dataclass(frozen=True)
class LLMSpec:
    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int  # SwiGLU: three d_model x d_ff matrices
    vocab: int
    bytes_per_element: int = 2
    tied_embeddings: bool = False

    @property
    def layer_params(self) -> int:
        attention = self.d_model * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attention + 3 * self.d_model * self.d_ff

    @property
    def params(self) -> int:
        embeddings = self.vocab * self.d_model * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_params + embeddings

    @property
    def weight_bytes(self) -> int:
        return self.params * self.bytes_per_element

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x kv_heads x head_dim x bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_element


GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in (
        GPUSpec("A100-40GB", 40e9, 312e12, 1555e9, 25e9),
        GPUSpec("A100-80GB", 80e9, 312e12, 2039e9, 25e9),
        GPUSpec("H100-SXM", 80e9, 989e12, 3350e9, 50e9),
        GPUSpec("H200", 141e9, 989e12, 4800e9, 50e9),
    )
}

MODELS: dict[str, LLMSpec] = {
    m.name: m
    for m in (
        # d_ff 13653 gives a three-matrix MLP OPT-13B's parameter count. The lecture's model has
        # its own LM head (13.10e9 parameters); the real OPT-13B ties it to the embedding (12.84e9).
        LLMSpec("opt-13b-like", 40, 5120, 40, 40, 128, 13653, 50272),
        LLMSpec("opt-13b", 40, 5120, 40, 40, 128, 13653, 50272, tied_embeddings=True),
        LLMSpec("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256),
        LLMSpec("llama-3-70b", 80, 8192, 64, 8, 128, 28672, 128256),
    )
}
