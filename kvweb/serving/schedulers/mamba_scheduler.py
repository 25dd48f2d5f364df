"""SGLang's scheduler for linear-attention hybrids (Qwen3-Next): a token pool for the full-attention
layers and a pool of recurrent states, on the radix cache that keeps states only at some nodes
(kvweb/prefix/mamba_radix_cache.py, wired in prefix/sglang_pools.py: serving may not import prefix).

Following SGLang (model_runner.py's mamba pool sizing, `HybridReqToTokenPool`,
mamba_radix_cache.py `cache_unfinished_req` / `cache_finished_req`):

- **Pool sizes** (`sglang_mamba_pool_sizes` in prefix/sglang_pools.py, at SGLang's state dtypes): of the KV memory, `mamba_full_memory_ratio` / (1 +
  `mamba_full_memory_ratio`) (default 0.9: 47 %) goes to states, as many as fit of one request's
  state over every linear layer; the rest to full-attention tokens.
- **A state per running request**, taken when it is first admitted and given back when it leaves;
  every prefill that ends puts a copy at the end of the prompt's node, and a finished request's
  whole sequence gets one at its end (the request's own state is then freed).
- Admission and everything else are `RadixScheduler`'s rules on the token pool.

Simplified: running requests are capped at (states - 1) / 2, so that every running request's own
state and the state its cached prefix locks always find a slot (SGLang caps max_running_requests
by its state pool too); states are counted at the KV precision (SGLang keeps the SSM state in
`mamba_ssm_dtype`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.serving.loop.continuous_batching import K_CACHED, K_SHARED
from kvweb.serving.loop.engine_trace import GroupMap
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.schedulers.radix_scheduler import Pool, PrefixTree, RadixConfig, RadixScheduler, slot_cells

MAMBA_FULL_MEMORY_RATIO = 0.9  # SGLang's --mamba-full-memory-ratio default


class StateTree(PrefixTree, Protocol):
    """What the scheduler needs of MambaRadixCache besides `PrefixTree`."""

    states: Pool

    def take_state(self) -> int: ...
    def give_state(self, slot: int) -> None: ...
    def node_states(self) -> tuple[np.ndarray, np.ndarray]: ...


class MambaRadixScheduler(RadixScheduler):
    """`RadixScheduler` with a state per running request (see the module doc)."""

    cache_prompts = True  # `cache_unfinished_req` after every prefill: the prompt's end gets a state

    def __init__(
        self,
        cost: CostModel,
        tree: StateTree,
        config: RadixConfig,
        states: int,
        slo: SLO = SLO(),
        give_up_after: int | None = None,
    ) -> None:
        if states < 3:
            raise ValueError("sglang: the state pool must hold at least 3 states (a request's and its prefix's)")
        super().__init__(cost, tree, config, slo, give_up_after)
        self.max_seqs = min(self.max_seqs, (states - 1) // 2)
        self.held: dict[int, int] = {}  # request id -> its own state slot

    def _take(self, seq: Any, n: int) -> None:
        if seq.id not in self.held:
            slot = self.tree.take_state()
            if slot < 0:
                raise RuntimeError(f"sglang: no state for request {seq.id} although the cap had one")
            self.held[seq.id] = slot
        super()._take(seq, n)

    def _release(self, seq: Any, finished: bool) -> None:
        super()._release(seq, finished)
        slot = self.held.pop(seq.id, None)
        if slot is not None:
            self.tree.give_state(slot)

    def group_maps(self, step: int, max_cells: int) -> list[GroupMap]:
        """Each pool's map, of at most max_cells cells: the token pool (`memory_map`), then the state
        pool: a state per running request (its id), the states at the nodes its cached prefix ends
        (SHARED) and those no running request reads (CACHED)."""
        kinds = [(a.kind, n) for a, n in self.cost.model.groups]
        full = [(k, n) for k, n in kinds if k != "linear"]
        cell_tokens, owner, written = self.memory_map(step, max_cells)
        maps = [GroupMap(full[0][0], sum(n for _, n in full), 0, False, "token slot", cell_tokens, owner, written)]
        cached, shared = self.tree.node_states()
        running = (np.array(list(self.held.values()), dtype=np.int64), np.array(list(self.held), dtype=np.int64))
        per_cell, owner, written = slot_cells(
            self.tree.states.size, max_cells, [(K_CACHED, cached), (K_SHARED, shared)], running if self.held else None
        )
        maps.append(
            GroupMap(
                "linear", sum(n for k, n in kinds if k == "linear"), 0, False, "state slot", per_cell, owner, written
            )
        )
        return maps
