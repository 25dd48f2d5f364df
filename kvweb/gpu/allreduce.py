"""The tensor-parallel group's all-reduces: their time in a step (part of `CostModel`).

Megatron-style tensor parallelism, as vLLM runs it: each layer ends its attention and its MLP with
an all-reduce of the tokens' 16-bit activations (tokens x d_model x 2 B). A ring all-reduce sends
2 (tp - 1) / tp of those bytes from each GPU over one direction of its NVLink, plus a fixed latency
per all-reduce; the all-reduces do not overlap the layer's work, so their time adds to the
roofline's (kvweb/gpu/roofline.py carries it).
"""

from __future__ import annotations

from kvweb.gpu.specs import BYTES_16, GPUSpec, LLMSpec


class AllReduce:
    """A step's all-reduces over the `tp` GPUs; a part of `CostModel` (its fields below)."""

    gpu: GPUSpec
    model: LLMSpec
    tp: int
    interconnect_bandwidth: float | None
    allreduce_latency_s: float

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
