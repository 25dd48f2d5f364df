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

from types import SimpleNamespace
from typing import Any, Protocol

import numpy as np

from kvweb.gpu.cost import KV_PRECISIONS, CostModel
from kvweb.gpu.specs import LLMSpec
from kvweb.serving.host_tier import HostTree
from kvweb.serving.metrics import SLO
from kvweb.serving.radix_scheduler import PAGE_OVERHEAD, PrefixTree, RadixConfig, RadixScheduler

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

    def __init__(self, cost: CostModel, tree: WindowTree, config: RadixConfig, slo: SLO = SLO(),
                 give_up_after: int | None = None, host: HostTree | None = None) -> None:
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
                self.pool.free_swa(own[start - base:stop - base])
                self.slid[seq.id] = stop

    def _release(self, seq: Any, finished: bool) -> None:
        self.slid.pop(seq.id, None)
        super()._release(seq, finished)

    def never_fits(self, final_kv: int) -> str | None:
        """`RadixScheduler.never_fits` against the smaller pool: admission counts both."""
        size = min(self.pool.full.size, self.pool.swa.size)
        if final_kv + 1 + PAGE_OVERHEAD >= size:
            return (f"prompt + output = {final_kv + 1} tokens; SGLang admits a request only while they and a slot of "
                    f"slack stay below the free slots of both pools ({self.pool.full.size} full, "
                    f"{self.pool.swa.size} window)")
        return None

    def _rem_total(self, offset: float) -> float:
        pool, tree = self.pool, self.tree
        return min(pool.full.available + tree.evictable_size, pool.swa.available + tree.swa_evictable_size) \
            - self.pending - offset

    def pool_figures(self) -> dict[str, int]:
        """The two pools' sizes and the window: what a result reports beside the single map."""
        return {"window": self.window, "full_tokens": self.pool.full.size, "swa_tokens": self.pool.swa.size}

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        """`RadixScheduler.memory_map` over the full pool's slots, then the window pool's (numbered
        after them): every node's and request's window slots are drawn as its full slots are (the
        tree handed over as two nodes, the locked and the unlocked slots: all the map reads)."""
        self._materialize_running()
        pool = self.pool
        offset = pool.size

        def both(slots: np.ndarray) -> np.ndarray:
            return np.concatenate([slots, pool.window_slots(slots) + offset])

        held: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])  # slots of unlocked and of locked nodes
        stack = list(self.tree.root.children.values())
        while stack:
            node = stack.pop()
            held[node.lock_ref > 0].append(node.value)
            stack.extend(node.children.values())
        nodes = [SimpleNamespace(value=both(np.concatenate(values)), lock_ref=lock, children={})
                 for lock, values in enumerate(held) if values]

        def drawn(seq: Any) -> SimpleNamespace:
            return SimpleNamespace(id=seq.id, own=[both(np.concatenate(seq.own))] if seq.own else [])

        view = SimpleNamespace(
            pool=SimpleNamespace(size=offset + pool.swa.size),
            tree=SimpleNamespace(root=SimpleNamespace(children=dict(enumerate(nodes)))),
            running={i: drawn(seq) for i, seq in self.running.items()},
            chunked=drawn(self.chunked) if self.chunked is not None else None,
            _materialize_running=lambda: None)
        return RadixScheduler.memory_map(view, step, max_cells)  # type: ignore[arg-type]
