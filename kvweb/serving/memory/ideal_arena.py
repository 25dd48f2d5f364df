"""The ideal arena: reservations without external fragmentation (the lecture's simulator).

A request is admitted whenever the reserved tokens, its own included, add up to at most the
arena: as if the arena were compacted after every free, so no hole is ever left between
ranges. That is the bound the lecture's Orca baselines assume; first-fit and buddy
(`first_fit.py`, `buddy.py`) show what placing real contiguous ranges costs on top of it.
"""

from __future__ import annotations

from kvweb.serving.memory.arena import ContiguousArena


class Ideal(ContiguousArena):
    """Ranges packed from address 0 in the order they were admitted; a free slides every later
    range down. `allocate` returns a handle (ranges move, so a start cannot name one)."""

    kind = "ideal"

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self._taken: dict[int, int] = {}  # handle -> length, in admission order (= address order)
        self._next = 0

    def allocate(self, n: int) -> int | None:
        """A handle for n tokens, or None when fewer than n tokens are free in all."""
        if self.used + n > self.size:
            return None
        handle, self._next = self._next, self._next + 1
        self._taken[handle] = n
        self.used += n
        return handle

    def free(self, handle: int) -> None:
        self.used -= self._taken.pop(handle)

    def placed(self) -> list[tuple[int, int, int]]:
        """(handle, start, length) of every range, by address: packed, no hole between them."""
        out, start = [], 0
        for handle, n in self._taken.items():
            out.append((handle, start, n))
            start += n
        return out

    def ranges(self) -> list[tuple[int, int]]:
        """(start, length) of every allocated range, by address."""
        return [(s, n) for _, s, n in self.placed()]

    def holes(self) -> list[tuple[int, int]]:
        """The one free range: everything after the packed ranges."""
        return [(self.used, self.size - self.used)] if self.used < self.size else []
