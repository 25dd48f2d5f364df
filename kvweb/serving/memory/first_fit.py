"""First-fit placement in a contiguous token arena: a range takes the lowest hole that fits, so
holes appear between ranges as requests leave (external fragmentation)."""

from __future__ import annotations

from bisect import bisect_right

from kvweb.serving.memory.arena import ContiguousArena


class FirstFit(ContiguousArena):
    """Free holes kept sorted by start; a request takes the lowest hole that fits."""

    kind = "first-fit"

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self._starts = [0]  # hole starts, sorted
        self._lengths = [size]  # hole lengths, same order
        self._taken: dict[int, int] = {}  # start -> length of each allocated range

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

    def ranges(self) -> list[tuple[int, int]]:
        return sorted(self._taken.items())
