"""vLLM-style automatic prefix caching: chained block hashes instead of a tree.

A full block's hash chains the previous block's hash with the block's tokens, so equal
hashes mean equal whole prefixes. A hash table finds reusable blocks; only whole blocks
are reused, so a shared prefix that ends inside a block loses that block. Blocks nobody
references stay cached, in LRU order, until a new allocation takes them. The block pool is
the serving simulator's (serving/memory/prefix_caching.py); here requests are served one at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import numpy as np

from kvweb.memo import Memo
from kvweb.prefix.cache_workload import Request
from kvweb.serving.memory.paged_memory import BLOCK_SIZE
from kvweb.serving.memory.prefix_caching import BlockPool, chain_hashes


class _Chain:
    """The hashes of a run of tokens, and where each first appears."""

    __slots__ = ("hashes", "first")

    def __init__(self, hashes: list[Hashable]) -> None:
        self.hashes = hashes
        self.first = dict(zip(reversed(hashes), range(len(hashes) - 1, -1, -1)))  # the first position wins


# A prompt's chain is the same in every cache with its block size, and in every rerun of a lab on
# the same workload: remembered (least recently used dropped first), shared; callers only read it.
_CHAINS: Memo[_Chain] = Memo(4096)  # (block size, the tokens' bytes) -> their chain


class _Peeked:
    """A prompt's chain and how many leading hashes the table held when last asked."""

    __slots__ = ("prompt", "chain", "found", "since")

    def __init__(self, prompt: np.ndarray, chain: _Chain, since: int) -> None:
        self.prompt = prompt  # held, so that no other array takes its id while this is kept
        self.chain = chain
        self.found = 0
        self.since = since  # evictions (`PrefixHashCache._taken`) already accounted for


class PrefixHashCache(BlockPool):
    def __init__(self, capacity: int, block_size: int = BLOCK_SIZE) -> None:
        super().__init__(capacity // max(block_size, 1), block_size)
        # A scheduler peeks at the same waiting prompts every step, and between two steps one
        # request changes the table a little: each peek starts from the prompt's last answer.
        # Prompts are known by identity (requests' arrays are never written).
        self._peeked: dict[int, _Peeked] = {}
        self._taken: list[set[Hashable]] = []  # the hashes each serve's allocation erased, in order

    def hashes(self, tokens: np.ndarray) -> list[Hashable]:
        """One hash per full block: hash(previous block's hash, this block's tokens). Shared:
        read it, do not change it."""
        return self._chained(tokens).hashes

    def _chained(self, tokens: np.ndarray) -> _Chain:
        run = np.asarray(tokens, dtype=np.int64)
        return _CHAINS.get((self.block_size, run.tobytes()), lambda: _Chain(self._chain(run, [])))

    def _chain(self, tokens: np.ndarray, start: list[Hashable]) -> list[Hashable]:
        """`start`, the chain of the first blocks of `tokens`, extended to all its full blocks."""
        chain_hashes(tokens, self.block_size, start, len(tokens) // self.block_size)
        return start

    def peek(self, prompt: np.ndarray) -> int:
        return self._found(prompt) * self.block_size

    def _found(self, prompt: np.ndarray) -> int:
        """The longest run of the prompt's leading blocks the table holds. Since the last ask,
        only the hashes allocations erased can have cut that run short; it then grows again
        while the table holds the next hash."""
        seen = self._peeked.get(id(prompt))
        if seen is None:
            seen = self._peeked[id(prompt)] = _Peeked(prompt, self._chained(prompt), len(self._taken))
        found, first, hashes = seen.found, seen.chain.first, seen.chain.hashes
        for taken in self._taken[seen.since :]:
            cut = first.keys() & taken
            if cut:
                found = min(found, *map(first.__getitem__, cut))
        if found < len(hashes) and hashes[found] in self.table:  # most often not: no copy of the rest
            found += len(list(itertools.takewhile(self.table.__contains__, hashes[found:])))
        seen.found, seen.since = found, len(self._taken)
        return found

    def serve(self, request: Request) -> int:
        """Reuse the cached whole blocks of the prompt, allocate the rest of prompt + output,
        register the new full blocks' hashes, release. Returns prompt tokens reused."""
        tokens = np.asarray(request.tokens, dtype=np.int64)
        hashes = self._chain(tokens, list(self.hashes(request.prompt)))  # the prompt's chain starts the request's
        hit = list(map(self.table.__getitem__, hashes[: self._found(request.prompt)]))
        self.touch(hit)
        need = -(-len(tokens) // self.block_size) - len(hit)
        if need > len(self.free):  # longer than the whole pool: runs, leaves nothing cached
            self.release(hit)
            return len(hit) * self.block_size
        # `take` hands out the least recently used free blocks, erasing their hashes.
        self._taken.append({self.block_hash[b] for b in itertools.islice(self.free, need)} - {None})
        blocks = hit + self.take(need)
        self.register(blocks, hashes, len(hit), len(hashes))
        self.release(blocks)
        return len(hit) * self.block_size
