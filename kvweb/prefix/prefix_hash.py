"""vLLM-style automatic prefix caching: chained block hashes instead of a tree.

A full block's hash chains the previous block's hash with the block's tokens, so equal
hashes mean equal whole prefixes. A hash table finds reusable blocks; only whole blocks
are reused, so a shared prefix that ends inside a block loses that block. Blocks nobody
references stay cached, in LRU order, until a new allocation takes them.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from kvweb.prefix.cache_workload import Request


class PrefixHashCache:
    def __init__(self, capacity: int, block_size: int = 16) -> None:
        if block_size < 1:
            raise ValueError("block size must be >= 1")
        self.block_size = block_size
        self.blocks = capacity // block_size
        self.ref = np.zeros(self.blocks, dtype=np.int64)
        self.block_hash: list[int | None] = [None] * self.blocks
        self.table: dict[int, int] = {}  # hash -> block holding that prefix's last block
        # Unreferenced blocks, least recently used first; the ones with a hash are the cache.
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(self.blocks))
        self._peeked: dict[bytes, list[int]] = {}  # a scheduler peeks at the same prompts every step

    def hashes(self, tokens: np.ndarray) -> list[int]:
        """One hash per full block: hash(previous block's hash, this block's tokens)."""
        out, prev, bs = [], 0, self.block_size
        ids = tokens.tolist()
        for i in range(0, len(ids) - bs + 1, bs):
            prev = hash((prev, *ids[i:i + bs]))
            out.append(prev)
        return out

    def _lookup(self, hashes: list[int]) -> list[int]:
        """The cached blocks of the longest run of leading hashes found in the table."""
        found = []
        for h in hashes:
            block = self.table.get(h)
            if block is None:
                break
            found.append(block)
        return found

    def peek(self, prompt: np.ndarray) -> int:
        key = prompt.tobytes()
        if key not in self._peeked:
            self._peeked[key] = self.hashes(prompt)
        return len(self._lookup(self._peeked[key])) * self.block_size

    def _acquire(self, block: int) -> None:
        if self.ref[block] == 0:
            del self.free[block]
        self.ref[block] += 1

    def _take(self) -> int:
        """A free block for new tokens: the least recently used, losing its hash."""
        block, _ = self.free.popitem(last=False)
        old = self.block_hash[block]
        if old is not None:
            del self.table[old]
            self.block_hash[block] = None
        self.ref[block] = 1
        return block

    def _release(self, blocks: list[int]) -> None:
        """Like vLLM, a request's blocks are freed tail first, so its tail is evicted first."""
        for block in reversed(blocks):
            self.ref[block] -= 1
            if self.ref[block] == 0:
                self.free[block] = None

    def serve(self, request: Request) -> int:
        """Reuse the cached whole blocks of the prompt, allocate the rest of prompt + output,
        register the new full blocks' hashes, release. Returns prompt tokens reused."""
        tokens = request.tokens
        hashes = self.hashes(tokens)
        hit = self._lookup(hashes[:len(request.prompt) // self.block_size])
        for block in hit:
            self._acquire(block)
        need = -(-len(tokens) // self.block_size) - len(hit)
        if need > len(self.free):  # longer than the whole pool: runs, leaves nothing cached
            self._release(hit)
            return len(hit) * self.block_size
        blocks = hit + [self._take() for _ in range(need)]
        for i in range(len(hit), len(hashes)):
            if hashes[i] not in self.table:
                self.table[hashes[i]] = blocks[i]
                self.block_hash[blocks[i]] = hashes[i]
        self._release(blocks)
        return len(hit) * self.block_size

    @property
    def cached(self) -> int:
        return len(self.table) * self.block_size
