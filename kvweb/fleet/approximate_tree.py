"""ApproximateTree: what SGLang's cache-aware router believes each worker has cached.

The router never sees a worker's cache. It keeps one radix tree over the prompts it has sent
(sgl-router `policies/tree.rs`, `Tree`): every node carries the set of tenants (workers) whose
requests passed through it, each with the time it last did, and the tree counts each tenant's
tokens. A prefix match walks the shared tree and names a tenant of the deepest node it reached;
inserting stamps the path for the chosen tenant. Periodically `evict` trims each tenant over its
size, least recently used leaves first (a node a tenant reaches but none of its children do is
that tenant's leaf); a node no tenant holds any more is cut off.

A tenant's nodes form a subtree that includes the root's side of each of its nodes, so the
tenant a match names has every matched token on a path it was sent. SGLang matches characters of
the request text; kvweb's requests are token ids, so tokens stand in for characters here. An edge holds its run as an int64 array, most often a view of the
request's own tokens (a tuple of Python ints took 40 bytes a token: 1.7 GB of a whole Mooncake trace's router).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

import numpy as np

from kvweb.prefix.radix_cache import _prefix_len

Tokens = Sequence[int] | np.ndarray


class Node:
    """One edge of the tree: a run of tokens, and the tenants that have it with their last use."""

    __slots__ = ("key", "children", "tenants", "parent", "id")

    def __init__(self, key: np.ndarray, parent: Node | None, node_id: int) -> None:
        self.key = key
        self.children: dict[int, Node] = {}
        self.tenants: dict[int, float] = {}  # tenant -> last access time
        self.parent = parent
        self.id = node_id  # creation order: eviction's tie-break


class ApproximateTree:
    def __init__(self, n_tenants: int) -> None:
        self._ids = itertools.count()
        self.root = Node(_run(()), None, next(self._ids))
        self.size = [0] * n_tenants  # tokens per tenant (SGLang's tenant_char_count)

    def insert(self, tokens: Tokens, tenant: int, now: float) -> None:
        """The router sent `tokens` to `tenant` at `now`: stamp (or add) the path for it."""
        run = _run(tokens)
        node, i = self.root, 0
        while i < len(run):
            first = int(run[i])
            child = node.children.get(first)
            if child is None:
                child = Node(run[i:], node, next(self._ids))
                node.children[first] = child
                i = len(run)
            else:
                k = _prefix_len(child.key, run[i:])
                if k < len(child.key):
                    child = self._split(child, k)
                i += k
            if tenant not in child.tenants:
                self.size[tenant] += len(child.key)
            child.tenants[tenant] = now
            node = child

    def prefix_match(self, tokens: Tokens, now: float) -> tuple[int, int | None]:
        """The longest prefix of `tokens` in the tree (a partly matched edge counts its matched
        tokens, as SGLang's does) and a tenant holding it: of the last node's tenants the most
        recently used (ties: the lowest index; SGLang takes its hash map's first). The path is
        stamped for that tenant. (0, None) when nothing matches."""
        run = _run(tokens)
        node, i = self.root, 0
        while i < len(run):
            child = node.children.get(int(run[i]))
            if child is None:
                break
            k = _prefix_len(child.key, run[i:])
            i, node = i + k, child
            if k < len(child.key):
                break
        if node is self.root:
            return 0, None
        tenant = min(node.tenants, key=lambda t: (-node.tenants[t], t))
        while node is not self.root:
            node.tenants[tenant] = now
            node = node.parent  # type: ignore[assignment]
        return i, tenant

    def smallest_tenant(self) -> int:
        """The tenant with the fewest tokens in the tree (ties: the lowest index)."""
        return min(range(len(self.size)), key=self.size.__getitem__)

    def evict(self, max_size: int) -> None:
        """Trim every tenant to at most `max_size` tokens, its least recently used leaves first
        (SGLang's `evict_tenant_by_size`)."""
        heap = []
        for node in self._nodes():
            for tenant in self._leaf_tenants(node):
                heap.append((node.tenants[tenant], node.id, tenant, node))
        heapq.heapify(heap)
        while heap:
            _, _, tenant, node = heapq.heappop(heap)
            if self.size[tenant] <= max_size or tenant not in node.tenants:
                continue
            del node.tenants[tenant]
            self.size[tenant] -= len(node.key)
            parent = node.parent
            assert parent is not None
            if not node.tenants:
                del parent.children[int(node.key[0])]
            if parent is not self.root and tenant in self._leaf_tenants(parent):
                heapq.heappush(heap, (parent.tenants[tenant], parent.id, tenant, parent))

    def _split(self, child: Node, k: int) -> Node:
        """Cut `child`'s edge after k tokens; the upper half keeps its tenants and stamps."""
        parent = child.parent
        assert parent is not None
        upper = Node(child.key[:k], parent, next(self._ids))
        upper.tenants = dict(child.tenants)
        child.key, child.parent = child.key[k:], upper
        upper.children[int(child.key[0])] = child
        parent.children[int(upper.key[0])] = upper
        return upper

    def _nodes(self) -> list[Node]:
        out, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    @staticmethod
    def _leaf_tenants(node: Node) -> set[int]:
        """The tenants for which `node` is a leaf: they hold it and none of its children."""
        below = set().union(*(c.tenants for c in node.children.values())) if node.children else set()
        return set(node.tenants) - below


def _run(tokens: Tokens) -> np.ndarray:
    """Tokens as int64 ids (an int64 array as it is: its edges are views of it)."""
    return np.asarray(tokens, dtype=np.int64)
