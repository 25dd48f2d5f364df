"""A host-memory tier for the prefix cache: KV kept in CPU memory after it was computed, found
again by the same keys as the GPU's cache, loaded back over the host link before a request runs.

Both engines write through by default, so both tiers here hold a copy of everything the GPU
caches; the store runs beside the model (it costs no step time here; its bytes are counted), and
a load is priced on the cost model's host link exactly as the papers' engine prices a swap
(`CostModel.swap_cost`).

- `HostTier`, vLLM V1's `OffloadingConnector` with its CPU backend (`vllm/v1/kv_offload/`): an
  LRU of block hashes. Every block a request fills is stored, a block already held is not stored
  again, the least recently used block is dropped when a store needs room (`LRUOffloadingManager`);
  a lookup takes the leading run of blocks held after the GPU's own hits; a load touches them.
- `HostTree`, SGLang's HiCache (`hiradix_cache.py`, write_through): a radix tree of host token
  slots beside the GPU's. Every prefix the GPU tree takes in is written to it, least recently used
  leaves evicted for room; a match runs on past the GPU's, and at least `LOAD_BACK_THRESHOLD`
  tokens more are loaded back (one transfer: SGLang's kernel copies a load's pages at once).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from kvweb.gpu.cost import CostModel

LOAD_BACK_THRESHOLD = 10  # SGLang's load_back_threshold: shorter host hits are computed again


class HostRecord:
    """What a host tier of `capacity` tokens did, in tokens: stored, loaded, dropped, the load
    seconds, and over time the tokens it held and the prompt tokens it served."""

    def __init__(self, capacity: int, cost: CostModel) -> None:
        self.capacity = capacity
        self.cost = cost
        self.stored = self.loaded = self.dropped = 0  # tokens
        self.load_s = 0.0
        self.changes: list[tuple[float, int]] = [(0.0, 0)]  # (time, tokens held) after each change
        self.hits: list[tuple[float, int, int]] = [(0.0, 0, 0)]  # (time, host hit tokens, prompt tokens) so far

    def hit(self, now: float, host_tokens: int, prompt_tokens: int) -> None:
        """A first admission: the prompt tokens found in the tier so far, of all prompt tokens so far."""
        self.hits.append((now, host_tokens, prompt_tokens))

    def _priced(self, tokens: int, block_size: int) -> float:
        """A load of `tokens` over the host link in copies of `block_size` tokens: its seconds."""
        seconds = self.cost.swap_cost(tokens, block_size) if tokens else 0.0
        self.loaded += tokens
        self.load_s += seconds
        return seconds

    def figures(self, times: Sequence[float]) -> dict[str, Any]:
        """What the tier did: bytes moved each way, the load seconds, and at each of `times` the
        tokens it held and the share of prompt tokens (first admissions) it served so far."""
        at = np.asarray(times, dtype=float)
        changes, hits = np.array(self.changes), np.array(self.hits)
        held = changes[np.searchsorted(changes[:, 0], at, side="right") - 1, 1]
        so_far = hits[np.searchsorted(hits[:, 0], at, side="right") - 1]
        rate = np.divide(so_far[:, 1], so_far[:, 2], out=np.zeros(len(at)), where=so_far[:, 2] > 0)
        per_token = self.cost.kv_bytes_per_token
        return {
            "capacity_tokens": self.capacity,
            "kv_bytes_per_token": per_token,
            "stored_bytes": self.stored * per_token,
            "loaded_bytes": self.loaded * per_token,
            "dropped_tokens": self.dropped,
            "load_s": self.load_s,
            "curves": {"held_tokens": held.astype(int).tolist(), "host_hit_rate": rate.tolist()},
        }


class HostTier(HostRecord):
    """vLLM V1's: an LRU of block hashes in host memory, `blocks` blocks of `block_size` tokens."""

    def __init__(self, blocks: int, block_size: int, cost: CostModel, record: bool = False) -> None:
        super().__init__(blocks * block_size, cost)
        self.blocks = blocks
        self.block_size = block_size
        self.held: OrderedDict[Hashable, None] = OrderedDict()  # least recently used first
        self.log: list[tuple[str, Hashable]] | None = [] if record else None  # ("store" | "drop" | "load", hash)

    def store(self, hashes: Iterable[Hashable], now: float) -> int:
        """Write these full blocks to the host (those not held yet); returns how many were dropped
        to make room."""
        held, log, bs = self.held, self.log, self.block_size
        before, dropped = len(held), self.dropped
        for h in hashes:
            if h in held:
                continue
            if len(held) >= self.blocks:
                old, _ = held.popitem(last=False)
                self.dropped += bs
                if log is not None:
                    log.append(("drop", old))
            held[h] = None
            self.stored += bs
            if log is not None:
                log.append(("store", h))
        if len(held) != before or self.dropped != dropped:
            self.changes.append((now, len(held) * bs))
        return (self.dropped - dropped) // bs

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
        return self._priced(len(hashes) * self.block_size, self.block_size)


class Tree(Protocol):
    """What the host tree needs of a radix cache (kvweb.prefix.radix_cache.RadixCache)."""

    evictable_size: int
    protected_size: int

    def match_prefix(self, tokens: np.ndarray) -> Any: ...
    def insert(self, tokens: np.ndarray, slots: np.ndarray) -> int: ...
    def lock(self, node: Any) -> None: ...
    def unlock(self, node: Any) -> None: ...
    def evict(self, n_tokens: int) -> int: ...
    def alloc(self, n_tokens: int) -> np.ndarray | None: ...


class HostTree(HostRecord):
    """SGLang's: a radix tree of host token slots (`capacity` tokens), least recently used leaves
    evicted for room."""

    def __init__(self, tree: Tree, capacity: int, cost: CostModel) -> None:
        super().__init__(capacity, cost)
        self.tree = tree

    @property
    def held(self) -> int:
        return self.tree.evictable_size + self.tree.protected_size

    def store(self, tokens: np.ndarray, now: float) -> None:
        """Write the tokens' KV to the host (what it does not hold yet), if they fit at all."""
        tree = self.tree
        match = tree.match_prefix(tokens)
        new = len(tokens) - match.length
        if new <= 0 or len(tokens) > self.capacity:
            return
        before = self.held
        tree.lock(match.node)  # room is made from other leaves
        fresh = tree.alloc(new)
        tree.unlock(match.node)
        if fresh is None:
            return
        tree.insert(tokens, np.concatenate([match.slots, fresh]))
        self.stored += new
        self.dropped += before + new - self.held
        self.changes.append((now, self.held))

    def lookup(self, tokens: np.ndarray) -> int:
        """How many leading tokens the host holds."""
        return self.tree.match_prefix(tokens).length

    def load(self, tokens: int) -> float:
        """Bring `tokens` back to the GPU in one transfer: the seconds over the host link."""
        return self._priced(tokens, tokens)
