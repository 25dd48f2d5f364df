"""A step's time on the roofline (SPEC section 1), one GPU's share of the group (part of `CostModel`).

A step costs max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency))
+ its all-reduces + a fixed per-step overhead, so a short prefill can never be cheaper than one
read of the weights. FP8 weights run on the GPU's FP8 tensor cores where it has them (H100, H200:
W8A8); otherwise, and for INT8 and INT4, the weights are dequantized and multiplied at 16 bits
(weight-only quantization: fewer bytes, the 16-bit peak). One peak prices all of a step's FLOPs,
attention included.

The schedulers sum a step's work over its requests and price it once: `prefill_work` and
`decode_work` carry the all-reduces' byte time inside the (FLOPs, bytes) pair (`_with_allreduce`),
`step_time` adds their latencies and the overhead once a step. kvweb/gpu/measured_cost.py gives the
same interface other meanings.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from kvweb.gpu.allreduce import AllReduce
from kvweb.gpu.counts import StepCounts
from kvweb.gpu.specs import GPUSpec
from kvweb.gpu.weights import FP8_WEIGHTS

PREFILL_PRICES_KEPT = 8192  # (n_tokens, cached) pairs a cost model remembers (about 2 MB at most)


class Roofline(StepCounts, AllReduce):
    """Seconds of a step from its (FLOPs, bytes); a part of `CostModel` (its fields below)."""

    gpu: GPUSpec
    compute_eff: float
    memory_eff: float
    step_overhead_s: float

    @property
    def ttft_outside_s(self) -> float:
        """A first token's time outside the engine's steps (HTTP, tokenizer): none on the roofline,
        which prices the engine alone (the measured model adds its fitted one)."""
        return 0.0

    @property
    def peak_flops(self) -> float:
        """FP8 weights on FP8 tensor cores, every other case at the 16-bit peak."""
        fp8 = self.gpu.fp8_flops if self.weight_precision in FP8_WEIGHTS else None
        return fp8 or self.gpu.peak_flops

    @cached_property
    def _step_constants(self) -> tuple[float, float, float, float]:
        """What `step_time` needs, computed once: the engines price every step with it."""
        return (
            self.peak_flops * self.compute_eff,
            self.gpu.hbm_bandwidth * self.memory_eff,
            self.allreduces_per_step * self.allreduce_latency_s,
            self.step_overhead_s,
        )

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

    def _with_allreduce(self, flops: float, bytes_moved: float, tokens: float) -> tuple[float, float]:
        """Work with the all-reduces' byte time t added to both sides as its equivalent
        (t x attainable FLOP/s, t x attainable B/s): max(C + t, M + t) = max(C, M) + t, and it
        stays exact for any sum of works, which is how a simulator prices a whole batch."""
        t = self.allreduce_bytes_time(tokens)
        return (
            flops + t * self.peak_flops * self.compute_eff,
            bytes_moved + t * self.gpu.hbm_bandwidth * self.memory_eff,
        )

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

    def prefill_cost(self, n_tokens: int, cached: int = 0) -> float:
        return self.step_time(*self.prefill_work(n_tokens, cached))

    def decode_step_cost(self, batch: int, total_context: int) -> float:
        return self.step_time(*self.decode_work(batch, total_context))

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
