"""What a model's weights take: in each GPU's memory, and read by a step (part of `CostModel`).

Precision: weights 16-bit, FP8 (per-tensor scales, or fp8-block: a scale per 128 x 128 block), INT8
or INT4 (2, 1, 1, 1, 0.5 bytes per parameter; scales left out; the embedding and LM head stay 16-bit,
as quantized checkpoints keep them), or MXFP4 (routed experts at 4.25 bits, everything else 16-bit,
as gpt-oss ships; `CostModel` refuses it for a model without experts).

Tensor parallelism (Megatron-style, as vLLM runs it): every weight matrix, the embedding and the
LM head are split evenly over the `tp` GPUs; under `attention_dp` (SGLang's data-parallel
attention) every GPU holds the attention's weights whole.

A mixture of experts holds every expert's weights in memory; a step reads the experts its tokens
route to (the expected number of distinct ones, E (1 - (1 - k/E)^tokens)).
"""

from __future__ import annotations

from functools import cached_property

from kvweb.gpu.specs import BYTES_16, LLMSpec

# bytes per parameter; fp8-block: FP8 with a scale per 128 x 128 block (DeepSeek's, Qwen3's FP8 checkpoints; the
# scales left out); mxfp4: the routed experts in OCP MXFP4 (EXPERT_BYTES), the rest 16-bit, as gpt-oss ships
WEIGHT_PRECISIONS = {"16-bit": 2, "fp8": 1, "fp8-block": 1, "int8": 1, "int4": 0.5, "mxfp4": 2}
EXPERT_BYTES = {"mxfp4": (4 * 32 + 8) / 8 / 32}  # 4-bit values and one 8-bit scale per 32: 4.25 bits
FP8_WEIGHTS = ("fp8", "fp8-block")  # run on the GPU's FP8 tensor cores where it has them


class PrecisionError(ValueError):
    """A weight precision the model cannot take (`precision_refusal`): the user's choice, not a bug."""


def precision_refusal(model: LLMSpec, weight_precision: str) -> str | None:
    """Why `model` cannot take `weight_precision` (MXFP4 without routed experts), or None."""
    if weight_precision in EXPERT_BYTES and model.experts == 1:
        return (
            f"weight_precision {weight_precision} quantizes routed experts only (as gpt-oss ships); "
            f"{model.name} has none: use 16-bit, fp8, fp8-block, int8 or int4"
        )
    return None


class Weights:
    """The weights' bytes, in memory and per step; a part of `CostModel` (its fields below)."""

    model: LLMSpec
    tp: int
    weight_precision: str
    attention_dp: bool

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
