"""Paged KV memory for the simulator (vLLM): fixed-size blocks taken on demand.

Cheap accounting only (block ids, no K/V arrays). A running sequence holds
ceil(kv_tokens / block_size) blocks and takes a new one only when its last block is full.
Every running sequence grows by one token per step, so the steps at which it needs a new
block repeat every block_size steps: a sequence that holds T tokens after step s needs a block
at every step s' with s' = s + 1 - T (mod block_size). Sequences are kept in buckets by that
phase, so finding who needs a block this step is one lookup, not a walk over the batch.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from kvweb.serving.loop.engine_trace import blocks_to_cells, cell_group
from kvweb.serving.loop.sequence import Sequence

BLOCK_SIZE = 16  # tokens per KV block: vLLM's default, and every block size's default here


class PagedMemory:
    kind = "paged"

    def __init__(self, n_blocks: int, block_size: int, watermark: float = 0.0) -> None:
        self.block_size = block_size
        self.n_blocks = n_blocks
        self.capacity = n_blocks * block_size
        self.watermark_blocks = int(watermark * n_blocks)  # kept free at admission
        self.free_blocks = list(range(n_blocks - 1, -1, -1))  # a stack: pops 0, 1, 2, ... first
        self._due: list[dict[int, Sequence]] = [{} for _ in range(block_size)]  # phase -> sequences
        self.holders: dict[int, Sequence] = {}

    @property
    def occupied(self) -> int:
        """Tokens in allocated blocks (written or not)."""
        return (self.n_blocks - len(self.free_blocks)) * self.block_size

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def never_fits(self, final_kv: int) -> str | None:
        """Why a request whose KV ends at final_kv tokens could never run alone, or None."""
        need = self.blocks_for(final_kv)
        if need + self.watermark_blocks > self.n_blocks:
            kept = f" plus {self.watermark_blocks} kept free by the watermark" if self.watermark_blocks else ""
            return f"needs {need} blocks of {self.block_size} tokens{kept}; the GPU holds {self.n_blocks}"
        return None

    def admit(self, seq: Sequence, tokens: int, step: int) -> bool:
        """Give seq the blocks for `tokens` KV tokens (held after `step`), if the watermark allows."""
        need = self.blocks_for(tokens)
        free = self.free_blocks
        if len(free) - need < self.watermark_blocks:
            return False
        seq.blocks = free[len(free) - need :][::-1]
        del free[len(free) - need :]
        seq.phase = (step + 1 - tokens) % self.block_size
        self._due[seq.phase][seq.id] = seq
        self.holders[seq.id] = seq
        return True

    def shortfall(self, step: int) -> int:
        """Blocks missing for this step's one-token growth of every running sequence (> 0: preempt)."""
        return len(self._due[step % self.block_size]) - len(self.free_blocks)

    def grow(self, step: int) -> None:
        """One new block for every sequence whose last block filled up in the previous step."""
        free = self.free_blocks
        for seq in self._due[step % self.block_size].values():
            seq.blocks.append(free.pop())

    def occupancy(self, step: int, count: int) -> list[int]:
        """Tokens occupied after each of steps step+1 .. step+count if the running sequences
        only grow, up to the last step before one that would run short (changes nothing)."""
        free, bs, due, held = len(self.free_blocks), self.block_size, self._due, []
        for s in range(step + 1, step + count + 1):
            need = len(due[s % bs])
            if need > free:
                break
            free -= need
            held.append((self.n_blocks - free) * bs)
        return held

    def grow_through(self, step: int, n: int) -> None:
        """`grow` for steps step+1 .. step+n."""
        free, bs, due = self.free_blocks, self.block_size, self._due
        for s in range(step + 1, step + n + 1):
            for seq in due[s % bs].values():
                seq.blocks.append(free.pop())

    def free(self, seq: Sequence) -> None:
        """All of a sequence's blocks go back at once (finish or preemption)."""
        self.free_blocks.extend(reversed(seq.blocks))
        seq.blocks = []
        del self._due[seq.phase][seq.id]
        del self.holders[seq.id]

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        """Cells of whole blocks: tokens per cell, owner ids (-1 free), written percentages."""
        owner = np.full(self.n_blocks, -1, dtype=np.int64)
        written = np.zeros(self.n_blocks, dtype=np.int64)
        seqs = list(self.holders.values())
        if seqs:
            counts = np.array([len(s.blocks) for s in seqs])
            blocks = np.fromiter(chain.from_iterable(s.blocks for s in seqs), np.int64, int(counts.sum()))
            owner[blocks] = np.repeat([s.id for s in seqs], counts)
            written[blocks] = self.block_size
            last = np.array([s.blocks[-1] for s in seqs])
            written[last] = np.array([s.kv(step) for s in seqs]) - (counts - 1) * self.block_size
        return blocks_to_cells(self.block_size, owner, written, max_cells)

    def held_cells(self, seq: Sequence, max_cells: int) -> list[int]:
        """The memory-map cells holding seq's blocks (for drawing a preemption where it frees)."""
        per_cell = cell_group(self.n_blocks, max_cells)
        return sorted({b // per_cell for b in seq.blocks})
