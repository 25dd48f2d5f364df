"""Contiguous allocators over a token arena: first-fit and buddy (and `ALLOCATORS`, with the
ideal arena of `ideal_arena.py`).

A reserved ("Orca") memory manager needs one contiguous range per request, so holes appear
between ranges as requests leave: external fragmentation. Every allocator places a range and
returns a handle (here its start), frees it by that handle, and reports its ranges and holes.
"""
from __future__ import annotations

from bisect import bisect_right, insort

from kvweb.serving.ideal_arena import Ideal


class FirstFit:
    """Free holes kept sorted by start; a request takes the lowest hole that fits."""

    kind = "first-fit"

    def __init__(self, size: int) -> None:
        self.size = size
        self._starts = [0]  # hole starts, sorted
        self._lengths = [size]  # hole lengths, same order
        self._taken: dict[int, int] = {}  # start -> length of each allocated range
        self.used = 0

    def span(self, n: int) -> int:
        """Tokens actually taken for a request of n (first-fit takes exactly n)."""
        return n

    @property
    def largest_possible(self) -> int:
        """The largest request an empty arena can hold."""
        return self.size

    def allocate(self, n: int) -> int | None:
        """Start of a range of n tokens, or None if no hole is long enough."""
        for i, length in enumerate(self._lengths):
            if length >= n:
                start = self._starts[i]
                if length == n:
                    del self._starts[i], self._lengths[i]
                else:
                    self._starts[i] += n
                    self._lengths[i] -= n
                self._taken[start] = n
                self.used += n
                return start
        return None

    def free(self, start: int) -> None:
        """Give a range back and merge it with the holes on either side."""
        n = self._taken.pop(start)
        self.used -= n
        i = bisect_right(self._starts, start)
        starts, lengths = self._starts, self._lengths
        if i < len(starts) and start + n == starts[i]:  # merge with the hole after
            n += lengths[i]
            del starts[i], lengths[i]
        if i > 0 and starts[i - 1] + lengths[i - 1] == start:  # merge with the hole before
            lengths[i - 1] += n
        else:
            starts.insert(i, start)
            lengths.insert(i, n)

    def holes(self) -> list[tuple[int, int]]:
        """(start, length) of every free range, by address."""
        return list(zip(self._starts, self._lengths))

    @property
    def free_total(self) -> int:
        return self.size - self.used

    def ranges(self) -> list[tuple[int, int]]:
        """(start, length) of every allocated range, by address."""
        return sorted(self._taken.items())

    def placed(self) -> list[tuple[int, int, int]]:
        """(handle, start, length) of every range, by address: a range never moves, its start is its handle."""
        return [(s, s, n) for s, n in self.ranges()]


class Buddy:
    """Power-of-two blocks split in halves on demand and merged with their buddy on free.

    An arena that is not a power of two is cut into aligned power-of-two top blocks
    (12597 = 8192 + 4096 + 256 + ...); buddies never merge across top blocks.
    """

    kind = "buddy"

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: dict[int, list[int]] = {}  # order -> sorted starts of free blocks
        self._top: list[tuple[int, int]] = []  # (start, order) of each top block
        start = 0
        for order in range(size.bit_length() - 1, -1, -1):
            if size & (1 << order):
                self._top.append((start, order))
                self._free.setdefault(order, []).append(start)
                start += 1 << order
        self._taken: dict[int, int] = {}  # start -> order
        self.used = 0

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

    @property
    def free_total(self) -> int:
        return self.size - self.used

    def ranges(self) -> list[tuple[int, int]]:
        return sorted((s, 1 << o) for s, o in self._taken.items())

    def placed(self) -> list[tuple[int, int, int]]:
        """(handle, start, length) of every range, by address: a range never moves, its start is its handle."""
        return [(s, s, n) for s, n in self.ranges()]


Arena = FirstFit | Buddy | Ideal
# ideal: no external fragmentation (the lecture's Orca baselines); first-fit: the lowest hole that fits;
# buddy: power-of-two blocks (the vLLM paper's reservation baselines).
ALLOCATORS: dict[str, type[Arena]] = {"ideal": Ideal, "first-fit": FirstFit, "buddy": Buddy}
