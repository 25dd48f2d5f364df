"""A layered drawing of the DFA (Sugiyama's scheme, hand-written): every edge that is not a
back edge points one or more layers to the right, states of a layer are ordered to cut
crossings, and the layers wrap into bands like lines of text so a long pattern fits a page.

Breadth-first depth is not enough: a state reached early by a short path but also late by
a long one (the ',' after a name of 3 to 8 letters) would sit left of the states that lead
to it. Longest-path layering on the graph without its back edges puts every state after
all of its predecessors.
"""

from __future__ import annotations

from collections.abc import Sequence


def back_edges(n: int, edges: Sequence[tuple[int, int]], start: int = 0) -> set[tuple[int, int]]:
    """Edges closing a cycle in a depth-first search from `start` (self-loops included)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, t in edges:
        succ[s].append(t)
    state = [0] * n  # 0 unseen, 1 on the stack, 2 done
    back: set[tuple[int, int]] = set()
    for root in [start, *range(n)]:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(sorted(set(succ[root]))))]
        while stack:
            s, todo = stack[-1]
            t = next(todo, None)
            if t is None:
                state[s] = 2
                stack.pop()
            elif state[t] == 1:
                back.add((s, t))
            elif state[t] == 0:
                state[t] = 1
                stack.append((t, iter(sorted(set(succ[t])))))
    return back


def layers(n: int, edges: Sequence[tuple[int, int]], start: int = 0) -> list[int]:
    """Longest-path layer of every state over the forward edges (the start is layer 0)."""
    back = back_edges(n, edges, start)
    forward = [(s, t) for s, t in set(edges) if (s, t) not in back]
    preds: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for s, t in forward:
        preds[t].append(s)
        indegree[t] += 1
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, t in forward:
        succ[s].append(t)
    layer = [0] * n
    ready = [s for s in range(n) if indegree[s] == 0]
    while ready:  # a topological order: forward edges form a DAG
        s = ready.pop()
        for t in succ[s]:
            layer[t] = max(layer[t], layer[s] + 1)
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    return layer


def order(layer: list[int], edges: Sequence[tuple[int, int]], sweeps: int = 4) -> list[int]:
    """Position of every state within its layer: barycentre sweeps left to right and back."""
    depth = max(layer, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for s in range(len(layer)):
        rows[layer[s]].append(s)
    nbrs: list[list[int]] = [[] for _ in layer]
    for s, t in set(edges):
        if s != t:
            nbrs[s].append(t)
            nbrs[t].append(s)
    slot = [0] * len(layer)
    for row in rows:
        for i, s in enumerate(row):
            slot[s] = i
    for sweep in range(sweeps):
        sequence = range(1, depth) if sweep % 2 == 0 else range(depth - 2, -1, -1)
        for d in sequence:
            side = d - 1 if sweep % 2 == 0 else d + 1

            def centre(s: int) -> float:
                near = [slot[t] for t in nbrs[s] if layer[t] == side]
                return sum(near) / len(near) if near else slot[s]

            rows[d].sort(key=lambda s: (centre(s), s))
            for i, s in enumerate(rows[d]):
                slot[s] = i
    return slot


def band_positions(layer: list[int], slot: list[int], per_band: int) -> list[tuple[float, float]]:
    """(x, y) of every state: layers wrap every `per_band` columns into bands stacked
    downwards, each band as tall as its widest layer plus a gap for arched edges."""
    widths: dict[int, int] = {}
    for s, d in enumerate(layer):
        widths[d] = max(widths.get(d, 0), slot[s] + 1)
    bands = max(layer, default=0) // per_band + 1
    tall = [max((widths[d] for d in widths if d // per_band == b), default=1) for b in range(bands)]
    tops = [-sum(h + 1.6 for h in tall[:b]) for b in range(bands)]
    out = []
    for s, d in enumerate(layer):
        b = d // per_band
        width = widths[d]
        out.append((float(d % per_band), tops[b] - (tall[b] - 1) / 2 + (width - 1) / 2 - slot[s]))
    return out
