"""LoRA adapters' memory side in vLLM V1: the GPU slots adapters are loaded into, the KV cache they
take, and a cold adapter's load over the host link.

An adapter adds to each target module W (in x out) two matrices of `rank`: A (rank x in) and
B (out x rank), in every layer, in the model's dtype (vLLM's `lora_dtype` "auto": bf16 here).
vLLM allocates `max_loras` slots of `max_lora_rank` for every target module when it loads the model
(vllm/lora/layers: `create_lora_weights` stacks `lora_a_stacked` (max_loras, 1, rank, in) and
`lora_b_stacked` (max_loras, 1, out, rank)), before the KV cache is sized, so the slots are what
the KV cache loses whether adapters run or not. Under tensor parallelism a column-parallel module
(q, k, v, gate, up) keeps A whole and 1/tp of B's rows, a row-parallel one (o, down) 1/tp of A's
columns and B whole (`ColumnParallelLinearWithLoRA`, `RowParallelLinearWithLoRA`; not fully
sharded LoRAs).

The slots hold the adapters least recently used last (`LRUCacheLoRAModelManager`): a step whose
batch needs an adapter not in them copies it from host memory into the slot of the least recently
used one (`activate_adapter`), and the step waits for it (bytes / host link). The host copy
(`max_cpu_loras` adapters, loaded from disk before) is not priced.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.gpu.specs import LLMSpec

LORA_BYTES = 2  # bf16: vLLM's lora_dtype "auto" is the model's dtype
LORA_RANKS = (8, 16, 32, 64, 128, 256)  # vLLM's max_lora_rank choices (1 and larger ones left out)
# the modules an adapter targets: attention's projections, or every linear layer of a dense model
TARGETS = {"qkvo": ("q", "k", "v", "o"), "all-linear": ("q", "k", "v", "o", "gate", "up", "down")}
ROW_PARALLEL = ("o", "down")  # the modules whose input is split over the tp GPUs


def module_shapes(model: LLMSpec) -> dict[str, tuple[int, int]]:
    """Each target module's (in, out) features."""
    d, q, kv = model.d_model, model.heads * model.head_dim, model.kv_heads * model.head_dim
    return {
        "q": (d, q),
        "k": (d, kv),
        "v": (d, kv),
        "o": (q, d),
        "gate": (d, model.d_ff),
        "up": (d, model.d_ff),
        "down": (model.d_ff, d),
    }


def adapter_params(model: LLMSpec, rank: int, targets: str, tp: int = 1) -> int:
    """One adapter's parameters on one GPU of `tp`: rank x (in + out) per target module and layer,
    the split side divided by tp."""
    shapes = module_shapes(model)
    per_layer = 0
    for name in TARGETS[targets]:
        n_in, n_out = shapes[name]
        per_layer += rank * (n_in // tp + n_out if name in ROW_PARALLEL else n_in + n_out // tp)
    return per_layer * model.layers


def adapter_bytes(model: LLMSpec, rank: int, targets: str, tp: int = 1) -> int:
    """One adapter slot's bytes on one GPU."""
    return adapter_params(model, rank, targets, tp) * LORA_BYTES


def hash_root(adapter: int) -> Hashable:
    """The root of a request's chained block hashes: its adapter's (vLLM puts the LoRA's name in every
    block's extra keys, `_gen_lora_extra_hash_keys`), so one adapter's prefix is no hit for another;
    the base model's 0."""
    return ("lora", adapter) if adapter else 0


def lora_refusal(model: LLMSpec, targets: str) -> str | None:
    """Why adapters are not simulated on this model, or None."""
    if model.layer_types:
        return "its layers are not all full attention, and LoRA is simulated on models whose layers are (use 0)"
    if model.experts > 1 and "gate" in TARGETS[targets]:
        return "it is a mixture of experts, and its experts' adapters are not simulated (use lora_targets qkvo)"
    return None


@dataclass(frozen=True)
class LoraConfig:
    """vLLM's LoRA settings: the adapters a batch may use and the slots' rank and modules."""

    max_loras: int = 1  # vLLM's default: distinct adapters in one batch, and GPU slots
    rank: int = 16  # max_lora_rank: every slot is this large
    targets: str = "qkvo"

    def slot_bytes(self, cost: CostModel) -> int:
        """One slot's bytes on one GPU."""
        return adapter_bytes(cost.model, self.rank, self.targets, cost.tp)

    def kv_blocks(self, cost: CostModel, block_size: int) -> int:
        """KV blocks of `block_size` tokens left beside the weights and the `max_loras` slots."""
        free = cost.kv_bytes_free_per_gpu - self.max_loras * self.slot_bytes(cost)
        return max(0, int(free // cost.kv_bytes_per_token_per_gpu)) // block_size


class AdapterSlots:
    """The GPU's `max_loras` adapter slots, least recently used first, and the adapters the running
    requests use. vLLM schedules a waiting request only if its adapter is among the running ones or
    the batch has fewer than max_loras (`Scheduler.schedule`), so a running adapter is always in a
    slot, and a new one evicts one no running request uses: the least recently used."""

    def __init__(self, config: LoraConfig, cost: CostModel) -> None:
        self.config = config
        self.slot_bytes = config.slot_bytes(cost)
        self.load_s_each = self.slot_bytes / cost.link
        self.resident: OrderedDict[int, None] = OrderedDict()  # adapters in slots, least recently used first
        self.users: dict[int, int] = {}  # adapter -> running requests using it
        self.loads = 0
        self.load_s = 0.0
        self.changes: list[tuple[float, int, int]] = [(0.0, 0, 0)]  # (time, adapters in slots, requests skipped)

    def admits(self, adapter: int) -> bool:
        """Whether a waiting request of `adapter` may join the batch (0: the base model, always)."""
        return not adapter or adapter in self.users or len(self.users) < self.config.max_loras

    def join(self, adapter: int) -> float:
        """A request of `adapter` starts running; the seconds its step waits for the adapter's load."""
        if not adapter:
            return 0.0
        self.users[adapter] = self.users.get(adapter, 0) + 1
        if adapter in self.resident:
            return 0.0
        if len(self.resident) == self.config.max_loras:  # a slot no running request uses, least recent first
            del self.resident[next(a for a in self.resident if a not in self.users)]
        self.resident[adapter] = None
        self.loads += 1
        self.load_s += self.load_s_each
        return self.load_s_each

    def leave(self, adapter: int) -> None:
        """A request of `adapter` stops running (finished or preempted); the last one's leaving is
        the adapter's last use."""
        if not adapter:
            return
        left = self.users[adapter] - 1
        if left:
            self.users[adapter] = left
        else:
            del self.users[adapter]
            self.resident.move_to_end(adapter)

    def note(self, now: float, skipped: int) -> None:
        """After a step's admissions: the adapters in slots and the waiting requests skipped for want
        of a slot in the batch."""
        if self.changes[-1][1:] != (len(self.resident), skipped):
            self.changes.append((now, len(self.resident), skipped))

    def figures(self, kv_blocks: int, times: Sequence[float] = ()) -> dict[str, Any]:
        """The slots' settings and bytes, the KV blocks left beside them, the loads and their seconds,
        and at each of `times` the adapters in slots and the requests waiting for a slot."""
        changes = np.array(self.changes)
        at = changes[np.searchsorted(changes[:, 0], np.asarray(times, dtype=float), side="right") - 1]
        return {
            "max_loras": self.config.max_loras,
            "rank": self.config.rank,
            "targets": self.config.targets,
            "slot_bytes": self.slot_bytes,
            "kv_blocks": kv_blocks,
            "loads": self.loads,
            "load_s": self.load_s,
            "in_slots": at[:, 1].astype(int).tolist(),
            "skipped": at[:, 2].astype(int).tolist(),
        }
