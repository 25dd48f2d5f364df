"""NFA -> DFA by subset construction, then trimmed and minimised.

A DFA state is the set of NFA states the input could have reached, so an ambiguous
pattern such as `[a-z]{1,8}and[0-9]` needs no backtracking: after "band" the DFA is in
"still inside the word" and "after the literal 'and'" at once.

The alphabet is first cut into classes of characters that no label tells apart (for
`[a-z]{1,8}and[0-9]`: a, n, d, the other letters, digits, everything else), so the
construction loops over a handful of classes instead of 95 characters. A cap on DFA
states turns a subset explosion such as `(a|b)*a(a|b){25}` into an error at once.

The result keeps only live states (those from which acceptance is still reachable):
a transition missing from the table is a character that would kill the match, which
is exactly the mask constrained decoding needs.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from kvweb.kv.model import VOCAB
from kvweb.constrained.nfa import MAX_NFA_STATES, NFA, build_nfa
from kvweb.constrained.regex_parser import FULL, PatternError, parse

MAX_DFA_STATES = 4_000


@dataclass(frozen=True)
class DFA:
    """`table[s, c]`: the state after character id c, or -1 where c kills the match.

    State 0 is the start; states are numbered in breadth-first order from it.
    """
    table: np.ndarray      # [states, len(VOCAB)] int32
    accepting: np.ndarray  # [states] bool
    distance: np.ndarray   # [states] int: fewest characters still needed to accept
    nfa_states: int

    @property
    def states(self) -> int:
        return len(self.accepting)

    def allowed(self, state: int) -> np.ndarray:
        """The mask: which characters keep the match alive from `state`."""
        return self.table[state] >= 0

    def accepts(self, text: str) -> bool:
        state = 0
        for c in text:
            if c not in VOCAB:
                return False
            state = int(self.table[state, VOCAB.index(c)])
            if state < 0:
                return False
        return bool(self.accepting[state])


def alphabet_classes(nfa: NFA) -> list[int]:
    """The coarsest partition of the vocabulary that every move label respects."""
    classes = [FULL]
    for label in {mask for moves in nfa.moves for mask, _ in moves}:
        classes = [part for c in classes for part in (c & label, c & ~label) if part]
    return classes


def subset_construction(nfa: NFA, classes: list[int], max_states: int) -> tuple[list[list[int]], list[bool]]:
    """`delta[s][k]`: DFA state after class k (-1: none), and which states accept."""
    start = nfa.closure({nfa.start})
    ids = {start: 0}
    order = [start]
    delta: list[list[int]] = []
    for current in order:  # `order` grows while we walk it: a breadth-first worklist
        row = []
        for cls in classes:
            reached = {t for s in current for mask, t in nfa.moves[s] if mask & cls}
            if not reached:
                row.append(-1)
                continue
            target = nfa.closure(reached)
            if target not in ids:
                if len(order) >= max_states:
                    raise PatternError(
                        f"the DFA would need more than {max_states:,} states (a subset explosion); "
                        "shorten the repeats that follow a '*' or '+'")
                ids[target] = len(order)
                order.append(target)
            row.append(ids[target])
        delta.append(row)
    return delta, [nfa.accept in s for s in order]


def distance_to_accept(delta: list[list[int]], accepting: list[bool]) -> list[int]:
    """Fewest characters from each state to an accepting one (-1: never, a dead state).

    Breadth-first search backwards from the accepting states.
    """
    into: list[list[int]] = [[] for _ in delta]
    for s, row in enumerate(delta):
        for t in row:
            if t >= 0:
                into[t].append(s)
    dist = [0 if a else -1 for a in accepting]
    todo = deque(s for s, a in enumerate(accepting) if a)
    while todo:
        t = todo.popleft()
        for s in into[t]:
            if dist[s] < 0:
                dist[s] = dist[t] + 1
                todo.append(s)
    return dist


def minimise(delta: list[list[int]], accepting: list[bool]) -> list[int]:
    """Hopcroft's partition refinement; returns the block of every state.

    Missing moves go to an explicit dead state (index len(delta)), which ends up in a
    block of its own because every other state is live.
    """
    n, dead = len(delta) + 1, len(delta)
    k_classes = len(delta[0]) if delta else 0
    into = [[[] for _ in range(n)] for _ in range(k_classes)]
    for s, row in enumerate(delta):
        for k, t in enumerate(row):
            into[k][dead if t < 0 else t].append(s)
    for k in range(k_classes):
        into[k][dead].append(dead)
    blocks = [b for b in ({s for s in range(dead) if accepting[s]},
                          {s for s in range(dead) if not accepting[s]} | {dead}) if b]
    block_of = [0] * n
    for i, block in enumerate(blocks):
        for s in block:
            block_of[s] = i
    work = set(range(len(blocks)))
    while work:
        splitter = list(blocks[work.pop()])
        for k in range(k_classes):
            touched: dict[int, set[int]] = {}
            for t in splitter:
                for s in into[k][t]:
                    touched.setdefault(block_of[s], set()).add(s)
            for b, inside in touched.items():
                if len(inside) == len(blocks[b]):
                    continue
                blocks[b] -= inside
                blocks.append(inside)
                new = len(blocks) - 1
                for s in inside:
                    block_of[s] = new
                work.add(new if b in work or len(inside) <= len(blocks[b]) else b)
    return block_of


def compile_dfa(pattern: str, max_states: int = MAX_DFA_STATES, max_nfa_states: int = MAX_NFA_STATES) -> DFA:
    """Regex -> minimal DFA of live states, or a PatternError (syntax, size, or empty language)."""
    nfa = build_nfa(parse(pattern), max_nfa_states)
    classes = alphabet_classes(nfa)
    delta, accepting = subset_construction(nfa, classes, max_states)
    dist = distance_to_accept(delta, accepting)
    if dist[0] < 0:
        raise PatternError("the pattern matches no text made of the model's characters")
    delta = [[t if t >= 0 and dist[t] >= 0 else -1 for t in row] for row in delta]
    block_of = minimise(delta, accepting)
    # renumber the live blocks breadth-first from the start, classes in vocabulary order
    number = {block_of[0]: 0}
    reps = [0]
    for s in reps:
        for t in delta[s]:
            if t >= 0 and block_of[t] not in number:
                number[block_of[t]] = len(reps)
                reps.append(t)
    class_of = np.zeros(len(VOCAB), dtype=np.int64)
    for k, cls in enumerate(classes):
        for i in range(len(VOCAB)):
            if cls >> i & 1:
                class_of[i] = k
    table = np.full((len(reps), len(VOCAB)), -1, dtype=np.int32)
    for new, s in enumerate(reps):
        row = np.array([-1 if t < 0 else number[block_of[t]] for t in delta[s]], dtype=np.int32)
        table[new] = row[class_of]
    return DFA(table, np.array([accepting[s] for s in reps]), np.array([dist[s] for s in reps]), nfa.size)
