"""PagedStore: the KV cache as block tables over a shared pool of physical blocks (vLLM).

A sequence's cache is a list of block ids, its block table; logical block i holds
positions i*B .. i*B+B-1. One block id covers every layer. A new block is allocated only when
the last one is full. `fork` lets a child share its parent's blocks (reference counts go up);
copy-on-write gives a writer its own copy of a shared, partly filled last block, while the
last holder writes in place. `free` drops counts; a block is free again only at zero.

Implements the model's KVStore protocol (length / write / attend / advance), plus `add`,
`fork`, `free`, `can_append` / `blocks_needed` (for a scheduler), and `snapshot` (the state a
step-by-step trace records; `Tracer` collects one per engine step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kvweb.kv.block_pool import BlockPool, OutOfBlocks
from kvweb.kv.model import MiniModel, causal_attention, decode


def paged_attention(
    q: np.ndarray,
    k_pool: np.ndarray,
    v_pool: np.ndarray,
    block_table: Sequence[int],
    length: int,
    block_size: int,
    scratch: np.ndarray | None = None,
) -> np.ndarray:
    """Causal attention of q [n, H, D] (the last n of `length` positions) over K and V read
    through a block table.

    k_pool, v_pool: one layer's pool, [num_blocks, block_size, H, D]. The sequence's blocks are
    read block by block in table order with one indexed copy each for K and V (numpy cannot
    follow a block table inside a kernel: this copy is the whole cost of paging here, see
    docs/paged.md); the unfilled rows of the last block are cut off; then the softmax runs over
    the rows of all blocks and the weighted V is summed, exactly as on a contiguous cache.
    `scratch` ([2, >= blocks, block_size, H, D], reused across calls) spares the copy a fresh
    allocation, which for large caches costs as much as the copy itself.
    """
    nb = -(-length // block_size)
    blocks = np.asarray(block_table[:nb])
    if scratch is None:
        scratch = np.empty((2, nb, *k_pool.shape[1:]))
    # mode="clip" is numpy's unbuffered take; the ids come from a block table, so none is clipped
    k = np.take(k_pool, blocks, axis=0, mode="clip", out=scratch[0, :nb])
    v = np.take(v_pool, blocks, axis=0, mode="clip", out=scratch[1, :nb])
    rows = (nb * block_size, *k_pool.shape[2:])
    return causal_attention(q, k.reshape(rows)[:length], v.reshape(rows)[:length])


class PagedStore:
    """K and V of `num_blocks` blocks of `block_size` tokens, for every layer at once
    (`k`, `v`: [layers, num_blocks, block_size, heads, head_dim]), and a block table per
    sequence. `shuffle` and `seed` set the pool's hand-out order."""

    def __init__(
        self,
        layers: int,
        heads: int,
        head_dim: int,
        block_size: int,
        num_blocks: int,
        shuffle: bool = False,
        seed: int = 0,
    ) -> None:
        if block_size < 1:
            raise ValueError("block_size must be at least 1")
        self.block_size = block_size
        self.pool = BlockPool(num_blocks, shuffle, seed)
        shape = (layers, num_blocks, block_size, heads, head_dim)
        self.k = np.zeros(shape)
        self.v = np.zeros(shape)
        self._scratch = np.empty((2, *shape[1:]))  # paged_attention's gather buffer
        self.tables: dict[int, list[int]] = {}
        self._len: dict[int, int] = {}
        self._staged: dict[int, int] = {}
        self.events: list[dict[str, Any]] = []  # allocate / copy / fork / free, in order

    @classmethod
    def for_model(
        cls, model: MiniModel, block_size: int, num_blocks: int, shuffle: bool = False, seed: int = 0
    ) -> PagedStore:
        c = model.config
        return cls(c.layers, c.heads, c.head_dim, block_size, num_blocks, shuffle, seed)

    # --- sequences: add, fork, free -------------------------------------------------------
    def add(self, seq: int) -> None:
        if seq in self.tables:
            raise ValueError(f"sequence {seq} already exists")
        self.tables[seq] = []
        self._len[seq] = 0

    def fork(self, parent: int, child: int) -> None:
        """The child starts as a copy of the parent's block table; no K/V row is copied."""
        if self._staged.get(parent):
            raise ValueError(f"sequence {parent} is mid-iteration; fork between iterations")
        self.add(child)
        self.tables[child] = list(self.tables[parent])
        self._len[child] = self._len[parent]
        for block in self.tables[child]:
            self.pool.share(block)
        self.events.append({"kind": "fork", "parent": parent, "child": child})

    def free(self, seq: int) -> None:
        released = [b for b in self.tables.pop(seq) if self.pool.release(b)]
        del self._len[seq]
        self._staged.pop(seq, None)
        self.events.append({"kind": "free", "seq": seq, "released": released})

    def block_table(self, seq: int) -> list[int]:
        return list(self.tables[seq])

    def blocks_needed(self, seq: int, n: int) -> int:
        """Free blocks that appending n tokens to `seq` takes (new blocks plus a copy-on-write)."""
        table, length = self.tables[seq], self._len[seq]
        fresh = max(0, -(-(length + n) // self.block_size) - len(table))
        return fresh + int(self._shared_tail(seq))

    def can_append(self, seq: int, n: int) -> bool:
        return self.blocks_needed(seq, n) <= self.pool.num_free

    # --- the model's KVStore protocol ----------------------------------------------------
    def length(self, seq: int) -> int:
        return self._len[seq]

    def write(self, seq: int, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        """Stage n new tokens' K and V for one layer. The first layer to write makes room."""
        n = len(k)
        if seq not in self._staged:
            self._make_room(seq, n)
        elif self._staged[seq] != n:
            raise ValueError(f"sequence {seq}: every layer must write the same {self._staged[seq]} tokens")
        blocks, rows = self._slots(seq, self._len[seq], n)
        self.k[layer, blocks, rows] = k
        self.v[layer, blocks, rows] = v

    def attend(self, seq: int, layer: int, q: np.ndarray) -> np.ndarray:
        length = self._len[seq] + self._staged.get(seq, 0)
        return paged_attention(
            q, self.k[layer], self.v[layer], self.tables[seq], length, self.block_size, self._scratch
        )

    def advance(self, seq: int, n: int) -> None:
        if self._staged.pop(seq, None) != n:
            raise ValueError(f"sequence {seq}: advance({n}) does not match the tokens written")
        self._len[seq] += n

    # --- the trace ----------------------------------------------------------------------
    def snapshot(self, tokens: dict[int, Sequence[int]] | None = None) -> dict[str, Any]:
        """Plain-data state: each sequence's token count, block table and last-block fill,
        each used block's owners, reference count and filled rows, and the free list.
        Given each sequence's tokens (the store holds only K and V), every block and every
        table entry also says which characters it holds (`text`, `texts`)."""
        sequences, owners, fill, text = [], {}, {}, {}
        bs = self.block_size
        for seq, table in self.tables.items():
            length = self._len[seq]
            entry = {
                "seq": seq,
                "tokens": length,
                "block_table": list(table),
                "last_block_fill": length - (len(table) - 1) * bs if table else 0,
            }
            if tokens is not None:
                held = list(tokens[seq])[:length]
                entry["texts"] = [decode(held[i * bs : (i + 1) * bs]) for i in range(len(table))]
                for block, chars in zip(table, entry["texts"]):
                    text[block] = max(text.get(block, ""), chars, key=len)
            sequences.append(entry)
            for i, block in enumerate(table):
                owners.setdefault(block, []).append(seq)
                fill[block] = max(fill.get(block, 0), min(bs, length - i * bs))
        blocks = [
            {
                "block": b,
                "owners": owners.get(b, []),
                "ref_count": self.pool.ref_count[b],
                "fill": fill.get(b, 0),
                **({"text": text[b]} if b in text else {}),
            }
            for b in range(self.pool.num_blocks)
            if self.pool.ref_count[b]
        ]
        return {
            "sequences": sequences,
            "blocks": blocks,
            "used_blocks": self.pool.num_used,
            "unshared_blocks": self.unshared_blocks(),
            "free_blocks": self.pool.num_free,
            "free_list": list(self.pool.free_list),
        }

    def unshared_blocks(self) -> int:
        """Blocks the live sequences would hold with private block tables (no sharing)."""
        return sum(-(-length // self.block_size) for length in self._len.values())

    # --- private helpers ----------------------------------------------------------------
    def _shared_tail(self, seq: int) -> bool:
        """True when the next write lands in a partly filled last block that others also hold."""
        table = self.tables[seq]
        return bool(self._len[seq] % self.block_size) and self.pool.ref_count[table[-1]] > 1

    def _make_room(self, seq: int, n: int) -> None:
        """Before n new tokens arrive: copy a shared last block, then allocate what is missing.
        Checked first, so that running out of blocks changes nothing."""
        need = self.blocks_needed(seq, n)
        if need > self.pool.num_free:
            raise OutOfBlocks(f"sequence {seq} needs {need} blocks for {n} tokens; {self.pool.num_free} are free")
        table = self.tables[seq]
        if self._shared_tail(seq):
            self._copy_on_write(seq)
        while len(table) * self.block_size < self._len[seq] + n:
            table.append(self.pool.allocate())
            self.events.append({"kind": "allocate", "seq": seq, "block": table[-1]})
        self._staged[seq] = n

    def _copy_on_write(self, seq: int) -> None:
        """Take a new block, copy the filled rows of every layer, repoint, drop the old count."""
        table = self.tables[seq]
        old, new = table[-1], self.pool.allocate()
        rows = self._len[seq] % self.block_size
        self.k[:, new, :rows] = self.k[:, old, :rows]
        self.v[:, new, :rows] = self.v[:, old, :rows]
        table[-1] = new
        self.pool.release(old)
        self.events.append({"kind": "copy", "seq": seq, "from": old, "to": new, "rows": rows})

    def _slots(self, seq: int, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Physical (block, row) of positions start .. start+n-1."""
        position = np.arange(start, start + n)
        return np.asarray(self.tables[seq])[position // self.block_size], position % self.block_size


StepHook = Callable[[dict[str, Any]], None]  # an engine's report of one step (plain data)


class Tracer:
    """Records one step of a run: the engine's note about the step, the store's snapshot and
    the store's events since the previous step. Pass it as an engine's `on_step`. A note's
    `tokens` ({seq: its tokens so far}) go into the snapshot, as the characters each block holds."""

    def __init__(self, store: PagedStore) -> None:
        self.store = store
        self.steps: list[dict[str, Any]] = []
        self._seen = 0

    def __call__(self, note: dict[str, Any]) -> None:
        events = self.store.events[self._seen :]
        self._seen = len(self.store.events)
        rest = {k: v for k, v in note.items() if k != "tokens"}
        self.steps.append({**rest, **self.store.snapshot(note.get("tokens")), "events": events})


# Work caps for traces sent to a browser: blocks in a traced pool, steps kept in a trace.
MAX_TRACE_BLOCKS = 512
MAX_TRACE_STEPS = 65


def first_step_with(steps: list[dict[str, Any]], kind: str, after: int = 0) -> int:
    """Index of the first step from `after` on whose events include a `kind` event (a copy, an
    allocation...), else 0: the frame a lab opens on, where its mechanism is already visible."""
    return next((i for i, step in enumerate(steps) if i >= after and any(e["kind"] == kind for e in step["events"])), 0)


def thin(steps: list[dict[str, Any]], most: int = MAX_TRACE_STEPS) -> list[dict[str, Any]]:
    """At most `most` steps, evenly spread, first and last kept. The events of a dropped step
    move to the next kept one, so that no copy, allocation or free goes unseen."""
    if len(steps) <= most:
        return steps
    keep = set(np.linspace(0, len(steps) - 1, most).round().astype(int).tolist())
    kept, events = [], []
    for i, step in enumerate(steps):
        events += step["events"]
        if i in keep:
            kept.append({**step, "events": events})
            events = []
    return kept
