"""A host-memory tier for vLLM V1's prefix cache: KV blocks kept in CPU memory, found by the
same chained block hashes, loaded back over the host link (vLLM's `OffloadingConnector` with its
CPU backend, `vllm/v1/kv_offload/`).

As in vLLM, every block a request fills is stored (write-through: the store runs beside the
model, so it costs the step no time here; its bytes are counted), a block already held is not
stored again, and when the tier is full the least recently used block is dropped
(`LRUOffloadingManager`). A lookup takes the leading run of blocks the tier holds after the
GPU's own hits; a load touches them (most recently used) and is priced on the cost model's host
link exactly as the papers' engine prices a swap (`CostModel.swap_cost`).
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from kvweb.gpu.cost import CostModel


class HostTier:
    """An LRU of block hashes in host memory, `capacity` blocks of `block_size` tokens."""

    def __init__(self, capacity: int, block_size: int, cost: CostModel, record: bool = False) -> None:
        self.capacity = capacity
        self.block_size = block_size
        self.cost = cost
        self.held: OrderedDict[Hashable, None] = OrderedDict()  # least recently used first
        self.stored = self.loaded = self.dropped = 0  # blocks
        self.load_s = 0.0
        self.changes: list[tuple[float, int]] = [(0.0, 0)]  # (time, blocks held) after each change
        self.hits: list[tuple[float, int, int]] = [(0.0, 0, 0)]  # (time, host hit tokens, prompt tokens) so far
        self.log: list[tuple[str, Hashable]] | None = [] if record else None  # ("store" | "drop" | "load", hash)

    def store(self, hashes: Iterable[Hashable], now: float) -> int:
        """Write these full blocks to the host (those not held yet); returns how many were dropped
        to make room."""
        held, log = self.held, self.log
        before, dropped = len(held), self.dropped
        for h in hashes:
            if h in held:
                continue
            if len(held) >= self.capacity:
                old, _ = held.popitem(last=False)
                self.dropped += 1
                if log is not None:
                    log.append(("drop", old))
            held[h] = None
            self.stored += 1
            if log is not None:
                log.append(("store", h))
        if len(held) != before or self.dropped != dropped:
            self.changes.append((now, len(held)))
        return self.dropped - dropped

    def lookup(self, hashes: Iterable[Hashable]) -> int:
        """How many leading hashes the tier holds (`OffloadingManager.lookup`)."""
        n = 0
        for h in hashes:
            if h not in self.held:
                break
            n += 1
        return n

    def load(self, hashes: Sequence[Hashable]) -> float:
        """Bring these held blocks back to the GPU: touch them, return the seconds over the host link."""
        for h in hashes:
            self.held.move_to_end(h)
            if self.log is not None:
                self.log.append(("load", h))
        self.loaded += len(hashes)
        seconds = self.cost.swap_cost(len(hashes) * self.block_size, self.block_size) if hashes else 0.0
        self.load_s += seconds
        return seconds

    def hit(self, now: float, host_tokens: int, prompt_tokens: int) -> None:
        """A first admission: the prompt tokens found in the tier so far, of all prompt tokens so far."""
        self.hits.append((now, host_tokens, prompt_tokens))

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.cost.kv_bytes_per_token

    def figures(self, times: Sequence[float]) -> dict[str, Any]:
        """What the tier did: blocks moved each way, the load seconds, and at each of `times` the
        blocks it held and the share of prompt tokens (first admissions) it served so far."""
        at = np.asarray(times, dtype=float)
        changes, hits = np.array(self.changes), np.array(self.hits)
        held = changes[np.searchsorted(changes[:, 0], at, side="right") - 1, 1]
        so_far = hits[np.searchsorted(hits[:, 0], at, side="right") - 1]
        rate = np.divide(so_far[:, 1], so_far[:, 2], out=np.zeros(len(at)), where=so_far[:, 2] > 0)
        return {"capacity_blocks": self.capacity, "block_bytes": self.block_bytes,
                "stored_bytes": self.stored * self.block_bytes, "loaded_bytes": self.loaded * self.block_bytes,
                "dropped_blocks": self.dropped, "load_s": self.load_s,
                "curves": {"held_blocks": held.astype(int).tolist(), "host_hit_rate": rate.tolist()}}
