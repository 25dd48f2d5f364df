"""vLLM's automatic prefix caching: a pool of KV blocks found again by chained hashes.

A full block's hash chains the previous block's hash with the block's tokens, so equal hashes
mean equal whole prefixes (vLLM V1 `kv_cache_utils.hash_block_tokens`). The table maps a hash
to the block holding it; only full blocks are ever hashed, so a shared block is never written
again. Every block has a reference count (the requests holding it). A block nobody holds is
free: a hashed one goes to the back of the free queue, still hashed, and stays reusable until
an allocation takes it from the front (least recently used first), which erases its hash
(`block_pool.py`: `free_blocks`, `get_new_blocks`, `_maybe_evict_cached_block`); one without a
hash can never be hit and goes to the front, to be reused first. A request's blocks are freed
tail first, so its tail is evicted before its prefix. As in vLLM, a block
filled with tokens whose hash is already in the table is not de-duplicated (block tables are
append-only): it is hashed too, a copy (`BlockHashToBlockMap`); a lookup finds the earliest
block of a hash still cached, and when that one is evicted the next copy takes its place.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np


def chain_hashes(
    tokens: np.ndarray,
    block_size: int,
    hashes: list[Hashable],
    blocks: int,
    root: Hashable = 0,
    extra: Mapping[int, Hashable] | None = None,
) -> None:
    """Extend `hashes` (the chain of the first len(hashes) blocks of `tokens`, int64 ids) to
    `blocks` blocks: each is hash(previous hash, this block's tokens), the first block's previous
    hash `root` (a LoRA adapter's: vLLM hashes the adapter's name into every block); a block with
    an `extra` key (by block index) hashes it too (the images its tokens hold a placeholder of:
    vLLM's `_gen_mm_extra_hash_keys`)."""
    prev = hashes[-1] if hashes else root
    start = len(hashes) * block_size
    if blocks * block_size <= start:
        return
    # the blocks' bytes in one piece, cut in Python: a numpy slice per block costs more than its hash
    data = tokens[start : blocks * block_size].tobytes()
    width = block_size * tokens.itemsize
    if extra:
        for i, at in enumerate(range(0, (blocks * block_size - start) * tokens.itemsize, width), len(hashes)):
            key = extra.get(i)
            prev = hash((prev, data[at : at + width]) if key is None else (prev, data[at : at + width], key))
            hashes.append(prev)
        return
    for at in range(0, (blocks * block_size - start) * tokens.itemsize, width):
        prev = hash((prev, data[at : at + width]))
        hashes.append(prev)


class BlockPool:
    def __init__(self, n_blocks: int, block_size: int) -> None:
        if block_size < 1:
            raise ValueError("block size must be >= 1")
        self.block_size = block_size
        self.n_blocks = n_blocks
        self.ref = [0] * n_blocks
        self.block_hash: list[Hashable | None] = [None] * n_blocks
        self.table: dict[Hashable, int] = {}  # hash -> the block holding that prefix's last block
        self.copies: dict[Hashable, dict[int, None]] = {}  # hash -> later blocks with it, in order
        # Unreferenced blocks, least recently used first; the ones with a hash are the cache.
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(n_blocks))
        self.shared_extra = 0  # references beyond the first, over all blocks
        self.reusable = 0  # free blocks with a hash: free memory that a hit can still bring back
        # Changes whenever one watched lookup may find more or less: the hash where it stopped is
        # entered, or a block it found loses its hash (no other change alters its result).
        self.version = 0
        self.watched: set[int] = set()
        self.awaited: Hashable | None = None

    @property
    def cached(self) -> int:
        """Tokens in hashed blocks (held or free), copies included."""
        return (len(self.table) + sum(map(len, self.copies.values()))) * self.block_size

    def lookup(self, hashes: Iterable[Hashable]) -> list[int]:
        """The cached blocks of the longest run of leading hashes found in the table."""
        found = []
        table = self.table
        for h in hashes:
            block = table.get(h)
            if block is None:
                break
            found.append(block)
        return found

    def watch(self, found: list[int], hashes: Sequence[Hashable]) -> None:
        """Watch the lookup of `hashes` that found `found` (see `version`)."""
        self.watched = set(found)
        self.awaited = hashes[len(found)] if len(found) < len(hashes) else None

    def evictable(self, blocks: Iterable[int]) -> int:
        """How many of these blocks are free (a hit on them takes them out of the free queue)."""
        ref = self.ref
        return sum(1 for b in blocks if ref[b] == 0)

    def touch(self, blocks: Iterable[int]) -> None:
        """A request holds these (hit) blocks: one more reference each."""
        ref, free = self.ref, self.free
        for block in blocks:
            if ref[block] == 0:
                del free[block]
                self.reusable -= 1  # only hashed blocks are hit
            else:
                self.shared_extra += 1
            ref[block] += 1

    def take(self, n: int) -> list[int]:
        """n free blocks for new tokens, least recently used first, each losing its hash."""
        out = []
        free, ref, block_hash, table = self.free, self.ref, self.block_hash, self.table
        for _ in range(n):
            block, _ = free.popitem(last=False)
            old = block_hash[block]
            if old is not None:
                if old in self.copies:
                    self._drop_copy(old, block)
                else:
                    del table[old]
                block_hash[block] = None
                self.reusable -= 1
                if block in self.watched:
                    self.version += 1
            ref[block] = 1
            out.append(block)
        return out

    def _drop_copy(self, h: Hashable, block: int) -> None:
        """`block` loses hash h, which other blocks hold too: the earliest left is found from now on."""
        copies = self.copies[h]
        if self.table[h] == block:
            self.table[h] = next(iter(copies))
            del copies[self.table[h]]
        else:
            del copies[block]
        if not copies:
            del self.copies[h]

    def release(self, blocks: Sequence[int]) -> None:
        """A request lets go of its blocks, tail first (`free_blocks`): a hashed block goes to the
        back of the free queue, so the cache evicts least recently used first and a tail before its
        prefix; a block without a hash goes to the front, reused before any cached block is
        evicted (vLLM PR #42656)."""
        ref, free, block_hash = self.ref, self.free, self.block_hash
        front = []
        for block in reversed(blocks):
            ref[block] -= 1
            if ref[block] == 0:
                if block_hash[block] is None:
                    front.append(block)
                else:
                    free[block] = None
                    self.reusable += 1
            else:
                self.shared_extra -= 1
        for block in reversed(front):  # the tail ends up at the very front
            free[block] = None
            free.move_to_end(block, last=False)

    def register(self, blocks: Sequence[int], hashes: Sequence[Hashable], start: int, stop: int) -> None:
        """A request's blocks start..stop-1 are full: enter their hashes (a hash already in
        the table keeps its first block, and this one is a copy)."""
        table, block_hash = self.table, self.block_hash
        for i in range(start, stop):
            h = hashes[i]
            if h not in table:
                table[h] = blocks[i]
                if h == self.awaited:
                    self.version += 1
            elif table[h] != blocks[i]:
                self.copies.setdefault(h, {})[blocks[i]] = None
            block_hash[blocks[i]] = h
