"""vLLM-style automatic prefix caching: chained block hashes instead of a tree.

A full block's hash chains the previous block's hash with the block's tokens, so equal
hashes mean equal whole prefixes. A hash table finds reusable blocks; only whole blocks
are reused, so a shared prefix that ends inside a block loses that block. Blocks nobody
references stay cached, in LRU order, until a new allocation takes them. The block pool is
the serving simulator's (serving/prefix_caching.py); here requests are served one at a time.
"""
from __future__ import annotations

import numpy as np

from kvweb.prefix.cache_workload import Request
from kvweb.serving.prefix_caching import BlockPool, chain_hashes


class PrefixHashCache(BlockPool):
    def __init__(self, capacity: int, block_size: int = 16) -> None:
        super().__init__(capacity // max(block_size, 1), block_size)
        self._peeked: dict[bytes, list[int]] = {}  # a scheduler peeks at the same prompts every step

    def hashes(self, tokens: np.ndarray) -> list[int]:
        """One hash per full block: hash(previous block's hash, this block's tokens)."""
        out: list = []
        chain_hashes(np.asarray(tokens, dtype=np.int64), self.block_size, out, len(tokens) // self.block_size)
        return out

    def peek(self, prompt: np.ndarray) -> int:
        key = prompt.tobytes()
        if key not in self._peeked:
            self._peeked[key] = self.hashes(prompt)
        return len(self.lookup(self._peeked[key])) * self.block_size

    def serve(self, request: Request) -> int:
        """Reuse the cached whole blocks of the prompt, allocate the rest of prompt + output,
        register the new full blocks' hashes, release. Returns prompt tokens reused."""
        tokens = request.tokens
        hashes = self.hashes(tokens)
        hit = self.lookup(hashes[:len(request.prompt) // self.block_size])
        self.touch(hit)
        need = -(-len(tokens) // self.block_size) - len(hit)
        if need > len(self.free):  # longer than the whole pool: runs, leaves nothing cached
            self.release(hit)
            return len(hit) * self.block_size
        blocks = hit + self.take(need)
        self.register(blocks, hashes, len(hit), len(hashes))
        self.release(blocks)
        return len(hit) * self.block_size
