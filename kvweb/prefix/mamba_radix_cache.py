"""SGLang's radix cache for linear-attention hybrids (Qwen3-Next; issue 27): the full-attention
layers' KV in the token pool as in `RadixCache`, and a linear layer's recurrent state, which
cannot be cut at any token, kept only at some nodes (python/sglang/srt/mem_cache/mamba_radix_cache.py,
`MambaRadixCache` in its default `no_buffer` mode).

- **States at insert ends.** Each insert (a prefill or chunk that ended, a finished request) puts a
  state slot of the state pool at the node where its tokens end, if that node has none (SGLang
  copies the request's state there). A split leaves the upper half without a state: a state
  belongs to the end of its tokens.
- **Match rule** (`_match_prefix_helper`): the match ends at the deepest node on the walked path
  that holds a state (the walk still splits where it ends). So a cached prefix is hit only up to
  where an earlier request's prefill, chunk or whole sequence ended, never at a branching point
  inside an edge.
- **Locks**: a running request locks the full KV from its node to the root, and the state of its
  node only (`inc_lock_ref`).
- **Eviction**: `evict` frees full KV, unlocked leaves least recently used first with their
  states (and a childless node without a state above them); `evict_states` frees states of the
  least recently used unlocked nodes holding one (parents first at equal stamps): an inner or a
  locked node keeps its KV without its state, an unlocked leaf goes whole.

Simplified: the state pool counts states (their bytes are in `serving/schedulers/mamba_scheduler.py`); SGLang's
`extra_buffer` mode (states tracked every `mamba_track_interval` tokens and at branching points)
is not simulated; no host tier.
"""

from __future__ import annotations

import heapq

import numpy as np

from kvweb.prefix.radix_cache import RuledMatch, TokenPool, Tokens, TreeNode

NO_STATE = -1


class MambaNode(TreeNode):
    """A tree node with its state slot (NO_STATE: none), the state's lock count, and where its edge
    starts (tokens from the root: parents go before children at equal stamps)."""

    __slots__ = ("state", "state_lock", "start")

    def __init__(self, node_id: int, key: np.ndarray, value: np.ndarray, parent: TreeNode | None) -> None:
        super().__init__(node_id, key, value, parent)
        self.state = NO_STATE
        self.state_lock = 0
        self.start = parent.start + len(parent.key) if isinstance(parent, MambaNode) else 0


class MambaRadixCache(RuledMatch):
    """`RadixCache` whose nodes may hold a recurrent state (see the module doc). `states` is the
    state pool; `state_evictable` counts the states no lock holds."""

    node_class = MambaNode

    def __init__(self, size: int, states: int) -> None:
        super().__init__(size)
        self.states = TokenPool(states)
        self.state_evictable = 0
        self.state_protected = 0
        self._state_free: set[MambaNode] = set()  # nodes holding an unlocked state
        self._state_locks: dict[MambaNode, list[bool]] = {}  # a locked node -> whether each lock took its state

    # -- the match rule ----------------------------------------------------------
    def _kept(self, path: list[tuple[TreeNode, int, bool]]) -> int:
        """Up to the deepest node walked whole that holds a state."""
        return max((j + 1 for j, (node, _, whole) in enumerate(path) if whole and node.state != NO_STATE), default=0)

    # -- insert: a state at the end ------------------------------------------------
    def insert(self, tokens: Tokens, slots: np.ndarray) -> int:
        """`RadixCache.insert`, then a state at the end. The state's slot is taken first (SGLang
        allocates the copy before inserting), so that making room cannot evict the new node; it is
        given back if the end already has a state."""
        slot = self._state_slot()
        already = super().insert(tokens, slots)
        run = self._tokens(tokens)
        node, i = self.root, 0
        while i < len(run):  # (the insert left a node boundary where the tokens end)
            node = node.children[int(run[i])]
            i += len(node.key)
        if node is not self.root and node.state == NO_STATE and slot != NO_STATE:
            node.state = slot
            self._unheld(node)
        elif slot != NO_STATE:
            self.give_state(slot)
        return already

    def _state_slot(self) -> int:
        """A free state slot, evicting one if there is none (NO_STATE: every state is locked)."""
        if not self.states.available:
            self.evict_states(1)
        slot = self.states.alloc(1)
        return NO_STATE if slot is None else int(slot[0])

    def take_state(self) -> int:
        """A state slot for a request (its own recurrent state while it runs)."""
        return self._state_slot()

    def give_state(self, slot: int) -> None:
        self.states.free(np.array([slot], dtype=np.int64))

    def node_states(self) -> tuple[np.ndarray, np.ndarray]:
        """The state slots nodes hold: (no running request reads it, one does: its prefix ends there)."""
        locked = [node.state for node in self._state_locks if node.state_lock]
        return (np.array([node.state for node in self._state_free], dtype=np.int64), np.array(locked, dtype=np.int64))

    def _unheld(self, node: MambaNode) -> None:
        """`node`'s state is now held by no lock (it was just given one, or unlocked)."""
        self.state_evictable += 1
        self._state_free.add(node)

    def _split(self, child: TreeNode, k: int) -> TreeNode:
        upper = super()._split(child, k)
        upper.state, upper.state_lock = NO_STATE, 0  # a state belongs to the end of its tokens
        child.start += k
        return upper

    # -- locks -------------------------------------------------------------------
    def lock(self, node: TreeNode) -> None:
        """Full KV from node to the root, and node's state if it has one."""
        super().lock(node)
        took = node is not self.root and node.state != NO_STATE
        if took:
            if node.state_lock == 0:
                self.state_evictable -= 1
                self.state_protected += 1
                self._state_free.discard(node)
            node.state_lock += 1
        self._state_locks.setdefault(node, []).append(took)

    def unlock(self, node: TreeNode) -> None:
        super().unlock(node)
        locks = self._state_locks[node]
        if locks.pop():
            node.state_lock -= 1
            if node.state_lock == 0:
                self.state_protected -= 1
                self._unheld(node)
        if not locks:
            del self._state_locks[node]

    # -- eviction ----------------------------------------------------------------
    def evict_states(self, n: int) -> int:
        """Free n states of the least recently used unlocked nodes holding one (see the module doc)."""
        heap = [(x.last_access, x.start, x) for x in self._state_free]
        heapq.heapify(heap)
        freed = 0
        while freed < n and heap:
            stamp, _, x = heapq.heappop(heap)
            if x not in self._state_free or stamp != x.last_access:
                continue
            freed += 1
            if x.children or x.lock_ref:
                self._free_state(x)
            else:
                self._tidy(self._drop(x)[1])
        return freed

    def _free_state(self, node: MambaNode) -> None:
        self.give_state(node.state)
        node.state = NO_STATE
        self.state_evictable -= 1
        self._state_free.discard(node)

    def _drop(self, node: TreeNode) -> tuple[int, TreeNode]:
        """Delete an unlocked leaf, its state too, and every node without a state above it that it
        leaves an unlocked leaf. Returns the full slots freed and the first node kept."""
        freed = 0
        while True:
            if node.state != NO_STATE:
                self._free_state(node)
            n, parent = super()._drop(node)
            freed += n
            if parent is self.root or parent.state != NO_STATE or parent.children or parent.lock_ref:
                return freed, parent
            node = parent
