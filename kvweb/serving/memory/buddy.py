"""Buddy placement in a contiguous token arena (the vLLM paper's reservation baselines): power-of-two
blocks split in halves on demand and merged back with their buddy."""

from __future__ import annotations

from bisect import bisect_right, insort

from kvweb.serving.memory.arena import ContiguousArena


class Buddy(ContiguousArena):
    """Power-of-two blocks split in halves on demand and merged with their buddy on free.

    An arena that is not a power of two is cut into aligned power-of-two top blocks
    (12597 = 8192 + 4096 + 256 + ...); buddies never merge across top blocks.
    """

    kind = "buddy"

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self._free: dict[int, list[int]] = {}  # order -> sorted starts of free blocks
        self._top: list[tuple[int, int]] = []  # (start, order) of each top block
        start = 0
        for order in range(size.bit_length() - 1, -1, -1):
            if size & (1 << order):
                self._top.append((start, order))
                self._free.setdefault(order, []).append(start)
                start += 1 << order
        self._taken: dict[int, int] = {}  # start -> order

    @staticmethod
    def _order(n: int) -> int:
        return max(0, (n - 1).bit_length())

    def span(self, n: int) -> int:
        """Tokens actually taken for a request of n: the next power of two."""
        return 1 << self._order(n)

    @property
    def largest_possible(self) -> int:
        return 1 << self._top[0][1] if self._top else 0

    def allocate(self, n: int) -> int | None:
        """Lowest free block of the smallest order that fits, split down to size."""
        want = self._order(n)
        have = next((o for o in sorted(self._free) if o >= want and self._free[o]), None)
        if have is None:
            return None
        start = self._free[have].pop(0)
        while have > want:  # keep the lower half, free the upper one
            have -= 1
            insort(self._free.setdefault(have, []), start + (1 << have))
        self._taken[start] = want
        self.used += 1 << want
        return start

    def _top_order(self, start: int) -> int:
        starts = [s for s, _ in self._top]
        return self._top[bisect_right(starts, start) - 1][1]

    def free(self, start: int) -> None:
        order = self._taken.pop(start)
        self.used -= 1 << order
        top = self._top_order(start)
        while order < top:
            buddy = start ^ (1 << order)
            free_list = self._free.get(order, [])
            i = bisect_right(free_list, buddy) - 1
            if i < 0 or free_list[i] != buddy:
                break
            del free_list[i]
            start = min(start, buddy)
            order += 1
        insort(self._free.setdefault(order, []), start)

    def holes(self) -> list[tuple[int, int]]:
        """Free blocks, adjacent ones joined into one hole, by address."""
        blocks = sorted((s, 1 << o) for o, starts in self._free.items() for s in starts)
        joined: list[tuple[int, int]] = []
        for start, length in blocks:
            if joined and joined[-1][0] + joined[-1][1] == start:
                joined[-1] = (joined[-1][0], joined[-1][1] + length)
            else:
                joined.append((start, length))
        return joined

    def ranges(self) -> list[tuple[int, int]]:
        return sorted((s, 1 << o) for s, o in self._taken.items())
