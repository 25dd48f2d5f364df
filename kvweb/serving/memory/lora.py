"""LoRA adapters' memory side in vLLM V1 and SGLang: the GPU slots adapters are loaded into, the KV
cache they take, and a cold adapter's load over the host link.

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

SGLang (python/sglang/srt/lora/mem_pool.py `LoRAMemoryPool`) allocates `max_loras_per_batch` slots
of `max_lora_rank` the same way (qkv and gate_up stacked: the same bytes), before the KV pool is
sized (`ModelRunner.initialize`: `maybe_init_lora_manager` before the KV cache). It differs in
three ways (`BatchSlots`): the base model is one of the batch's adapters and holds a slot (its
weights zero: `init_memory_pool` loads it first, `validate_lora_batch` counts it); the slots are
filled per forward batch (`fetch_new_loras` from `ForwardBatch.init_new`), evicting adapters the
batch does not use, least recently used first (`--lora-eviction-policy lru`, the default), the
base model's slot only when no adapter's is free to take; so a prefill batch may evict an adapter
the running requests use, and the next decode batch loads it again. The host copies
(`max_loaded_loras`) are not priced either.
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
ADAPTER_KEY = 1 << 41  # radix_key: an adapter's tokens keyed below -2^41 x (adapter - 1)


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


def radix_key(tokens: np.ndarray, adapter: int) -> np.ndarray:
    """A request's key in SGLang's radix tree: each token paired with the request's adapter
    (`Req.__init__` appends the lora_id to its `extra_key`, and `RadixKey.child_key` pairs the
    extra_key with the tokens), so one adapter's prefix is no hit for another's or the base
    model's; the base model's tokens as they are. The pair is one int64, token - adapter x 2^41:
    negative, and apart for every adapter, for token ids below 2^40 (a vocabulary's). The offset is an
    int64 scalar, so the key is int64 where numpy's default int is 32 bits too (Pyodide's wasm32)."""
    return tokens - np.int64(adapter * ADAPTER_KEY) if adapter else tokens


def lora_refusal(model: LLMSpec, targets: str) -> str | None:
    """Why adapters are not simulated on this model, or None."""
    if model.layer_types:
        return "its layers are not all full attention, and LoRA is simulated on models whose layers are (use 0)"
    if model.experts > 1 and "gate" in TARGETS[targets]:
        return "it is a mixture of experts, and its experts' adapters are not simulated (use lora_targets qkvo)"
    return None


@dataclass(frozen=True)
class LoraConfig:
    """vLLM's (SGLang's) LoRA settings: the adapters a batch may use and the slots' rank and modules."""

    max_loras: int = 1  # distinct adapters in one batch, and GPU slots (vLLM's default; SGLang's max_loras_per_batch)
    rank: int = 16  # max_lora_rank: every slot is this large
    targets: str = "qkvo"

    def slot_bytes(self, cost: CostModel) -> int:
        """One slot's bytes on one GPU."""
        return adapter_bytes(cost.model, self.rank, self.targets, cost.tp)

    def kv_tokens(self, cost: CostModel) -> int:
        """Tokens of KV left beside the weights and the `max_loras` slots."""
        free = cost.kv_bytes_free_per_gpu - self.max_loras * self.slot_bytes(cost)
        return max(0, int(free // cost.kv_bytes_per_token_per_gpu))

    def kv_blocks(self, cost: CostModel, block_size: int) -> int:
        """KV blocks of `block_size` tokens left beside the weights and the `max_loras` slots."""
        return self.kv_tokens(cost) // block_size


class AdapterSlots:
    """The GPU's `max_loras` adapter slots, least recently used first, and the adapters the running
    requests use. vLLM schedules a waiting request only if its adapter is among the running ones or
    the batch has fewer than max_loras (`Scheduler.schedule`), so a running adapter is always in a
    slot, and a new one evicts one no running request uses: the least recently used."""

    def __init__(self, config: LoraConfig, cost: CostModel) -> None:
        self.config = config
        self.slot_bytes = config.slot_bytes(cost)
        self.load_s_each = self.slot_bytes / cost.link
        self.slot_kv_tokens = self.slot_bytes / cost.kv_bytes_per_token_per_gpu  # the KV a slot's bytes would hold
        self.resident: OrderedDict[int, None] = OrderedDict()  # adapters in slots, least recently used first
        self.users: dict[int, int] = {}  # adapter -> running requests using it
        self.slot = [0] * config.max_loras  # the adapter in each slot (0: empty), as vLLM's `lora_index_to_id`
        self.loads = 0
        self.load_s = 0.0
        # (time, adapters in slots, requests skipped, the adapter in each slot)
        self.changes: list[tuple[float, ...]] = [(0.0, 0, 0, *self.slot)]

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
            evicted = next(a for a in self.resident if a not in self.users)
            del self.resident[evicted]
            self.slot[self.slot.index(evicted)] = 0  # (vLLM's `deactivate_adapter` empties its slot)
        self.slot[self.slot.index(0)] = adapter  # the first empty slot (`activate_adapter`)
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
        """After a step's admissions: the adapters in slots, the waiting requests skipped for want
        of a slot in the batch, and which adapter each slot holds."""
        state = (len(self.resident), skipped, *self.held())
        if self.changes[-1][1:] != state:
            self.changes.append((now, *state))

    def held(self) -> list[int]:
        """What each slot holds, as the trace keeps it: an adapter, or 0 (empty)."""
        return self.slot

    def figures(self, kv_blocks: int, times: Sequence[float] = ()) -> dict[str, Any]:
        """The slots' settings, their bytes (and the tokens of KV as many bytes hold), the KV blocks
        left beside them, the loads and their seconds, and at each of `times` the adapters in slots,
        the requests waiting for a slot and what each slot holds (`held`)."""
        changes = np.array(self.changes)
        at = changes[np.searchsorted(changes[:, 0], np.asarray(times, dtype=float), side="right") - 1]
        return {
            "max_loras": self.config.max_loras,
            "rank": self.config.rank,
            "targets": self.config.targets,
            "slot_bytes": self.slot_bytes,
            "slot_kv_tokens": self.slot_kv_tokens,
            "kv_blocks": kv_blocks,
            "loads": self.loads,
            "load_s": self.load_s,
            "in_slots": at[:, 1].astype(int).tolist(),
            "skipped": at[:, 2].astype(int).tolist(),
            "slots": at[:, 3:].astype(int).tolist(),
        }


class BatchSlots(AdapterSlots):
    """SGLang's `max_loras_per_batch` slots (see the module docstring), least recently used first,
    the base model (0) in the first from the start (`base_at`; `slot` shows it as 0, no adapter's
    weights); `users` counts the running and chunked requests of each adapter, the base model's too.
    A waiting request is admitted only if its adapter is among theirs or they have fewer than
    max_loras_per_batch (`Scheduler.can_schedule_lora_req` -> `LoRAManager.validate_lora_batch`);
    adapters are loaded by `fetch`, not on admission."""

    def __init__(self, config: LoraConfig, cost: CostModel) -> None:
        super().__init__(config, cost)
        self.resident[0] = None
        self.base_at: int | None = 0  # the base model's slot (None: evicted)
        self.marked: frozenset[int] = frozenset({0})  # the last batch's adapters (quiet decode batches repeat it)

    def admits(self, adapter: int) -> bool:
        return adapter in self.users or not self.full()

    def full(self) -> bool:
        """Whether the running and chunked requests use max_loras_per_batch adapters: only theirs are admitted."""
        return len(self.users) >= self.config.max_loras

    def join(self, adapter: int) -> float:
        self.users[adapter] = self.users.get(adapter, 0) + 1
        return 0.0

    def leave(self, adapter: int) -> None:
        left = self.users[adapter] - 1
        if left:
            self.users[adapter] = left
        else:
            del self.users[adapter]

    def fetch(self, batch: set[int]) -> float:
        """A forward batch of these adapters runs (`LoRAManager.fetch_new_loras`,
        `LoRAMemoryPool.prepare_lora_batch`): each not in a slot takes the first empty one, else the
        least recently used adapter's the batch does not use, else the base model's; then the
        batch's are the most recently used (in the adapters' order: SGLang sorts their ids). Returns
        the seconds the batch waits for the loads (the base model's zeros cost nothing)."""
        waited = 0.0
        for adapter in sorted(batch):
            if adapter not in self.resident:
                self._place(adapter, batch)
                if adapter:
                    self.loads += 1
                    self.load_s += self.load_s_each
                    waited += self.load_s_each
        for adapter in sorted(batch):
            if adapter:
                self.resident.move_to_end(adapter)
        self.marked = frozenset(batch)
        return waited

    def _place(self, adapter: int, batch: set[int]) -> None:
        """`get_available_buffer_slot`: a slot for `adapter`, evicting one the batch does not use."""
        empty = [i for i, a in enumerate(self.slot) if not a and i != self.base_at]
        if empty:
            at = empty[0]
        else:
            free = [a for a in self.resident if a not in batch]
            victim = next((a for a in free if a), 0)
            del self.resident[victim]
            at = self.slot.index(victim) if victim else self.base_at
            self.base_at = None if at == self.base_at else self.base_at
        self.resident[adapter] = None
        self.slot[at] = adapter
        if not adapter:
            self.base_at = at

    def held(self) -> list[int]:
        """What each slot holds: an adapter, the base model (-1: its zeros) or 0 (empty)."""
        return [-1 if i == self.base_at else a for i, a in enumerate(self.slot)]

    def ready(self) -> bool:
        """Whether a decode batch of the running requests would load nothing and change no order:
        it was the last batch (so its adapters are in slots and the most recent)."""
        return self.marked == self.users.keys()

    def figures(self, kv_tokens: int, times: Sequence[float] = ()) -> dict[str, Any]:
        """AdapterSlots' figures, the KV left beside the slots in SGLang's token slots."""
        out = super().figures(0, times)
        del out["kv_blocks"]
        return {**out, "kv_tokens": kv_tokens}
