"""SGLang's scheduler for models with sliding-window layers (gpt-oss, Gemma 3): a full pool and a
window pool, the window KV of running requests freed as it falls out of the window, on the radix
cache with tombstones (kvweb/prefix/swa_radix_cache.py, wired in prefix/sglang_pools.py: serving may not
import prefix).

Following SGLang (model_runner.py `set_num_token_hybrid`, schedule_batch.py `maybe_evict_swa` /
`_evict_swa`, schedule_policy.py `PrefillAdder.rem_total_tokens`):

- **Pool sizes** (`swa_pool_sizes`): the KV memory is split so that the window pool holds
  `swa_full_tokens_ratio` (default 0.8) times the full pool's tokens:
  full x (full layers' bytes per token + ratio x window layers' bytes per token) = the KV memory,
  window = int(full x ratio). (SGLang solves it in token-layers, which is the same when a window
  layer's token is as large as a full layer's, as in gpt-oss and Gemma 3.)
- **Admission** counts the emptier pool: min(full free + full evictable, window free + window
  evictable) - what running requests will still take; every other rule is `RadixScheduler`'s.
- **Prompts enter the tree** when their prefill ends (`cache_unfinished_req` after every prefill,
  not only after a chunk): the request then locks only its prompt's last window of window KV, and
  the window pool's eviction may free the rest (a tombstone) while the request runs.
- **Window freeing.** Every `window` decode steps each running request frees the window KV of its
  tokens more than `window` tokens behind its last, beyond the prefix the tree owns
  (`swa_evicted_seqlen` = max(itself, the cached prefix's length, KV - window)); when it finishes,
  the tokens it freed enter the tree as a tombstone.

Simplified: SGLang counts the `window` decode steps from each request's own start
(`decode_batch_idx`), kvweb from the run's decode count, all requests at once, at the start of an
iteration (SGLang: after the prefill attempt). Quiet iterations stop at that step
(radix_quiet.py reads `slide_at`), so they stay exact.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from kvweb.gpu.cost import KV_PRECISIONS, CostModel
from kvweb.gpu.specs import LLMSpec
from kvweb.serving.loop.engine_trace import GroupMap
from kvweb.serving.memory.host_tier import HostTree
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.schedulers.radix_scheduler import (
    PAGE_OVERHEAD,
    Held,
    PrefixTree,
    RadixConfig,
    RadixScheduler,
    slot_cells,
)

SWA_FULL_TOKENS_RATIO = 0.8  # SGLang's --swa-full-tokens-ratio default


def model_window(model: LLMSpec) -> int:
    """The model's sliding window in tokens (0: no window layers)."""
    return max(a.window for a, _ in model.groups)


def swa_pool_sizes(cost: CostModel, ratio: float = SWA_FULL_TOKENS_RATIO) -> tuple[int, int]:
    """(full tokens, window tokens) of SGLang's two pools on this GPU (see the module doc)."""
    if not cost.fits:
        return 0, 0
    tp, kv = 1 if cost.attention_dp else cost.tp, KV_PRECISIONS[cost.kv_precision]
    window_bytes = sum(n * a.kv_elements_per_gpu(tp) for a, n in cost.model.groups if a.window) * kv
    full = int(cost.kv_bytes_free_per_gpu / (cost.kv_bytes_per_token_per_gpu + ratio * window_bytes))
    full *= cost.tp if cost.attention_dp else 1
    return full, int(full * ratio)


class WindowTree(PrefixTree, Protocol):
    """What the scheduler needs of SWARadixCache besides `PrefixTree`."""

    window: int
    swa_evictable_size: int


class SWARadixScheduler(RadixScheduler):
    """`RadixScheduler` on two pools (see the module doc)."""

    cache_prompts = True

    def __init__(
        self,
        cost: CostModel,
        tree: WindowTree,
        config: RadixConfig,
        slo: SLO = SLO(),
        give_up_after: int | None = None,
        host: HostTree | None = None,
    ) -> None:
        if host is not None:
            raise ValueError("sglang: a host tier is simulated for models whose layers are all alike only")
        super().__init__(cost, tree, config, slo, give_up_after, host)
        self.window = tree.window
        self.slide_at = self.window  # the decode count at which running requests free window KV next
        self.slid: dict[int, int] = {}  # request id -> its tokens whose window KV is freed (swa_evicted_seqlen)

    def _iterate(self) -> tuple[float, int, list, int, int, int]:
        if self.dstep >= self.slide_at:
            self._slide()
        return super()._iterate()

    def _slide(self) -> None:
        """Each running request frees the window KV of its tokens before its last window."""
        self.slide_at = self.dstep + self.window
        self._materialize_running()
        for seq in self.running.values():
            base = len(seq.prefix)  # the tree owns these: its eviction frees them
            start, stop = max(self.slid.get(seq.id, 0), base), seq.kv(self.dstep) - self.window
            if stop > start:
                own = np.concatenate(seq.own) if len(seq.own) > 1 else seq.own[0]
                seq.own = [own]
                self.pool.free_swa(own[start - base : stop - base])
                self.slid[seq.id] = stop

    def _release(self, seq: Any, finished: bool) -> None:
        self.slid.pop(seq.id, None)
        super()._release(seq, finished)

    def never_fits(self, final_kv: int) -> str | None:
        """`RadixScheduler.never_fits` against the smaller pool: admission counts both."""
        size = min(self.pool.full.size, self.pool.swa.size)
        if final_kv + 1 + PAGE_OVERHEAD >= size:
            return (
                f"prompt + output = {final_kv + 1} tokens; SGLang admits a request only while they and a slot of "
                f"slack stay below the free slots of both pools ({self.pool.full.size} full, "
                f"{self.pool.swa.size} window)"
            )
        return None

    def _rem_total(self, offset: float) -> float:
        pool, tree = self.pool, self.tree
        return (
            min(pool.full.available + tree.evictable_size, pool.swa.available + tree.swa_evictable_size)
            - self.pending
            - offset
        )

    def pool_figures(self) -> dict[str, int]:
        """The two pools' sizes and the window: what a result reports beside the single map."""
        return {"window": self.window, "full_tokens": self.pool.full.size, "swa_tokens": self.pool.swa.size}

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        """`RadixScheduler.memory_map` over the full pool's slots, then the window pool's (numbered
        after them): every node's and request's window slots are drawn as its full slots are."""
        (tree, running), (window_tree, window_running) = self._pools_held()
        offset = self.pool.size
        both = [(k, np.concatenate([full, window + offset])) for (k, full), (_, window) in zip(tree, window_tree)]
        if running is not None:
            running = (
                np.concatenate([running[0], window_running[0] + offset]),
                np.concatenate([running[1], window_running[1]]),
            )
        return slot_cells(offset + self.pool.swa.size, max_cells, both, running)

    def group_maps(self, step: int, max_cells: int) -> list[GroupMap]:
        """Each pool's map, of at most max_cells cells: the full pool (every token a request or node
        holds), then the window pool (the tokens that still hold window KV: a running request's
        slots behind its last window are freed every `window` decode steps, a tombstone's are free
        while its full slots stay cached)."""
        pools = self._pools_held()
        kinds = [(a.kind, n) for a, n in self.cost.model.groups]
        full = [(k, n) for k, n in kinds if k != "sliding"]
        groups = [
            (full[0][0], sum(n for _, n in full), 0, self.pool.size),
            ("sliding", sum(n for k, n in kinds if k == "sliding"), self.window, self.pool.swa.size),
        ]
        maps = []
        for (kind, layers, window, size), (tree, running) in zip(groups, pools):
            cell_tokens, owner, written = slot_cells(size, max_cells, tree, running)
            maps.append(GroupMap(kind, layers, window, False, "token slot", cell_tokens, owner, written))
        return maps

    def _pools_held(self) -> tuple[tuple[list[tuple[int, np.ndarray]], Held | None], ...]:
        """`_held_slots` of the full pool, then of the window pool (the window slots the same tokens still hold)."""
        tree, running = self._held_slots()
        pool = self.pool
        window_tree = [(k, pool.window_slots(slots)) for k, slots in tree]
        window_running = None
        if running is not None:
            window_running = (pool.window_slots(running[0]), running[1][pool.holds_window(running[0])])
        return (tree, running), (window_tree, window_running)
