"""RadixCache against a brute-force model: a prefix-closed set of cached token tuples."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.prefix.radix_cache import RadixCache, TreeNode, TokenPool

seqs = st.lists(st.integers(0, 2), min_size=0, max_size=12)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), seqs),
        st.tuples(st.just("lock"), seqs),
        st.tuples(st.just("unlock"), st.integers(0, 50)),
        st.tuples(st.just("evict"), st.integers(0, 20)),
        st.tuples(st.just("match"), seqs),
    ),
    max_size=40,
)


def path_of(node: TreeNode) -> tuple[int, ...]:
    parts = []
    while node.parent is not None:
        parts.append(node.key.tolist())
        node = node.parent
    return tuple(t for part in reversed(parts) for t in part)


def tree_prefixes(cache: RadixCache) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Every cached page-aligned prefix (as a tuple) -> the slots of its last page."""
    p = cache.page_size
    out: dict[tuple[int, ...], tuple[int, ...]] = {}
    stack = [(cache.root, ())]
    while stack:
        node, prefix = stack.pop()
        for child in node.children.values():
            keys, values, run = child.key.tolist(), child.value.tolist(), prefix
            for i in range(0, len(keys), p):
                run = (*run, *keys[i : i + p])
                out[run] = tuple(values[i : i + p])
            stack.append((child, run))
    return out


def check_tree(cache: RadixCache, held: list[TreeNode]) -> None:
    """The structural rules, the lock counts and the exact size accounting."""
    p = cache.page_size
    expected_locks: dict[int, int] = {}
    for node in held:
        while node is not cache.root:
            expected_locks[node.id] = expected_locks.get(node.id, 0) + 1
            node = node.parent
    evictable = protected = 0
    slots: list[int] = []
    leaves = set()
    stack = [cache.root]
    while stack:
        node = stack.pop()
        for key, child in node.children.items():
            assert child.parent is node
            assert len(child.key) > 0 and len(child.key) % p == 0, "empty or ragged edge"
            assert len(child.key) == len(child.value)
            assert key == cache._child_key(child.key, 0)
            assert child.lock_ref == expected_locks.get(child.id, 0)
            assert child.last_access <= node.last_access or node is cache.root, "a parent older than its child"
            if child.lock_ref:
                protected += len(child.key)
            else:
                evictable += len(child.key)
                if not child.children:
                    leaves.add(child)
            slots += child.value.tolist()
            stack.append(child)
    assert cache._leaves == leaves
    assert (cache.evictable_size, cache.protected_size) == (evictable, protected)
    assert len(set(slots)) == len(slots), "two tokens share a slot"
    assert cache.pool.used == cache.pool.pages_for(len(slots)) * p == len(slots)
    assert all(cache.pool._in_use[s // p] for s in slots)


def brute_match(live: set[tuple[int, ...]], query: list[int], p: int) -> int:
    best = 0
    for i in range(p, len(query) - len(query) % p + 1, p):
        if tuple(query[:i]) in live:
            best = i
    return best


@settings(max_examples=150, deadline=None)
@given(page=st.sampled_from([1, 1, 2, 3]), size=st.integers(0, 30), program=ops)
def test_random_programs_keep_a_valid_radix_tree(page: int, size: int, program: list) -> None:
    cache = RadixCache(size, page)
    live: dict[tuple[int, ...], tuple[int, ...]] = {}  # the model: cached prefix -> its last page's slots
    held: list[TreeNode] = []
    held_paths: list[tuple[int, ...]] = []
    for op, arg in program:
        before = cache.cached_size
        if op == "insert":
            m = cache.match_prefix(arg)
            cache.lock(m.node)
            fresh = cache.alloc(len(arg) - m.length)
            live = {k: v for k, v in live.items() if k in tree_prefixes(cache)}  # what alloc evicted
            if fresh is not None:
                slots = np.concatenate([m.slots, fresh])
                already = cache.insert(arg, slots)
                assert already == m.length
                for i in range(page, len(arg) + 1, page):
                    live.setdefault(tuple(arg[:i]), tuple(slots[i - page : i].tolist()))
            cache.unlock(m.node)
        elif op == "lock":
            m = cache.match_prefix(arg)
            if m.length:
                cache.lock(m.node)
                held.append(m.node)
                held_paths.append(path_of(m.node))
        elif op == "unlock" and held:
            i = arg % len(held)
            cache.unlock(held.pop(i))
            held_paths.pop(i)
        elif op == "evict":
            freed = cache.evict(arg)
            assert freed >= arg or cache.evictable_size == 0
            assert freed == before - cache.cached_size
        elif op == "match":
            clock, shape = cache.clock, cache.describe()
            assert cache.peek_length(arg) == brute_match(set(live), arg, page)  # a router's probe...
            assert (cache.clock, cache.describe()) == (clock, shape)  # ...changes nothing
            m = cache.match_prefix(arg)
            assert m.length == brute_match(set(live), arg, page)
            assert m.slots.tolist() == [s for i in range(page, m.length + 1, page) for s in live[tuple(arg[:i])]]
        cached = tree_prefixes(cache)
        evicted = before - cache.cached_size if op != "insert" else 0
        assert set(cached) <= set(live), "the tree holds something never inserted"
        if op != "insert":
            assert (len(live) - len(cached)) * page == evicted
        live = {k: v for k, v in live.items() if k in cached}
        assert cached == live, "a cached token moved to another slot"
        check_tree(cache, held)
        for node, path in zip(held, held_paths):
            assert node.parent is not None and cache.match_prefix(path).length == len(path), "locked path lost"


def test_split_on_insert_and_lru_eviction_by_hand() -> None:
    cache = RadixCache(10)
    cache.insert([1, 2, 3, 4], cache.alloc(4))
    m = cache.match_prefix([1, 2, 7])
    assert (m.length, m.slots.tolist()) == (2, [0, 1])
    cache.lock(m.node)
    assert cache.insert([1, 2, 7, 8], np.concatenate([m.slots, cache.alloc(2)])) == 2
    cache.unlock(m.node)
    sizes = sorted((n["start"], n["size"]) for n in cache.describe()["nodes"])
    assert sizes == [(0, 0), (0, 2), (2, 2), (2, 2)]  # root, [1 2], [3 4], [7 8]
    assert cache.evictable_size == 6 and cache.pool.used == 6
    # [3 4] is the least recently used leaf: it goes first; [1 2] stays a node of its own
    assert cache.evict(1) == 2
    assert sorted((n["start"], n["size"]) for n in cache.describe()["nodes"]) == [(0, 0), (0, 2), (2, 2)]
    assert cache.match_prefix([1, 2, 3]).length == 2


def test_a_match_inside_an_edge_splits_it_and_locks_only_the_match() -> None:
    """The bug of issue 10: a lock taken after a match that ends inside an edge covered
    the whole edge, so a request that fits the pool could not get room."""
    cache = RadixCache(10)
    cache.insert([1, 2, 3, 4, 5, 6], cache.alloc(6))
    m = cache.match_prefix([1, 2, 9])
    assert m.length == 2 and m.node.key.tolist() == [1, 2]
    cache.lock(m.node)
    assert (cache.protected_size, cache.evictable_size) == (2, 4)
    # 8 new tokens: 4 free + the 4 unmatched tokens [3 4 5 6], which are not locked
    fresh = cache.alloc(8)
    assert fresh is not None
    assert cache.insert([1, 2, *range(10, 18)], np.concatenate([m.slots, fresh])) == 2
    cache.unlock(m.node)
    assert cache.match_prefix([1, 2, 3]).length == 2 and cache.cached_size == 10


def test_a_match_refreshes_the_path_so_eviction_takes_the_least_recently_used() -> None:
    cache = RadixCache(20)
    for run in ([1, 1, 1], [2, 2, 2], [3, 3, 3]):
        cache.insert(run, cache.alloc(3))
    assert cache.match_prefix([1, 1, 1, 5]).length == 3  # [1 1 1] read: now the newest
    assert cache.evict(4) == 6  # [2 2 2], then [3 3 3]; [1 1 1] stays
    assert cache.match_prefix([1, 1, 1]).length == 3
    assert cache.match_prefix([2]).length == 0 and cache.match_prefix([3]).length == 0


def test_alloc_evicts_only_what_it_needs_and_never_a_locked_path() -> None:
    cache = RadixCache(8)
    cache.insert([1, 1, 1], cache.alloc(3))
    cache.insert([2, 2, 2], cache.alloc(3))
    held = cache.match_prefix([2, 2, 2]).node
    cache.lock(held)
    assert cache.alloc(4) is not None  # 2 free + the 3 tokens of [1 1 1]
    assert cache.match_prefix([1, 1, 1]).length == 0
    assert cache.protected_size == 3 and cache.evictable_size == 0
    assert cache.alloc(2) is None  # only the locked path is left
    cache.unlock(held)
    assert cache.alloc(2) is not None


def test_pages_cache_whole_pages_only() -> None:
    cache = RadixCache(16, page_size=4)
    slots = cache.alloc(10)
    assert cache.pool.used == 12  # three pages, the last one half empty
    cache.insert(list(range(10)), slots)
    assert cache.pool.used == 8 and cache.cached_size == 8  # the half page went back
    assert cache.match_prefix(list(range(7))).length == 4
    assert cache.match_prefix([0, 1, 2, 3, 4, 5, 6, 9]).length == 4  # diverges inside page 2


def test_double_free_is_refused() -> None:
    pool = TokenPool(4)
    slots = pool.alloc(2)
    pool.free(slots)
    with pytest.raises(ValueError, match="not in use"):
        pool.free(slots)


class Reference:
    """A brute-force radix cache: a dict from each cached page-aligned prefix to its LRU
    stamp and lock count, with SGLang's rules written out position by position. Node
    boundaries matter to one rule only (a walk that stops inside an edge cuts it there and
    stamps its lower part too), so the prefixes where an edge ends are kept as well."""

    def __init__(self, page: int) -> None:
        self.page = page
        self.clock = 0
        self.stamp: dict[tuple[int, ...], int] = {}
        self.locks: dict[tuple[int, ...], int] = {}
        self.ends: set[tuple[int, ...]] = set()  # cached prefixes where an edge ends

    def prefixes(self, run: list[int]) -> list[tuple[int, ...]]:
        return [tuple(run[:i]) for i in range(self.page, len(run) + 1, self.page)]

    def cut(self, prefix: tuple[int, ...]) -> None:
        """A walk stopped at `prefix`: inside an edge, the edge is split there and the rest of it
        (the one chain of cached prefixes up to the edge's end) is stamped like the walked path."""
        if not prefix or prefix in self.ends:
            return
        self.ends.add(prefix)
        while True:
            longer = [k for k in self.stamp if len(k) == len(prefix) + self.page and k[: len(prefix)] == prefix]
            if not longer:
                return
            prefix = longer[0]
            self.stamp[prefix] = self.clock
            if prefix in self.ends:
                return

    def match(self, run: list[int]) -> int:
        self.clock += 1
        length, last = 0, ()
        for prefix in self.prefixes(run):
            if prefix not in self.stamp:
                break
            self.stamp[prefix], length, last = self.clock, len(prefix), prefix
        self.cut(last)
        return length

    def lock(self, path: tuple[int, ...], delta: int) -> None:
        for prefix in self.prefixes(list(path)):
            self.locks[prefix] = self.locks.get(prefix, 0) + delta

    def insert(self, run: list[int]) -> None:
        self.clock += 1
        cached = [k for k in self.prefixes(run) if k in self.stamp]
        self.cut(cached[-1] if cached else ())  # before the new tokens branch off there
        for prefix in self.prefixes(run):
            self.stamp[prefix] = self.clock
        if self.prefixes(run):
            self.ends.add(self.prefixes(run)[-1])

    def unlocked(self) -> set[tuple[int, ...]]:
        return {k for k in self.stamp if not self.locks.get(k)}

    def check_eviction(self, kept: set[tuple[int, ...]], wanted: int) -> None:
        """`kept`: what the cache still holds after evicting at least `wanted` tokens."""
        gone = set(self.stamp) - kept
        unlocked = self.unlocked()
        assert gone <= unlocked, "a locked token was evicted"
        assert len(gone) * self.page >= min(wanted, len(unlocked) * self.page), "evicted too little"
        leaves = {k for k in kept & unlocked if not any(len(o) > len(k) and o[: len(k)] == k for o in kept)}
        if gone and leaves:
            assert max(self.stamp[k] for k in gone) <= min(self.stamp[k] for k in leaves), "not least recent"
        for k in gone:
            del self.stamp[k]
        self.ends -= gone


def tree_state(cache: RadixCache) -> dict[tuple[int, ...], tuple[int, int]]:
    """Every cached page-aligned prefix -> (its node's LRU stamp, its node's lock count)."""
    p = cache.page_size
    out: dict[tuple[int, ...], tuple[int, int]] = {}
    stack = [(cache.root, ())]
    while stack:
        node, prefix = stack.pop()
        for child in node.children.values():
            run, keys = prefix, child.key.tolist()
            for i in range(0, len(keys), p):
                run = (*run, *keys[i : i + p])
                out[run] = (child.last_access, child.lock_ref)
            stack.append((child, run))
    return out


@settings(max_examples=200, deadline=None)
@given(page=st.sampled_from([1, 1, 2]), size=st.integers(0, 24), program=ops)
def test_radix_cache_equals_the_brute_force_reference(page: int, size: int, program: list) -> None:
    """Match lengths, tokens held, lock counts and LRU stamps equal the reference after
    every operation; every eviction (by `evict` or inside `alloc`) spares locked tokens,
    frees enough, and takes no token more recently used than a leaf it keeps."""
    cache, ref = RadixCache(size, page), Reference(page)
    held: list[tuple[TreeNode, tuple[int, ...]]] = []
    for op, arg in program:
        if op in ("insert", "lock", "match"):
            m = cache.match_prefix(arg)
            assert m.length == ref.match(arg)
        if op == "insert":
            path = tuple(arg[: m.length])
            cache.lock(m.node)
            ref.lock(path, +1)
            short = cache.pool.pages_for(len(arg) - m.length) * page - cache.pool.available
            fresh = cache.alloc(len(arg) - m.length)
            ref.check_eviction(set(tree_state(cache)), max(short, 0))
            if fresh is not None:
                cache.insert(arg, np.concatenate([m.slots, fresh]))
                ref.insert(arg)
            cache.unlock(m.node)
            ref.lock(path, -1)
        elif op == "lock" and m.length:
            cache.lock(m.node)
            ref.lock(tuple(arg[: m.length]), +1)
            held.append((m.node, tuple(arg[: m.length])))
        elif op == "unlock" and held:
            node, path = held.pop(arg % len(held))
            cache.unlock(node)
            ref.lock(path, -1)
        elif op == "evict":
            cache.evict(arg)
            ref.check_eviction(set(tree_state(cache)), arg)
        assert tree_state(cache) == {k: (ref.stamp[k], ref.locks.get(k, 0)) for k in ref.stamp}
        assert cache.protected_size == page * sum(1 for k in ref.stamp if ref.locks.get(k))
