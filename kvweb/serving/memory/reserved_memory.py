"""Reserved KV memory (Orca): one contiguous range per request, reserved at admission.

The reservation is fixed for the request's whole life, so a running request never needs more
memory and never causes a preemption; the price is the reserved-but-unused tail and the holes
the contiguous allocator leaves between ranges.
- max: the model's maximum length, whatever the request needs;
- pow2: the next power of two of the real need (at most twice it);
- oracle: exactly the final length (an unrealisable upper bound: nobody knows it in advance).
"""

from __future__ import annotations

from kvweb.serving.memory.arena import ContiguousArena
from kvweb.serving.loop.engine_trace import cell_group, ranges_to_cells
from kvweb.serving.loop.sequence import Sequence

POLICIES = ("max", "pow2", "oracle")


def reservation(policy: str, final_kv: int, max_len: int) -> int:
    """Tokens reserved at admission for a request whose KV ends at final_kv tokens."""
    if policy == "max":
        return max_len
    if policy == "pow2":
        return min(1 << (final_kv - 1).bit_length(), max_len)
    return final_kv


class ReservedMemory:
    def __init__(self, policy: str, allocator: ContiguousArena, max_len: int) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}")
        self.kind = policy
        self.allocator = allocator
        self.max_len = max_len
        self.capacity = allocator.size
        self.holders: dict[int, Sequence] = {}

    @property
    def occupied(self) -> int:
        return self.allocator.used

    def reservation(self, final_kv: int) -> int:
        return reservation(self.kind, final_kv, self.max_len)

    def never_fits(self, final_kv: int) -> str | None:
        size = self.allocator.span(self.reservation(final_kv))
        if size > self.allocator.largest_possible:
            return f"needs a contiguous range of {size} tokens; the largest the GPU can give is {self.allocator.largest_possible}"
        return None

    def admit(self, seq: Sequence, tokens: int, step: int) -> bool:
        start = self.allocator.allocate(self.reservation(seq.final_kv))
        if start is None:
            return False
        seq.start = start  # the allocator's handle: the range's start, except in the ideal arena, where ranges move
        self.holders[seq.id] = seq
        return True

    def shortfall(self, step: int) -> int:
        """A reservation already covers all growth: never short."""
        return 0

    def grow(self, step: int) -> None:
        """Growth writes into the reservation; nothing to allocate."""

    def occupancy(self, step: int, count: int) -> list[int]:
        """Growth never changes a reservation: the same every step."""
        return [self.occupied] * count

    def grow_through(self, step: int, n: int) -> None:
        """Nothing to allocate."""

    def free(self, seq: Sequence) -> None:
        self.allocator.free(seq.start)
        del self.holders[seq.id]

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        """Cells of the arena: tokens per cell, owner ids (-1 free), written percentages."""
        where = self._where()
        ranges = [(*where[s.start], s.kv(step), s.id) for s in self.holders.values()]
        return ranges_to_cells(self.capacity, ranges, max_cells)

    def _where(self) -> dict[int, tuple[int, int]]:
        """handle -> (start, length) of every reserved range."""
        return {h: (start, n) for h, start, n in self.allocator.placed()}

    def held_cells(self, seq: Sequence, max_cells: int) -> list[int]:
        """The memory-map cells seq's reserved range reaches into."""
        if seq.id not in self.holders:
            return []
        per_cell = cell_group(self.capacity, max_cells)
        start, n = self._where()[seq.start]
        return list(range(start // per_cell, -(-(start + n) // per_cell)))
