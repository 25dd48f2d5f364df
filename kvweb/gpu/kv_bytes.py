"""What the KV cache takes, per token and per request, on one GPU and over the group (part of `CostModel`).

Layer types (kvweb/gpu/layers.py): full and latent layers grow with every token (the "growing
part", `kv_bytes_per_token*`), window layers keep their last tokens, linear layers a fixed state;
`kv_bytes_per_sequence*` count them all for a request of a given length. KV 16-bit or FP8 (2 or 1
bytes per element); a linear layer's state stays 16-bit (vLLM's default; SGLang keeps float32: its
pools, kvweb/prefix/sglang_pools.py).

Tensor parallelism: KV heads are split over the `tp` GPUs; when there are fewer than `tp` of them
each GPU keeps ceil(kv_heads / tp) of them (replicas: 4 KV heads on 8 GPUs are each held twice).
Every GPU holds its share of every token's KV. A latent cache is not split by heads (every GPU
holds it whole), unless `attention_dp` (SGLang's data-parallel attention): then each GPU holds its
own requests' cache whole.
"""

from __future__ import annotations

from functools import cached_property

from kvweb.gpu.layers import kept_tokens
from kvweb.gpu.specs import LLMSpec

KV_PRECISIONS = {"16-bit": 2, "fp8": 1}  # bytes per K or V element
STATE_BYTES = 2  # a linear layer's state element: 16-bit, whatever the KV precision (vLLM's default)


class KVBytes:
    """Bytes of KV per token, per layer and per request; a part of `CostModel` (its fields below)."""

    model: LLMSpec
    tp: int
    kv_precision: str
    attention_dp: bool

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
        return (
            sum(n * a.kv_elements_per_gpu(tp) for a, n in self.model.groups if not a.window)
            * KV_PRECISIONS[self.kv_precision]
        )

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
        layers every token, window layers the window, in whole blocks, at the KV precision; linear
        layers their state, at 16 bits whatever the KV precision (vLLM's `mamba_cache_dtype` auto
        keeps the model's dtype; an FP8 KV cache does not shrink it)."""
        tp, kv = self._attention_tp, KV_PRECISIONS[self.kv_precision]
        return [
            kept_tokens(context, a.window, block_size) * a.kv_elements_per_gpu(tp) * kv
            + a.state_elements_per_gpu(tp) * STATE_BYTES
            for a in self.model.attention
        ]

    def kv_bytes_per_sequence_per_gpu(self, context: int, block_size: int) -> int:
        return sum(self.kv_bytes_per_layer(context, block_size))

    def kv_bytes_per_sequence(self, context: int, block_size: int) -> int:
        """One request of `context` tokens over the whole group."""
        return self.kv_bytes_per_sequence_per_gpu(context, block_size) * self._copies
