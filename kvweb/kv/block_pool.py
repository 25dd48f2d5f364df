"""The pool of physical KV blocks: a free list and a reference count per block.

A block id is only a number here; the K and V rows it names live in the store. The pool
answers three questions the paged store asks: give me a free block (`allocate`), one more
block table holds this block (`share`), one fewer does (`release`, which puts the block back
on the free list when nobody holds it any more).
"""

from __future__ import annotations

from collections import deque

import numpy as np


class OutOfBlocks(MemoryError):
    """The pool has fewer free blocks than a request needs."""


class BlockPool:
    def __init__(self, num_blocks: int, shuffle: bool = False, seed: int = 0) -> None:
        """`shuffle` hands blocks out in a seeded random order instead of 0, 1, 2, ...:
        the output must not depend on where a sequence's blocks happen to lie."""
        if num_blocks < 1:
            raise ValueError("a block pool needs at least one block")
        order = np.random.default_rng(seed).permutation(num_blocks).tolist() if shuffle else range(num_blocks)
        self.num_blocks = num_blocks
        self.free_list: deque[int] = deque(order)
        self.ref_count = [0] * num_blocks

    @property
    def num_free(self) -> int:
        return len(self.free_list)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_list)

    def allocate(self) -> int:
        """Take the next free block; its one holder is the caller."""
        if not self.free_list:
            raise OutOfBlocks(f"all {self.num_blocks} blocks are in use")
        block = self.free_list.popleft()
        self.ref_count[block] = 1
        return block

    def share(self, block: int) -> None:
        """One more block table points at `block` (a fork)."""
        if self.ref_count[block] < 1:
            raise ValueError(f"block {block} is free; only a held block can be shared")
        self.ref_count[block] += 1

    def release(self, block: int) -> bool:
        """One fewer block table points at `block`; True when it went back to the free list."""
        if self.ref_count[block] < 1:
            raise ValueError(f"block {block} is already free")
        self.ref_count[block] -= 1
        if self.ref_count[block]:
            return False
        self.free_list.append(block)
        return True
