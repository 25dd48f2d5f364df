"""RadixCache: the KV cache as a radix tree over token runs (SGLang's RadixAttention).

Each edge holds a run of tokens and, beside it, the pool slots where those tokens' K and
V live. `match_prefix` finds the longest cached prefix of a request (splitting the edge
it ends inside, as SGLang's `_match_prefix_helper` does, so that a lock covers exactly the
matched tokens), `insert` adds a finished request (splitting a node where the new tokens
part ways), `lock` / `unlock` count the running requests reading a path so that it cannot
be evicted, and `evict` frees the least recently used unlocked leaves; a parent becomes a
leaf when its last child goes. `peek_length` gives a match's length with no effect at all: a
fleet's router asks every replica, and asking is not using.

LRU rule: a match or an insert ticks a logical clock and stamps every node on the path it
walks (root to its last node) with that time, and both halves of an edge it splits (SGLang
stamps the edge before cutting it). Locking stamps nothing (SGLang's inc_lock_ref). Stamps
therefore never decrease from a leaf towards the root, and eviction takes the unlocked leaf
with the oldest stamp first (ties: the older node), i.e. the least recently *used* leaf.
tests/test_parity_sglang.py checks all this against SGLang's own RadixCache.

Cached and running KV share one pool: a request that needs room calls `alloc`, which
evicts cache only as far as it must. There is no fixed cache partition.

Edges are never empty. As in SGLang, nodes are not merged back after a split: a node may
keep a single child, and its edge stays a unit of eviction.

A cache made with `record=True` keeps what changed the tree's shape since the last
`changes()` call (the nodes evicted, the nodes a split created), so a step-by-step trace
can draw evicted nodes as ghosts and mark splits; the record never alters the cache.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Tokens = Sequence[int] | np.ndarray
EMPTY = np.zeros(0, dtype=np.int64)
WIDTH = EMPTY.itemsize  # bytes of a token (int64)
_EPOCH = operator.attrgetter("epoch")


class TokenPool:
    """Slots for K and V, handed out a page at a time (page size 1: token-granular).

    Slot s lies in page s // page_size; an allocation takes whole pages, so the last
    page of a request may be partly empty until it is freed.
    """

    def __init__(self, size: int, page_size: int = 1) -> None:
        if page_size < 1 or size < 0:
            raise ValueError("pool size must be >= 0 and page size >= 1")
        self.page_size = page_size
        self.pages = size // page_size
        self.size = self.pages * page_size
        self._free = np.arange(self.pages, dtype=np.int32)[::-1].copy()  # a stack: page 0 on top
        self._n_free = self.pages
        self._in_use = np.zeros(self.pages, dtype=bool)

    @property
    def available(self) -> int:
        return self._n_free * self.page_size

    @property
    def used(self) -> int:
        return self.size - self.available

    def pages_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.page_size)

    def alloc(self, n_tokens: int) -> np.ndarray | None:
        """Slots for n tokens, or None when too few pages are free."""
        k = self.pages_for(n_tokens)
        if k > self._n_free:
            return None
        pages = self._free[self._n_free - k : self._n_free][::-1].astype(np.int64)
        self._n_free -= k
        self._in_use[pages] = True
        p = self.page_size
        if p == 1:  # a slot per page: the pages are the slots
            return pages
        return (pages[:, None] * p + np.arange(p)).ravel()[:n_tokens]

    def free(self, slots: np.ndarray) -> None:
        """Give back the pages of `slots`, a run that starts on a page boundary."""
        pages = slots if self.page_size == 1 else slots[:: self.page_size] // self.page_size
        if np.count_nonzero(self._in_use[pages]) < len(pages):  # not `.all()`: a Python wrapper, slower
            raise ValueError("freeing a slot that is not in use")
        self._in_use[pages] = False
        self._free[self._n_free : self._n_free + len(pages)] = pages
        self._n_free += len(pages)


class TreeNode:
    """One edge of the tree and the node below it: a token run and its KV slots."""

    __slots__ = ("id", "key", "raw", "value", "parent", "children", "lock_ref", "last_access", "end", "epoch")

    def __init__(self, node_id: int, key: np.ndarray, value: np.ndarray, parent: TreeNode | None) -> None:
        self.id = node_id
        self.key = key  # the tokens on the edge into this node
        self.raw = key.tobytes()  # the same as bytes: walks compare runs against it
        self.value = value  # their pool slots
        self.parent = parent
        self.children: dict[Any, TreeNode] = {}
        self.lock_ref = 0  # running requests whose cached prefix runs through here
        self.last_access = 0
        self.end = False  # an inserted sequence ends here
        self.epoch = 0  # counts the changes of this edge (split, evicted): see `match_length`

    def __lt__(self, other: TreeNode) -> bool:  # heap ties: older node first
        return self.id < other.id


@dataclass(frozen=True)
class Changes:
    """What changed the tree's shape between two `changes()` calls."""

    evicted: list[tuple[int, TreeNode]]  # (former parent id, node), in eviction order
    split: list[int]  # ids of the upper nodes splits created


@dataclass(frozen=True)
class _Walk:
    """A remembered `match_length` walk, and the epochs of its nodes when it was taken."""

    tokens: Tokens  # held, so that no other object takes its id while this is kept
    length: int
    path: list[TreeNode]  # the nodes stamped, from the last one up, root excluded
    epochs: int  # their sum: none changed while it is the same (epochs only grow)
    end: TreeNode  # the last node (the root when nothing matched)
    follow: Any  # the key of the child of `end` that would take the walk further (None: no tokens left)


@dataclass(frozen=True)
class Match:
    """The longest cached prefix: its length, its slots, and the node to lock to keep it.

    The match always ends at `node` (an edge it ended inside was split there), so locking
    `node` protects exactly the matched tokens.
    """

    length: int
    slots: np.ndarray
    node: TreeNode


class RadixCache:
    """The radix tree over its token pool (see the module docstring). methods: 24, the verbs of
    SGLang's own `RadixCache` (match, insert, split, lock, unlock, evict, each with its helper),
    which SGLang keeps in one class."""

    node_class = TreeNode  # a subclass may keep more per node (swa_radix_cache.SWANode)

    def __init__(self, size: int, page_size: int = 1, record: bool = False) -> None:
        self.pool = TokenPool(size, page_size)
        self.page_size = page_size
        self._ids = itertools.count()
        self.root = self.node_class(next(self._ids), EMPTY, EMPTY, None)
        self.root.lock_ref = 1  # never evicted, never merged
        self.clock = 0  # logical time of the last operation (LRU order)
        self.evictable_size = 0  # cached tokens in unlocked nodes
        self.protected_size = 0  # cached tokens in locked nodes
        self._leaves: set[TreeNode] = set()  # unlocked leaves: the eviction candidates
        self._record = record
        self._evicted: list[tuple[int, TreeNode]] = []
        self._split_ids: list[int] = []
        self._walks: dict[int, _Walk] = {}  # id(tokens) -> their last walk (`match_length(remember=True)`)

    def changes(self) -> Changes:
        """Nodes evicted and split since the last call (empty unless made with record=True)."""
        done = Changes(self._evicted, self._split_ids)
        self._evicted, self._split_ids = [], []
        return done

    @property
    def cached_size(self) -> int:
        return self.evictable_size + self.protected_size

    # -- lookups ----------------------------------------------------------
    def _child_key(self, run: np.ndarray, i: int) -> Any:
        """Children are told apart by their first page of tokens."""
        if self.page_size == 1:
            return int(run[i])
        return run[i : i + self.page_size].tobytes()

    def _common(self, node: TreeNode, run: np.ndarray, i: int, data: bytes) -> int:
        """Length of the common prefix of node's edge and run[i:], in whole pages. `data` is
        run.tobytes(): a whole edge matches most often, and bytes tell that quickest."""
        if data.startswith(node.raw, WIDTH * i):
            return len(node.key)  # edges hold whole pages
        k = _prefix_len(node.key, run[i:])
        return k - k % self.page_size

    def _tokens(self, tokens: Tokens) -> np.ndarray:
        run = np.asarray(tokens, dtype=np.int64)
        return run if self.page_size == 1 else run[: len(run) - len(run) % self.page_size]

    def match_prefix(self, tokens: Tokens, remember: bool = False) -> Match:
        """The longest cached prefix of `tokens` (whole pages). Splits the edge the match
        ends inside and stamps the matched path as used now (see the LRU rule above).
        `remember`: see `match_length`."""
        walk = self._replay(tokens) if remember else None
        if walk is not None:
            slots = np.concatenate([node.value for node in reversed(walk.path)]) if walk.path else EMPTY
            return Match(walk.length, slots, walk.end)
        parts: list[np.ndarray] = []
        i, node = self._match(tokens, parts)
        slots = np.concatenate(parts) if parts else EMPTY
        return Match(i, slots, node)

    def match_length(self, tokens: Tokens, remember: bool = False) -> int:
        """`match_prefix(tokens).length`, with the same effects on the tree (splits and LRU
        stamps), without gathering the slots: what a scheduler asks of every waiting request.

        A scheduler asks again about the same requests every step. With `remember`, the path
        walked for these tokens is kept (by identity: the same object must hold the same tokens)
        and only stamped again while it is still the walk: no node on it was split or evicted
        and its last node (or the root, when nothing matched) has no child to take it further.
        """
        walk = self._replay(tokens) if remember else None
        if walk is not None:
            return walk.length
        length, end = self._match(tokens, None)
        if remember:
            path = []
            node = end
            while node is not self.root:
                path.append(node)
                node = node.parent
            run = self._tokens(tokens)
            follow = self._child_key(run, length) if length < len(run) else None
            self._walks[id(tokens)] = _Walk(tokens, length, path, sum(map(_EPOCH, path)), end, follow)
        return length

    def peek_length(self, tokens: Tokens) -> int:
        """`match_length(tokens)` without its effects (no split, no LRU stamp): a router asks
        every replica, and asking is not using, so the cache must stay as it was."""
        run = self._tokens(tokens)
        data = run.tobytes()
        node, i = self.root, 0
        while i < len(run):
            child = node.children.get(self._child_key(run, i))
            if child is None:
                break
            k = self._common(child, run, i, data)
            i, node = i + k, child
            if k < len(child.key):
                break
        return i

    def _replay(self, tokens: Tokens) -> _Walk | None:
        """The remembered walk of `tokens`, stamped as a new walk, if it is still the walk."""
        walk = self._walks.get(id(tokens))
        if walk is None or walk.follow in walk.end.children or sum(map(_EPOCH, walk.path)) != walk.epochs:
            return None
        self.clock += 1
        for node in walk.path:
            node.last_access = self.clock
        return walk

    def _match(self, tokens: Tokens, parts: list[np.ndarray] | None) -> tuple[int, TreeNode]:
        """Walk the longest cached prefix (see `match_prefix`); the slots of its edges go to
        `parts` unless it is None. Returns the match's length and its last node."""
        run = self._tokens(tokens)
        data = run.tobytes()
        self.clock += 1
        node, i, n, p = self.root, 0, len(run), self.page_size
        while i < n:  # `_child_key` spelt out, the page cut from `data`: this is the hot loop
            child = node.children.get(int(run[i]) if p == 1 else data[WIDTH * i : WIDTH * (i + p)])
            if child is None:
                break
            k = self._common(child, run, i, data)
            child.last_access = self.clock  # before a split: both halves of the edge walked are stamped
            if k < len(child.key):
                child = self._split(child, k)
            if parts is not None:
                parts.append(child.value)
            node, i = child, i + k
        return i, node

    # -- insert -----------------------------------------------------------
    def insert(self, tokens: Tokens, slots: np.ndarray) -> int:
        """Cache `tokens` whose KV sits in `slots`; the cache takes ownership of the slots.

        Tokens already cached keep the tree's slots (the caller's copies are freed), as
        does any tail shorter than a page. Returns how many tokens were already cached.
        """
        slots = np.asarray(slots, dtype=np.int64)
        if len(slots) < len(tokens):
            raise ValueError("insert needs one slot per token")
        self.clock += 1
        return self._insert(self._tokens(tokens), self.root, 0, slots)

    def extend(self, match: Match, tokens: Tokens, fresh: np.ndarray) -> int:
        """`insert(tokens, np.concatenate([match.slots, fresh]))`, where `match` is the match of a
        prefix of `tokens`, still locked (so still in the tree as matched): a request that ran
        caches its tokens. The matched path is stamped, not walked again."""
        fresh = np.asarray(fresh, dtype=np.int64)
        if match.length + len(fresh) < len(tokens):
            raise ValueError("insert needs one slot per token")
        self.clock += 1
        node = match.node
        while node is not self.root:
            node.last_access = self.clock
            node = node.parent
        return self._insert(self._tokens(tokens), match.node, match.length, fresh)

    def _insert(self, run: np.ndarray, node: TreeNode, i: int, slots: np.ndarray) -> int:
        """The insert walk from `node`, where run[:i] ends: `slots` are those of run[i:] and on."""
        data = run.tobytes()
        start = i
        while i < len(run):
            child = node.children.get(self._child_key(run, i))
            if child is None:
                node = self._add_leaf(node, run[i:], slots[i - start : len(run) - start])
                break
            k = self._common(child, run, i, data)
            self._free_copies(slots[i - start : i - start + k], child.value[:k])
            child.last_access = self.clock
            if k < len(child.key):
                child = self._split(child, k)
            node, i = child, i + k
        already = i
        if node is not self.root:
            node.end = True
        if len(slots) > len(run) - start:
            self.pool.free(slots[len(run) - start :])
        return already

    def _free_copies(self, given: np.ndarray, kept: np.ndarray) -> None:
        if given.tobytes() != kept.tobytes():  # most often the tree's own (a match's): quickest asked so
            self.pool.free(given[given != kept])

    def _add_leaf(self, parent: TreeNode, key: np.ndarray, value: np.ndarray) -> TreeNode:
        leaf = self.node_class(next(self._ids), key, value, parent)
        leaf.last_access = self.clock
        parent.children[self._child_key(key, 0)] = leaf
        self._leaves.discard(parent)
        self._leaves.add(leaf)
        self.evictable_size += len(key)
        return leaf

    def _split(self, child: TreeNode, k: int) -> TreeNode:
        """Cut `child`'s edge after k tokens; the new upper node is returned."""
        parent = child.parent
        assert parent is not None
        upper = self.node_class(next(self._ids), child.key[:k], child.value[:k], parent)
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        upper.children[self._child_key(child.key, k)] = child
        parent.children[self._child_key(child.key, 0)] = upper
        child.epoch += 1
        child.key, child.raw, child.value, child.parent = child.key[k:], child.raw[WIDTH * k :], child.value[k:], upper
        if self._record:
            self._split_ids.append(upper.id)
        return upper

    def _tidy(self, node: TreeNode) -> TreeNode | None:
        """After `node` lost its lock or a child: if it is now an unlocked leaf, it
        becomes an eviction candidate (returned)."""
        if node is self.root or node.lock_ref or node.children:
            return None
        self._leaves.add(node)
        return node

    # -- reference counts -------------------------------------------------
    def lock(self, node: TreeNode) -> None:
        """A running request reads the path root..node: protect it from eviction."""
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size -= len(node.key)
                self.protected_size += len(node.key)
                self._leaves.discard(node)
            node.lock_ref += 1
            assert node.parent is not None
            node = node.parent

    def unlock(self, node: TreeNode) -> None:
        released = []
        while node is not self.root:
            if node.lock_ref == 0:
                raise ValueError(f"unlock of node {node.id}, which is not locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.evictable_size += len(node.key)
                self.protected_size -= len(node.key)
                released.append(node)
            assert node.parent is not None
            node = node.parent
        for node in released:
            self._tidy(node)

    # -- eviction and the shared pool -------------------------------------
    def evict(self, n_tokens: int) -> int:
        """Free at least n tokens of cache, least recently used unlocked leaves first
        (fewer when too little is unlocked). Returns how many were freed."""
        heap = [(leaf.last_access, leaf) for leaf in self._leaves]
        heapq.heapify(heap)
        freed = 0
        while freed < n_tokens and heap:
            stamp, leaf = heapq.heappop(heap)
            if leaf not in self._leaves or stamp != leaf.last_access:
                continue  # stale entry: locked or re-stamped since
            n, parent = self._drop(leaf)
            freed += n
            candidate = self._tidy(parent)
            if candidate is not None:
                heapq.heappush(heap, (candidate.last_access, candidate))
        return freed

    def _drop(self, leaf: TreeNode) -> tuple[int, TreeNode]:
        """Delete an unlocked leaf and free its slots; returns how many and its parent (a cache
        that keeps more per node, such as a state, drops that too and may take the parent along)."""
        self._leaves.discard(leaf)
        self.pool.free(leaf.value)
        self.evictable_size -= len(leaf.key)
        parent = leaf.parent
        assert parent is not None
        del parent.children[self._child_key(leaf.key, 0)]
        leaf.parent = None
        leaf.epoch += 1
        if self._record:
            self._evicted.append((parent.id, leaf))
        return len(leaf.key), parent

    def alloc(self, n_tokens: int) -> np.ndarray | None:
        """Slots for a running request's new tokens, evicting cache only if the pool is
        short. None when even evicting every unlocked leaf would not make room."""
        short = self.pool.pages_for(n_tokens) * self.page_size - self.pool.available
        if short > 0:
            self.evict(short)
        return self.pool.alloc(n_tokens)

    # -- drawing ----------------------------------------------------------
    def describe(
        self, tokens: Tokens = (), hit: int = 0, max_run: int = 48, changes: Changes | None = None
    ) -> dict[str, Any]:
        """A plain description of the tree for drawing: each node spans token positions
        [start, start + size) and leaf rows [row, row + rows); `depth` counts edges from the root.

        With `tokens`, each node says how many of its tokens lie on that request's path
        (`path`) and how many of those the request read from the cache (`hit`, the first
        `hit` tokens of the path). With `changes`, nodes a split created say `split`, and the
        nodes evicted come back as `ghost` entries under their former parent. Edge runs are
        cut to `max_run` tokens.
        """
        run = np.asarray(tokens, dtype=np.int64)
        split = set(changes.split) if changes else set()
        ghosts: dict[int, list[TreeNode]] = {}
        for parent_id, node in changes.evicted if changes else ():
            ghosts.setdefault(parent_id, []).append(node)
        nodes: list[dict[str, Any]] = []
        row = 0

        def visit(node: TreeNode, start: int, depth: int, on_path: bool, ghost: bool, parent: int | None) -> None:
            nonlocal row
            path = _prefix_len(node.key, run[start:]) if on_path else 0
            entry = {
                "id": node.id,
                "parent": parent,
                "start": start,
                "size": len(node.key),
                "row": row,
                "rows": 0,
                "depth": depth,
                "lock": 0 if node is self.root or ghost else node.lock_ref,
                "last_access": node.last_access,
                "end": node.end,
                "tokens": node.key[:max_run].tolist(),
                "path": path,
                "hit": max(0, min(path, hit - start)),
                "split": node.id in split,
                "ghost": ghost,
            }
            nodes.append(entry)
            first = row
            below = on_path and path == len(node.key)
            kids = [(node.children[key], False) for key in sorted(node.children)]
            kids += [(g, True) for g in sorted(ghosts.get(node.id, ()), key=lambda g: int(g.key[0]))]
            for child, gone in kids:
                visit(child, start + len(node.key), depth + 1, below and not gone, gone, node.id)
            if not kids:
                row += 1
            entry["rows"] = row - first

        visit(self.root, 0, 0, len(run) > 0, False, None)
        return {
            "nodes": nodes,
            "leaves": row,
            "clock": self.clock,
            "page_size": self.page_size,
            "pool_size": self.pool.size,
            "pool_used": self.pool.used,
            "cached": self.cached_size,
            "evictable": self.evictable_size,
            "protected": self.protected_size,
        }


def _prefix_len(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    if a[:m].tobytes() == b[:m].tobytes():  # the usual case, and quicker to ask as bytes
        return m
    return int((a[:m] == b[:m]).argmin())


class RuledMatch(RadixCache):
    """A radix cache whose match may end only where its rule allows (SGLang's window and Mamba
    caches): every lookup is one `_walk`, which keeps as much of the path it walked as the cache's
    rule (`_kept`) allows; walks are not remembered, since the rule depends on what the nodes
    still hold."""

    def _kept(self, path: list[tuple[TreeNode, int, bool]]) -> int:
        """How many nodes of the walked `path` the match keeps; each entry is (node, tokens
        matched up to its end, whether it matched whole)."""
        raise NotImplementedError

    def _walk(self, tokens: Tokens, parts: list[np.ndarray] | None, effects: bool) -> tuple[int, TreeNode]:
        """The longest prefix the rule allows, and its last node. With `effects` it splits the edge
        the walk ends inside and stamps the path to the match's end (and the halves of a split) as
        used now: nodes walked past it are not (SGLang's `_match_post_processor`)."""
        run = self._tokens(tokens)
        data = run.tobytes()
        node, i = self.root, 0
        path: list[tuple[TreeNode, int, bool]] = []
        if effects:
            self.clock += 1
        while i < len(run):
            child = node.children.get(int(run[i]))
            if child is None:
                break
            k = self._common(child, run, i, data)
            whole = k == len(child.key)
            if effects and not whole:  # a split puts both halves at the front (SGLang's `_split_node`)
                child.last_access = self.clock
                child = self._split(child, k)
            node, i = child, i + k
            path.append((child, i, whole))
            if not whole:
                break
        n = self._kept(path)
        end, length, _ = path[n - 1] if n else (self.root, 0, True)
        if parts is not None:
            parts += (walked.value for walked, _, _ in path[:n])
        if effects:
            up = end
            while up is not self.root:
                up.last_access = self.clock
                up = up.parent
        return length, end

    def _match(self, tokens: Tokens, parts: list[np.ndarray] | None) -> tuple[int, TreeNode]:
        return self._walk(tokens, parts, True)

    def match_length(self, tokens: Tokens, remember: bool = False) -> int:
        return self._walk(tokens, None, True)[0]

    def peek_length(self, tokens: Tokens) -> int:
        return self._walk(tokens, None, False)[0]
