"""A contiguous token arena: what every placement of reserved ranges shares.

A reserved ("Orca") memory manager needs one contiguous range per request. An arena of `size`
tokens hands out a handle per range (its start, unless ranges move), takes it back, and
reports its ranges and holes; how ranges are placed is the subclass's: first-fit
(`first_fit.py`), buddy (`buddy.py`) or the ideal arena without holes (`ideal_arena.py`).
"""

from __future__ import annotations


class ContiguousArena:
    """`size` tokens, `used` of them reserved. By default a request takes exactly its tokens, any
    request up to the whole arena fits an empty one, and a range never moves (its start is its handle)."""

    kind = ""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0

    def span(self, n: int) -> int:
        """Tokens actually taken for a request of n."""
        return n

    @property
    def largest_possible(self) -> int:
        """The largest request an empty arena can hold."""
        return self.size

    @property
    def free_total(self) -> int:
        return self.size - self.used

    def allocate(self, n: int) -> int | None:
        """A handle for a range of n tokens, or None if the arena cannot place it."""
        raise NotImplementedError

    def free(self, handle: int) -> None:
        raise NotImplementedError

    def ranges(self) -> list[tuple[int, int]]:
        """(start, length) of every allocated range, by address."""
        raise NotImplementedError

    def holes(self) -> list[tuple[int, int]]:
        """(start, length) of every free range, by address."""
        raise NotImplementedError

    def placed(self) -> list[tuple[int, int, int]]:
        """(handle, start, length) of every range, by address."""
        return [(s, s, n) for s, n in self.ranges()]
