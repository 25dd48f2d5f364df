"""vLLM V1's hybrid KV cache manager (issue 27): a model whose layers are not all alike keeps
each kind of layer in its own KV cache groups, on one shared pool of pages.

Following vLLM (vllm/v1/core/kv_cache_utils.py, `_get_kv_cache_groups_uniform_page_size`;
kv_cache_coordinator.py `HybridKVCacheCoordinator`; single_type_kv_cache_manager.py):

- **Groups.** Layers of one type (and shape) are split into groups of `group_size` layers: the
  fewest layers of any type, or the most when that is under 1.5 x the fewest (vLLM PR #36684
  raised it from 1.25; gpt-oss: 18 window + 18 full layers, 2 groups; Gemma 3 27B: 52 window + 10
  full, group size 10, 6 window groups, the last padded with 8 empty slots; Qwen3-Next: 36 linear
  + 12 full, 4 groups; gpt-oss-20b with a 4-layer drafter, 12 window + 17 full: groups of 17). A block of the
  pool is one page for each of `group_size` layers; each group takes its own blocks.
- **One page size.** All pages are equal. With linear-attention (Mamba-like) layers the attention
  block size is raised to the smallest multiple of the alignment (the kernel's 16 tokens, or the
  configured block size if larger) whose page holds one layer's state (vLLM
  `_align_hybrid_block_size`, prefix caching in its default `align` mode), never lowered; the
  state's page is padded up to the attention page. The state stays at 16 bits under an fp8 KV
  cache (vLLM's `mamba_cache_dtype` defaults to the model's dtype; `kv_cache_dtype` does not
  reach it), so fp8 doubles the raised block (Qwen3-Next: 544 tokens, 1,072 at fp8).
- **Window groups free blocks** that fall out of the window as the request computes
  (`SlidingWindowManager.remove_skipped_blocks`: blocks wholly before the last window - 1 tokens);
  a linear group keeps only the block holding its latest state. Freed blocks keep their hash:
  they wait, still found, in the one least-recently-used free queue all groups share.
- **A prefix hit** is the longest prefix every group can serve: full attention scans from the left,
  then each window group looks, right to left within that length, for the last cdiv(window - 1,
  block) blocks all cached (a linear group: the one block holding the state), and the hit is cut
  to where they end (a prefix that reaches back to the first block needs no more).

Simplified here (docs/today.md, "Today's models in the schedulers"): every window group frees at
the start of an iteration, before any allocation (vLLM frees request by request as it allocates);
a request is admitted only if its whole uncached prompt's blocks fit in every group (the window
groups' too, as vLLM counts a chunk's new blocks); a linear layer's state is cached at every block
boundary a request passes (vLLM's align mode keeps those where a scheduled chunk ends); pages
of attention layers of different shapes are padded to the largest.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from kvweb.gpu.cost import KV_PRECISIONS, CostModel
from kvweb.gpu.specs import BYTES_16, LLMSpec
from kvweb.serving.loop.continuous_batching import K_CACHED, K_FREE, K_OTHER, K_SHARED, key_cells
from kvweb.serving.loop.engine_trace import GroupMap, cell_group
from kvweb.serving.memory.prefix_caching import BlockPool
from kvweb.serving.loop.sequence import Seq

ALIGN = 16  # vLLM's attention kernel block alignment: a raised block size is a multiple of it
# vLLM's `_get_kv_cache_groups_uniform_page_size`: the most layers of any type are the group size when
# under this many times the fewest (`max_num_layers < min_num_layers * 1.5`; 1.25 before PR #36684)
GROUP_RATIO = 1.5
NULL = -1  # a block a request no longer holds in a group (vLLM's null block)


@dataclass(frozen=True)
class KVGroup:
    """One KV cache group: `layers` layers of one kind (of the group size; the rest is padding)."""

    kind: str  # full, sliding, latent or linear
    layers: int
    # tokens of KV a request keeps (0: all): window - 1 behind the next, or 1 (a state); the blocks
    # wholly before them are skipped (vLLM `get_num_skipped_tokens`)
    kept: int = 0

    @property
    def windowed(self) -> bool:
        return self.kept > 0

    def hit_blocks(self, block_size: int) -> int:
        """Cached blocks at the end of a prefix this group needs to serve it."""
        return -(-self.kept // block_size)


@dataclass(frozen=True)
class KVLayout:
    """How one GPU's KV memory is laid out for a model: block size, groups, bytes per block."""

    block_size: int
    group_size: int
    groups: tuple[KVGroup, ...]
    page_bytes: int  # one layer's page on one GPU

    @property
    def block_bytes(self) -> int:
        return self.page_bytes * self.group_size

    @property
    def hybrid(self) -> bool:
        """More than one group or a window: the plain block pool does not do."""
        return len(self.groups) > 1 or self.groups[0].windowed

    def blocks(self, cost: CostModel) -> int:
        """Blocks that fit beside the weights on one GPU (0 if the model cannot run there)."""
        return int(cost.kv_bytes_free_per_gpu // self.block_bytes) if cost.fits else 0


def kv_layout(cost: CostModel, block_size: int) -> KVLayout:
    """The model's KV cache groups and page size at a configured block size (see the module doc)."""
    tp, kv = 1 if cost.attention_dp else cost.tp, KV_PRECISIONS[cost.kv_precision]
    types = cost.model.groups
    counts = [n for _, n in types]
    group_size = max(counts) if max(counts) < GROUP_RATIO * min(counts) else min(counts)
    token_bytes = max((a.kv_elements_per_gpu(tp) * kv for a, _ in types if a.kind != "linear"), default=0)
    # a linear state at 16 bits whatever the KV precision: vLLM sizes it by `mamba_cache_dtype` ("auto":
    # the model's dtype), not `kv_cache_dtype` (MambaStateDtypeCalculator._mamba_state_dtype)
    state_bytes = max((a.state_elements_per_gpu(tp) * BYTES_16 for a, _ in types if a.kind == "linear"), default=0)
    if state_bytes and token_bytes:  # the alignment: the kernel's, or the configured size if larger
        align = max(ALIGN, block_size)
        block_size = max(block_size, align * -(-state_bytes // (align * token_bytes)))
    page = max(block_size * token_bytes, state_bytes)
    groups = []
    for a, n in types:
        kept = 1 if a.kind == "linear" else max(a.window - 1, 0)
        groups += [KVGroup(a.kind, min(group_size, n - i), kept) for i in range(0, n, group_size)]
    return KVLayout(block_size, group_size, tuple(groups), page)


class GroupedPool:
    """vLLM's block pool under the hybrid manager: a request's block i is a list of one page per
    group (NULL where a window group freed it); pages live in one `BlockPool`, hashed per group
    (vLLM's `BlockHashWithGroupId`), so one free queue orders every group's cached pages.

    It answers the calls `V1Scheduler` makes of a `BlockPool`, with blocks as these lists: `take(n)`
    gives n new blocks (a page in every group), and the free count is in pages (`width` per block)."""

    def __init__(self, layout: KVLayout, n_pages: int) -> None:
        self.groups = layout.groups
        self.width = len(layout.groups)
        self.block_size = layout.block_size
        self.pages = BlockPool(n_pages, layout.block_size)
        self.full = [g for g, group in enumerate(self.groups) if not group.windowed]
        self.windowed = [g for g, group in enumerate(self.groups) if group.windowed]
        kept = sorted({self.groups[g].kept for g in self.windowed})
        self.windows = [(k, [g for g in self.windowed if self.groups[g].kept == k]) for k in kept]
        self.version = 0  # changes when a lookup may find more (a hash entered) or less (see `watch`)

    # what the scheduler reads of a pool
    @property
    def free(self) -> Sequence[int]:
        return self.pages.free

    @property
    def n_blocks(self) -> int:
        return self.pages.n_blocks

    @property
    def reusable(self) -> int:
        return self.pages.reusable

    @property
    def shared_extra(self) -> int:
        return self.pages.shared_extra

    def take(self, n: int) -> list[list[int]]:
        """n new blocks, a page for every group, least recently used pages first."""
        before = self.pages.version
        pages = self.pages.take(n * self.width)
        if self.pages.version != before:
            self.version += 1
        w = self.width
        return [pages[i * w : (i + 1) * w] for i in range(n)]

    def release(self, blocks: Sequence[list[int]]) -> None:
        """A request lets go of its blocks, tail first in every group (vLLM frees group by group)."""
        for g in range(self.width):
            self.pages.release([b[g] for b in blocks if b[g] != NULL])

    def touch(self, blocks: Iterable[list[int]]) -> None:
        self.pages.touch([p for p in chain.from_iterable(blocks) if p != NULL])

    def evictable(self, blocks: Iterable[list[int]]) -> int:
        """Pages of these blocks that are free (a hit takes them out of the free queue)."""
        return self.pages.evictable(p for p in chain.from_iterable(blocks) if p != NULL)

    def watch(self, found: list[list[int]], hashes: Sequence[Hashable]) -> None:
        """The waiting head's lookup found `found`: losing one of its pages changes `version`."""
        self.pages.watch([p for p in chain.from_iterable(found) if p != NULL], ())

    def register(self, blocks: Sequence[list[int]], hashes: Sequence[Hashable], start: int, stop: int) -> None:
        """Blocks start..stop-1 are full: enter each group's page still held under (hash, group)."""
        table = self.pages.table
        for g in range(self.width):
            pages, keys = [], []
            for i in range(start, stop):
                if blocks[i][g] != NULL:
                    pages.append(blocks[i][g])
                    keys.append((hashes[i], g))
            if any(k not in table for k in keys):
                self.version += 1
            self.pages.register(pages, keys, 0, len(pages))

    def lookup(self, hashes: Iterable[Hashable]) -> list[list[int]]:
        """The longest prefix every group can serve (`HybridKVCacheCoordinator.find_longest_cache_hit`)."""
        hashes = list(hashes)
        table = self.pages.table
        n = 0
        for h in hashes:  # full attention: from the left
            if any((h, g) not in table for g in self.full):
                break
            n += 1
        while True:  # each window group within that length; until no group cuts it shorter
            cut = n
            for g in self.windowed:
                cut = min(cut, self._window_hit(hashes, cut, g))
            if cut == n:
                break
            n = cut
        found = []
        for i in range(n):
            block = [NULL] * self.width
            for g in self.full:
                block[g] = table[(hashes[i], g)]
            for g in self.windowed:
                if i >= n - self.groups[g].hit_blocks(self.block_size):
                    block[g] = table[(hashes[i], g)]
            found.append(block)
        return found

    def _window_hit(self, hashes: list[Hashable], n: int, g: int) -> int:
        """`SlidingWindowManager.find_longest_cache_hit`: the longest prefix of at most n blocks
        whose last `hit_blocks` blocks are cached in group g, or that is cached from the start."""
        need, table, run = self.groups[g].hit_blocks(self.block_size), self.pages.table, 0
        for i in range(n - 1, -1, -1):
            if (hashes[i], g) in table:
                run += 1
                if run >= need:
                    return i + run
            else:
                run = 0
        return run

    def slide(self, blocks: list[list[int]], computed: int) -> None:
        """Free the window groups' pages a request with `computed` tokens no longer needs
        (`remove_skipped_blocks`: from the last skipped block back to the first already freed).
        Groups of one window slide together, so the first of them tells whether any has to."""
        bs = self.block_size
        for kept, groups in self.windows:
            skipped = (computed - kept) // bs
            if skipped <= 0 or blocks[skipped - 1][groups[0]] == NULL:
                continue  # (the usual case: nothing new fell out of the window)
            for g in groups:
                freed = []
                for i in range(skipped - 1, -1, -1):
                    if blocks[i][g] == NULL:
                        break
                    freed.append(blocks[i][g])
                    blocks[i][g] = NULL
                self.pages.release(freed[::-1])


def page_states(pool: GroupedPool, seqs: Sequence[Seq], groups: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Each page's key (a running request's id, K_SHARED for a page found in the cache or held twice,
    K_CACHED or K_FREE) and, if asked, its group (-1: free without a hash). Every page is in exactly
    one group or free: a group's pages are the ones its requests hold and the ones hashed for it."""
    pages, bs, width = pool.pages, pool.block_size, pool.width
    n = pages.n_blocks
    key = np.full(n, K_FREE, dtype=np.int64)
    group = np.full(n, -1, dtype=np.int64) if groups else None
    cached = np.fromiter(chain(pages.table.values(), *pages.copies.values()), np.intp)
    key[cached] = K_CACHED
    if group is not None:  # hashed for group g: under the key (hash, g)
        group[cached] = np.fromiter(
            chain(map(itemgetter(1), pages.table), (h[1] for h, copies in pages.copies.items() for _ in copies)),
            np.int64,
            len(cached),
        )
    if seqs:
        counts = [len(s.blocks) * width for s in seqs]
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(s.blocks for s in seqs)), np.intp, sum(counts))
        held = flat != NULL
        pages_held = flat[held]
        key[pages_held] = np.repeat(np.array([s.id for s in seqs], dtype=np.int64), counts)[held]
        if group is not None:
            group[pages_held] = np.tile(np.arange(width), len(flat) // width)[held]
        found = np.zeros(len(flat), dtype=bool)  # the pages of the blocks each request hit
        for start, s in zip(np.cumsum([0, *counts[:-1]]).tolist(), seqs):
            if s.hit >= bs:
                found[start : start + s.hit // bs * width] = True
        key[flat[held & found]] = K_SHARED
        key[np.bincount(pages_held, minlength=n) > 1] = K_SHARED  # only running requests hold pages
    return key, group


def grouped_memory_map(pool: GroupedPool, seqs: Sequence[Seq], max_cells: int) -> tuple[int, list[int], list[int]]:
    """`V1Scheduler.memory_map` on a grouped pool: cells of pages of any group, a running request's
    id, SHARED (found in the cache or held twice), CACHED or FREE; a held or cached page counts as
    full (the last block's fill is not drawn)."""
    key, _ = page_states(pool, seqs)
    per_cell = cell_group(len(key), max_cells)
    key = np.concatenate([key, np.full(-len(key) % per_cell, K_FREE)])  # whole cells: the padding stays free
    return key_cells(pool.block_size, per_cell, key, np.where(key == K_FREE, 0, pool.block_size))


def group_maps(pool: GroupedPool, seqs: Sequence[Seq], max_cells: int) -> list[GroupMap]:
    """`V1Scheduler.group_maps`: the one pool once per group, its own pages by state (as
    `grouped_memory_map`), a free page without a hash FREE, a page held or cached by another group
    OTHER. The maps together hold about twice the cells of one (`max_cells` each for two groups)."""
    key, group = page_states(pool, seqs, groups=True)
    n, width, bs = len(key), pool.width, pool.block_size
    per_cell = cell_group(n, max(max_cells // 4, 2 * max_cells // width))
    cells = -(-n // per_cell)
    # Cell by cell: another group's, unless a page in it is free (the padding too: FREE) or this group's
    # (the largest key). Only the pages of some group are looked at one by one: most of a pool is free.
    free = np.ones(cells * per_cell, dtype=bool)
    free[:n] = group < 0
    own = np.full((width, cells), K_OTHER, dtype=np.int64)
    own[:, free.reshape(cells, per_cell).any(axis=1)] = K_FREE
    at = np.flatnonzero(~free[:n])
    mine = group[at] * cells + at // per_cell  # (group, cell) of each
    np.maximum.at(own.ravel(), mine, key[at])
    written = np.bincount(mine, minlength=width * cells) * bs
    cell_tokens, owner, percent = key_cells(per_cell * bs, 1, own.ravel(), written)
    return [
        GroupMap(
            g.kind,
            g.layers,
            g.kept + 1 if g.kind == "sliding" else 0,
            True,
            "block",
            cell_tokens,
            owner[i * cells : (i + 1) * cells],
            percent[i * cells : (i + 1) * cells],
        )
        for i, g in enumerate(pool.groups)
    ]


def sglang_refusal(model: LLMSpec) -> str | None:
    """Why kvweb's SGLang mode cannot serve this model, or None: it serves window layers on SGLang's
    two pools (swa_scheduler.py) and linear layers on its state pool (mamba_scheduler.py), one or the
    other; a model with both is refused rather than served as if one kind were full attention."""
    kinds = {a.kind for a, _ in model.groups}
    if not {"sliding", "linear"} <= kinds:
        return None
    return (
        f"sglang: {model.name} has both sliding-window and linear attention layers; kvweb's SGLang mode serves "
        "one or the other (SGLang's SWA pool or its Mamba radix cache); use vllm-v1 for it"
    )
