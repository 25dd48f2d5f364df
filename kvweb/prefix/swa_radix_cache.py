"""SGLang's radix cache for models with sliding-window layers (issue 27): two token pools and a
tree whose nodes may have lost their window KV (python/sglang/srt/mem_cache/swa_radix_cache.py,
allocator/swa.py).

- **Two pools** (`SWATokenPool`, SGLang's `SWATokenToKVPoolAllocator`): a token's full-attention
  KV takes a slot of the full pool, its window-layer KV a slot of the window (SWA) pool. A token
  is named by its full slot; `swa_of` maps it to its window slot (-1: freed). Allocating takes a
  slot in each; `free` gives back both, `free_swa` the window slot alone.
- **Tombstones.** A node whose window KV was freed keeps its full KV and tokens: its window KV is
  a tombstone. Window KV is freed three ways: a running request's, as it falls out of its window
  (the scheduler, swa_scheduler.py); a finished request's tokens inserted after that enter the
  tree as a tombstone node above a live leaf; and window eviction (below).
- **Locks.** A running request locks its prefix's full KV from its node to the root, as in
  `RadixCache`, and its window KV only over the last `window` tokens of it (`inc_lock_ref`: the
  node where the window is reached gets an id, `swa_uuid`, and unlocking stops there). Nodes
  further up may lose their window KV while the request runs.
- **Match rule** (`_match_prefix_helper`): a match may end at a node only if the tokens from the
  last tombstone above it (or from the root, when there is none) with window KV number at least
  `window`: attention at the next token needs the whole window. The walk goes on (and splits)
  past that point, but the match is cut back to the last node where the rule held.
- **Eviction** (`evict`) asks for room in both pools: unlocked leaves go first, least recently
  used first, all their KV (and a tombstone parent left childless goes with them); if the window
  pool is still short, window KV alone is freed from the least recently used nodes that no
  request's window holds (parents before children at equal stamps): an inner node or a locked one
  becomes a tombstone, an unlocked leaf goes whole.
- **Insert** of tokens whose node is a tombstone: where the incoming slots still have window KV,
  the node takes it (its own full slots are freed, or, while a request reads them, kept with the
  incoming window slots: `_recover_tombstone_keeping_locked_full`); where they do not, the incoming
  slots are freed.

Simplified: one page size (1, SGLang's default); no host tier; SGLang's early release of a
running request's window lock once it decodes past its window (`dec_swa_lock_only`) is not done,
so a request holds its prefix's last window until it leaves; when two requests lock the same node
with different window bounds (a split between their locks), each unlock releases the most recent.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from kvweb.prefix.radix_cache import RuledMatch, TokenPool, TreeNode

NO_SWA = -1  # `swa_of` of a token whose window KV is freed (or that has no slot)


class SWATokenPool:
    """A full pool and a window pool (see the module doc); token-granular, like SGLang's default."""

    page_size = 1

    def __init__(self, full_size: int, swa_size: int) -> None:
        self.full = TokenPool(full_size)
        self.swa = TokenPool(swa_size)
        self.size = self.full.size  # what the scheduler counts as the KV capacity: full slots
        self.swa_of = np.full(full_size, NO_SWA, dtype=np.int64)

    @property
    def available(self) -> int:
        """Tokens that fit now: a slot of each pool per token (SGLang's `available_size`)."""
        return min(self.full.available, self.swa.available)

    @property
    def used(self) -> int:
        return self.full.used

    def pages_for(self, n_tokens: int) -> int:
        return n_tokens

    def alloc(self, n_tokens: int) -> np.ndarray | None:
        if n_tokens > self.available:
            return None
        slots = self.full.alloc(n_tokens)
        self.swa_of[slots] = self.swa.alloc(n_tokens)
        return slots

    def free(self, slots: np.ndarray) -> None:
        """Both slots of each token (the window slot where it is still held)."""
        self.free_swa(slots)
        self.full.free(slots)

    def window_slots(self, slots: np.ndarray) -> np.ndarray:
        """The window slots these tokens still hold."""
        swa = self.swa_of[slots]
        return swa[swa != NO_SWA]

    def holds_window(self, slots: np.ndarray) -> np.ndarray:
        """Which of these tokens still hold a window slot (for drawing: whose are `window_slots`)."""
        return self.swa_of[slots] != NO_SWA

    def free_swa(self, slots: np.ndarray) -> None:
        """The window slots of these tokens, where still held; their full slots stay."""
        held = self.window_slots(slots)
        if len(held):
            self.swa.free(held)
        self.swa_of[slots] = NO_SWA


class SWANode(TreeNode):
    """A tree node with its window state: tombstone, window lock count, lock bound id, and where
    its edge starts (tokens from the root: parents go before children at equal stamps)."""

    __slots__ = ("swa_tombstone", "swa_lock_ref", "swa_uuid", "start")

    def __init__(self, node_id: int, key: np.ndarray, value: np.ndarray, parent: TreeNode | None) -> None:
        super().__init__(node_id, key, value, parent)
        self.swa_tombstone = False
        self.swa_lock_ref = 0
        self.swa_uuid: int | None = None
        self.start = parent.start + len(parent.key) if isinstance(parent, SWANode) else 0


class SWARadixCache(RuledMatch):
    """`RadixCache` on an `SWATokenPool` with SGLang's window rules (see the module doc).
    `evictable_size` / `protected_size` count full KV; `swa_evictable_size` the window KV that
    window eviction may free."""

    node_class = SWANode

    def __init__(self, full_size: int, swa_size: int, window: int) -> None:
        if window < 1:
            raise ValueError("window must be at least 1 token")
        super().__init__(0)
        self.pool = SWATokenPool(full_size, swa_size)  # type: ignore[assignment]
        self.window = window
        self.swa_evictable_size = 0  # window KV of live nodes no request's window holds
        self.swa_protected_size = 0
        self._swa_free: set[SWANode] = set()  # those nodes: the window eviction's candidates
        self._uuids = itertools.count(1)
        self._bounds: dict[SWANode, list[int | None]] = {}  # a locked node -> its locks' window bounds

    # -- the match rule ----------------------------------------------------------
    def _kept(self, path: list[tuple[TreeNode, int, bool]]) -> int:
        """Up to the last point with at least `window` live tokens after the last tombstone: before
        a tombstone, or the walk's end."""
        since, kept, before = float("inf"), 0, 0  # since: live tokens after the last tombstone
        for j, (node, end, _) in enumerate(path):
            if node.swa_tombstone:  # type: ignore[attr-defined]
                if since >= self.window:
                    kept = j
                since = 0
            else:
                since += end - before
            before = end
        return len(path) if since >= self.window else kept

    # -- insert ------------------------------------------------------------------
    def _insert(self, run: np.ndarray, node: TreeNode, i: int, slots: np.ndarray) -> int:
        """`RadixCache._insert` with tombstones: see the module doc (SGLang's `_insert_helper`)."""
        data = run.tobytes()
        start = i
        already = len(run)
        while i < len(run):
            child = node.children.get(int(run[i]))
            if child is None:
                already = i
                node = self._add_tail(node, run[i:], slots[i - start : len(run) - start])
                break
            k = self._common(child, run, i, data)
            given = slots[i - start : i - start + k]
            child.last_access = self.clock
            if k < len(child.key):
                child = self._split(child, k)
            if given.tobytes() != child.value.tobytes():
                child = self._take_copies(child, given)
            node, i = child, i + k
        if node is not self.root:
            node.end = True
        if len(slots) > len(run) - start:
            self.pool.free(slots[len(run) - start :])
        return already

    def _add_tail(self, parent: TreeNode, key: np.ndarray, value: np.ndarray) -> TreeNode:
        """New tokens: those whose window KV is freed (a request's are freed from the front) as a
        tombstone node, the rest as a live leaf; none live: no node (a leaf is never a tombstone)."""
        live = self.pool.swa_of[value] != NO_SWA
        dead = len(live) if not live.any() else int(live.argmax())
        if dead == len(key):
            self.pool.free(value)
            return parent
        if dead:
            parent = self._add_leaf(parent, key[:dead], value[:dead], tombstone=True)
        return self._add_leaf(parent, key[dead:], value[dead:])

    def _take_copies(self, node: SWANode, given: np.ndarray) -> SWANode:
        """Tokens cached at `node` arrive again in other slots: free the copies, except that a
        tombstone takes back window KV the copies still have. Returns the node the run ends at."""
        swa_of = self.pool.swa_of
        live = swa_of[given] != NO_SWA
        if not node.swa_tombstone or not live.any() or np.any(given == node.value):
            self.pool.free(given[given != node.value])
            return node
        dead = int(live.argmax())
        if dead:  # the first `dead` tokens stay a tombstone
            self._split(node, dead)
            self.pool.free(given[:dead])
            given = given[dead:]
        if node.lock_ref:  # a running request reads its full KV: keep it, with the incoming window KV
            swa_of[node.value] = swa_of[given]
            swa_of[given] = NO_SWA
            self.pool.full.free(given)
        else:
            self.pool.free(node.value)
            node.value = given.copy()
        node.swa_tombstone = False
        self.swa_evictable_size += len(node.key)
        self._swa_free.add(node)
        return node

    def _add_leaf(self, parent: TreeNode, key: np.ndarray, value: np.ndarray, tombstone: bool = False) -> TreeNode:
        leaf = super()._add_leaf(parent, key, value)
        leaf.swa_tombstone = tombstone
        if not tombstone:
            self.swa_evictable_size += len(key)
            self._swa_free.add(leaf)
        return leaf

    def _split(self, child: TreeNode, k: int) -> TreeNode:
        """The upper half takes the window state too, and the lock bound (the top of the locked run)."""
        upper = super()._split(child, k)
        upper.swa_tombstone, upper.swa_lock_ref = child.swa_tombstone, child.swa_lock_ref
        upper.swa_uuid, child.swa_uuid = child.swa_uuid, None
        child.start += k
        if child in self._swa_free:
            self._swa_free.add(upper)
        return upper

    # -- locks -------------------------------------------------------------------
    def lock(self, node: TreeNode) -> None:
        """Full KV from node to the root; window KV over the last `window` tokens (`inc_lock_ref`)."""
        super().lock(node)
        at, locked, bound = node, 0, None
        while at is not self.root and locked < self.window:
            if at.swa_tombstone:
                raise ValueError(f"window lock on node {at.id}, whose window KV is freed")
            if at.swa_lock_ref == 0:
                self.swa_evictable_size -= len(at.key)
                self.swa_protected_size += len(at.key)
                self._swa_free.discard(at)
            at.swa_lock_ref += 1
            locked += len(at.key)
            if locked >= self.window:
                if at.swa_uuid is None:
                    at.swa_uuid = next(self._uuids)
                bound = at.swa_uuid
            at = at.parent
        self._bounds.setdefault(node, []).append(bound)

    def unlock(self, node: TreeNode) -> None:
        super().unlock(node)
        bounds = self._bounds[node]
        bound = bounds.pop()
        if not bounds:
            del self._bounds[node]
        at = node
        while at is not self.root:
            at.swa_lock_ref -= 1
            if at.swa_lock_ref == 0:
                self.swa_evictable_size += len(at.key)
                self.swa_protected_size -= len(at.key)
                self._swa_free.add(at)
            if bound is not None and at.swa_uuid == bound:
                break
            at = at.parent

    # -- eviction ----------------------------------------------------------------
    def evict(self, n_tokens: int) -> int:
        """Make room for n more tokens than the emptier pool has now (SGLang's `evict(full, swa)`
        with what each pool lacks). Returns the full slots freed."""
        full, swa = self.pool.full.available, self.pool.swa.available
        need = min(full, swa) + n_tokens
        freed, swa_freed = self._evict_leaves(need - full) if need > full else (0, 0)
        if swa_freed < need - swa:
            freed += self._evict_windows(need - swa - swa_freed)
        return freed

    def _evict_leaves(self, n_tokens: int) -> tuple[int, int]:
        """Unlocked leaves, least recently used first, with all their KV. Returns (full, window) freed."""
        heap = [(leaf.last_access, leaf) for leaf in self._leaves]
        heapq.heapify(heap)
        freed = swa = 0
        while freed < n_tokens and heap:
            stamp, leaf = heapq.heappop(heap)
            if leaf not in self._leaves or stamp != leaf.last_access:
                continue
            swa += 0 if leaf.swa_tombstone else len(leaf.key)
            n, parent = self._drop(leaf)
            freed += n
            candidate = self._tidy(parent)
            if candidate is not None:
                heapq.heappush(heap, (candidate.last_access, candidate))
        return freed, swa

    def _evict_windows(self, n_tokens: int) -> int:
        """Window KV of the least recently used live nodes no window lock holds (parents first at
        equal stamps): an inner or locked node becomes a tombstone, an unlocked leaf goes whole.
        Returns the full slots freed."""
        heap = [(x.last_access, x.start, x) for x in self._swa_free]
        heapq.heapify(heap)
        freed = swa = 0
        while swa < n_tokens and heap:
            stamp, _, x = heapq.heappop(heap)
            if x not in self._swa_free or stamp != x.last_access:
                continue
            swa += len(x.key)
            if x.children or x.lock_ref:
                self.pool.free_swa(x.value)
                x.swa_tombstone = True
                self.swa_evictable_size -= len(x.key)
                self._swa_free.discard(x)
            else:
                n, parent = self._drop(x)
                freed += n
                self._tidy(parent)
        return freed

    def _drop(self, node: TreeNode) -> tuple[int, TreeNode]:
        """Delete an unlocked leaf and every tombstone above it it leaves an unlocked leaf (SGLang's
        `_iteratively_delete_tombstone_leaf`). Returns the full slots freed and the first node kept."""
        freed = 0
        while True:
            if not node.swa_tombstone:
                self.swa_evictable_size -= len(node.key)
                self._swa_free.discard(node)
            n, parent = super()._drop(node)
            freed += n
            if parent is self.root or not parent.swa_tombstone or parent.children or parent.lock_ref:
                return freed, parent
            node = parent
