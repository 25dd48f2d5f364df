"""A step's FLOPs and HBM bytes on one GPU of the group: prefill and decode (part of `CostModel`).

Each GPU does 1/tp of the linear FLOPs (a token's count only its active experts; logits only where
a token is sampled) and the attention of its heads, and reads its share of the weights once a step
(the experts its tokens route to: kvweb/gpu/weights.py) and of every request's KV. Attention per
layer type (kvweb/gpu/layers.py): full and latent layers read every cached token, a window layer at
most its window, a linear layer its state (read and written). Under data-parallel attention each
GPU reads only its own requests' cache. Priced on the roofline by kvweb/gpu/roofline.py.
"""

from __future__ import annotations

from collections.abc import Callable

from kvweb.gpu.kv_bytes import KV_PRECISIONS, KVBytes
from kvweb.gpu.layers import LayerType
from kvweb.gpu.weights import Weights


class StepCounts(Weights, KVBytes):
    """(FLOPs, bytes) of a prefill or a decode step, one GPU's; a part of `CostModel`."""

    def _linear_flops(self, tokens: float, logits: float) -> float:
        m = self.model
        return (2.0 * (m.active_params - m.embedding_params) * tokens + 2.0 * m.d_model * m.vocab * logits) / self.tp

    def _attention_parts(
        self, layer_pairs: Callable[[LayerType], tuple[float, float]], decode: bool
    ) -> list[tuple[LayerType, float, float]]:
        """(layer type, FLOPs, KV bytes) of one GPU's attention per layer group; `layer_pairs`
        gives a layer type's (query-key pairs, cached tokens or states read)."""
        m, kv, tp = self.model, KV_PRECISIONS[self.kv_precision], self._attention_tp
        share = self.tp if self.attention_dp else 1  # each GPU reads only its own requests' cache
        parts = []
        for a, n in m.groups:
            pairs, read = layer_pairs(a)
            nbytes = n * read * (a.kv_elements_per_gpu(tp) + a.state_elements_per_gpu(tp)) * kv
            flops = a.attention_flops(n, m.heads, self.tp, pairs, decode)
            parts.append((a, flops, nbytes if share == 1 else nbytes / share))
        return parts

    def _attention_counts(
        self, layer_pairs: Callable[[LayerType], tuple[float, float]], decode: bool
    ) -> tuple[float, float]:
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
        return [
            {"kind": a.kind, "layers": n, "attention_flops": f, "kv_bytes_read": b}
            for (a, f, b), (_, n) in zip(
                self._attention_parts(self._decode_pairs(batch, total_context), True), self.model.groups
            )
        ]

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
