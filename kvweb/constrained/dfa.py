"""NFA -> DFA by subset construction, then trimmed and minimised.

A DFA state is the set of NFA states the input could have reached, so an ambiguous
pattern such as `[a-z]{1,8}and[0-9]` needs no backtracking: after "band" the DFA is in
"still inside the word" and "after the literal 'and'" at once.

The alphabet is first cut into classes of characters that no label tells apart (for
`[a-z]{1,8}and[0-9]`: a, n, d, the other letters, digits, everything else), so the
construction loops over a handful of classes instead of 95 characters. A cap on DFA
states turns a subset explosion such as `(a|b)*a(a|b){25}` into an error at once, and a
cap on the construction's counted work (`Work`) stops any pattern that would take longer
than about 4 s. `compile_cost` counts that work from the syntax tree before anything is
built: the fsm lab's estimate (docs/fsm.md).

The result keeps only live states (those from which acceptance is still reachable):
a transition missing from the table is a character that would kill the match, which
is exactly the mask constrained decoding needs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from kvweb.kv.model import VOCAB
from kvweb.constrained.nfa import MAX_NFA_STATES, NFA, build_nfa, estimated_size
from kvweb.constrained.regex_parser import FULL, Alt, Chars, Concat, Node, PatternError, Repeat, parse

MAX_DFA_STATES = 4_000
MAX_WORK = 4e9  # steps of `Work`: about 4 s of CPU (bench/fsm.py --estimate)


@dataclass(frozen=True)
class DFA:
    """`table[s, c]`: the state after character id c, or -1 where c kills the match.

    State 0 is the start; states are numbered in breadth-first order from it.
    """

    table: np.ndarray  # [states, len(VOCAB)] int32
    accepting: np.ndarray  # [states] bool
    distance: np.ndarray  # [states] int: fewest characters still needed to accept
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


def _closures(nfa: NFA, bit_of: dict[int, int]) -> list[int]:
    """Every NFA state's epsilon closure as a bitmask over `bit_of`'s states (the states with a
    move, and the accepting one): Tarjan's strongly connected components of the epsilon moves
    (a star over a nullable body closes an epsilon cycle), each component's mask the OR of its
    members' bits and of the masks of the components it leads to, which Tarjan finishes first."""
    n = nfa.size
    index, low = [-1] * n, [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    mask = [0] * n
    done = [False] * n
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        walk = [(root, 0)]
        while walk:
            v, i = walk[-1]
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            targets = nfa.eps[v]
            if i < len(targets):
                walk[-1] = (v, i + 1)
                t = targets[i]
                if index[t] < 0:
                    walk.append((t, 0))
                elif on_stack[t]:
                    low[v] = min(low[v], index[t])
                continue
            walk.pop()
            if walk:
                u = walk[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] != index[v]:
                continue
            members = []
            while True:
                m = stack.pop()
                on_stack[m] = False
                members.append(m)
                if m == v:
                    break
            total = 0
            for m in members:
                if m in bit_of:
                    total |= 1 << bit_of[m]
                for t in nfa.eps[m]:
                    if done[t]:
                        total |= mask[t]
            for m in members:
                mask[m] = total
                done[m] = True
    return mask


class Work:
    """The construction's work so far, counted as it goes (`steps`, about a nanosecond each on the
    machine of docs/fsm.md), and the cap it may not pass."""

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.steps = 0.0

    def add(self, steps: float) -> None:
        self.steps += steps
        if self.steps > self.cap:
            raise PatternError(
                f"compiling the pattern would take more than {self.cap / STEPS_PER_SECOND:g} s "
                "(the work cap of the subset construction); lower the repeat counts or the "
                "alternatives inside them"
            )


# What one step of `Work` stands for (bench/fsm.py measures them): a 64-bit word of a state set
# ANDed or ORed, and the Python around one class tried from one DFA state, or one move made
STEPS_PER_SECOND = 1e9
STEPS_PER_CLASS = 300
STEPS_PER_MOVE = 6_000
STEPS_PER_NFA_STATE = 2_000


def subset_construction(
    nfa: NFA, classes: list[int], max_states: int, max_work: float = MAX_WORK
) -> tuple[list[list[int]], list[bool]]:
    """`delta[s][k]`: DFA state after class k (-1: none), and which states accept.

    A DFA state is the set of NFA states that have a move (one character set each, in a Thompson
    NFA) reachable without input, plus whether the accepting state is: all that decides what
    follows. Sets are bitmasks (Python ints) over those states; the move on a class keeps the
    states whose set meets it, and the next state is the OR of the closures of their targets
    (each computed once, `_closures`). The work is counted (`Work`) and capped at `max_work`
    steps, the states at `max_states`."""
    work = Work(max_work)
    work.add(nfa.size * STEPS_PER_NFA_STATE)
    movers = [s for s in range(nfa.size) if nfa.moves[s]]
    bit_of = {s: i for i, s in enumerate(movers)}
    accept_bit = len(movers)
    bit_of[nfa.accept] = accept_bit
    words = accept_bit // 64 + 1
    closure = _closures(nfa, bit_of)
    # the closure of each move's target, by the bit of the state that moves
    after = [closure[nfa.moves[s][0][1]] for s in movers]
    packed = np.frombuffer(b"".join(c.to_bytes(words * 8, "little") for c in after), dtype="<u8").reshape(
        len(movers), words
    )
    meets = []  # per class: the states whose character set meets it
    by_label: dict[int, list[int]] = {}
    for i, s in enumerate(movers):
        by_label.setdefault(nfa.moves[s][0][0], []).append(i)
    label_bits = {label: sum(1 << i for i in bits) for label, bits in by_label.items()}
    for cls in classes:
        meets.append(sum(m for label, m in label_bits.items() if label & cls))
    start = closure[nfa.start]
    ids = {start: 0}
    order = [start]
    delta: list[list[int]] = []
    for current in order:  # `order` grows while we walk it: a breadth-first worklist
        row = []
        work.add(len(classes) * (STEPS_PER_CLASS + words))
        for m in meets:
            moving = current & m
            if not moving:
                row.append(-1)
                continue
            count = moving.bit_count()
            work.add(STEPS_PER_MOVE + count * words)
            if count <= 8:
                target = 0
                while moving:
                    low = moving & -moving
                    target |= after[low.bit_length() - 1]
                    moving ^= low
            else:
                bits = np.unpackbits(
                    np.frombuffer(moving.to_bytes(words * 8, "little"), dtype=np.uint8), bitorder="little"
                )
                target = int.from_bytes(np.bitwise_or.reduce(packed[np.flatnonzero(bits)], axis=0).tobytes(), "little")
            if target not in ids:
                if len(order) >= max_states:
                    raise PatternError(
                        f"the DFA would need more than {max_states:,} states (a subset explosion); "
                        "shorten the repeats that follow a '*' or '+'"
                    )
                ids[target] = len(order)
                order.append(target)
            row.append(ids[target])
        delta.append(row)
    return delta, [bool(s >> accept_bit & 1) for s in order]


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
    blocks = [
        b
        for b in ({s for s in range(dead) if accepting[s]}, {s for s in range(dead) if not accepting[s]} | {dead})
        if b
    ]
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


def compile_dfa(
    pattern: str, max_states: int = MAX_DFA_STATES, max_nfa_states: int = MAX_NFA_STATES, max_work: float = MAX_WORK
) -> DFA:
    """Regex -> minimal DFA of live states, or a PatternError (syntax, size, work, or empty language)."""
    nfa = build_nfa(parse(pattern), max_nfa_states)
    classes = alphabet_classes(nfa)
    delta, accepting = subset_construction(nfa, classes, max_states, max_work)
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


@dataclass(frozen=True)
class CompileCost:
    """What compiling a pattern will take, counted from its syntax tree before anything is built."""

    nfa_states: int  # the NFA's size (`estimated_size`, an upper bound)
    positions: int  # character sets in the NFA (its states with a move): the repeats multiplied out
    classes: int  # alphabet classes (exact: the same partition `alphabet_classes` makes)
    meetings: int  # (position, class) pairs whose set meets the class: what the moves look at
    follows: int  # positions with different follow sets, about: states of a DFA without ambiguity
    ambiguous: bool  # a repeat of varying length followed by what it can also read: states may multiply
    dfa_states: int  # the DFA states the construction is expected to build (capped at MAX_DFA_STATES)
    steps: float  # the construction's work, in steps of `Work`

    @property
    def over_nfa_cap(self) -> bool:
        return self.nfa_states > MAX_NFA_STATES


@dataclass(frozen=True)
class _Shape:
    positions: int
    meetings: int
    follows: int
    nullable: bool
    first: int  # characters that can start a match
    tail: int  # characters of repeats of varying length that can end a match
    chars: int  # every character the node mentions
    ambiguous: bool


def _labels(node: Node) -> set[int]:
    if isinstance(node, Chars):
        return {node.mask}
    if isinstance(node, Repeat):
        return _labels(node.body)
    return set().union(*map(_labels, node.parts if isinstance(node, Concat) else node.options))


def _shape(node: Node, meets: dict[int, int]) -> _Shape:
    if isinstance(node, Chars):
        return _Shape(1, meets[node.mask], 1, False, node.mask, 0, node.mask, False)
    if isinstance(node, Repeat):
        body = _shape(node.body, meets)
        copies = node.lo + (1 if node.hi is None else node.hi - node.lo)
        varies = node.hi != node.lo
        tail = body.tail | (body.chars if varies else 0)
        # a copy that may end early, followed by a copy that starts with what it could go on with
        ambiguous = body.ambiguous or (copies > 1 and bool(body.tail & body.first))
        return _Shape(
            copies * body.positions,
            copies * body.meetings,
            copies * body.follows,
            node.lo == 0 or body.nullable,
            body.first if copies else 0,
            tail,
            body.chars,
            ambiguous,
        )
    if isinstance(node, Alt):
        options = [_shape(o, meets) for o in node.options]
        union = 0
        for o in options:
            union |= o.chars
        return _Shape(
            sum(o.positions for o in options),
            sum(o.meetings for o in options),
            1 + sum(o.follows - 1 for o in options),
            any(o.nullable for o in options),
            _or(o.first for o in options),
            _or(o.tail for o in options),
            union,
            any(o.ambiguous for o in options),
        )
    parts = [_shape(p, meets) for p in node.parts]
    ambiguous = any(p.ambiguous for p in parts)
    first, after = 0, 0  # `after`: what can start the rest, from part i + 1 on
    nullable_rest = True
    for p in reversed(parts):
        if p.tail & after:
            ambiguous = True
        after = p.first | (after if p.nullable else 0)
        nullable_rest = nullable_rest and p.nullable
    first = after
    tail = 0
    for p in reversed(parts):
        tail |= p.tail
        if not p.nullable:
            break
    return _Shape(
        sum(p.positions for p in parts),
        sum(p.meetings for p in parts),
        sum(p.follows for p in parts),
        nullable_rest,
        first,
        tail,
        _or(p.chars for p in parts),
        ambiguous,
    )


def _or(masks) -> int:
    total = 0
    for m in masks:
        total |= m
    return total


# calibration of `compile_cost` against bench/fsm.py's measured runs: the share of the moves'
# character sets a DFA state holds on average (a repeat's later copies: half; with ambiguity,
# nearly all), and the work after the construction per DFA state and class (trim,
# minimisation, the table, compression)
HELD, HELD_AMBIGUOUS = 0.5, 1.0
STEPS_AFTER = 3_000


def compile_cost(node: Node, max_states: int = MAX_DFA_STATES) -> CompileCost:
    """The work of `compile_dfa` on this syntax tree, counted without building anything.

    A DFA state costs, per class, the Python around trying it and making its move
    (`STEPS_PER_CLASS` + `STEPS_PER_MOVE`) and a word of every set ANDed, plus a word per
    64 positions for every position whose set meets the class and is held (ORing the
    closures). States: `follows` + 1 without ambiguity (a repeat x{m,n} of a fixed-length x
    reads as n positions of x, whatever x's width), its square with (capped: the state cap
    stops an explosion there)."""
    labels = _labels(node)
    classes = [FULL]
    for label in labels:
        classes = [part for c in classes for part in (c & label, c & ~label) if part]
    meets = {label: sum(1 for c in classes if c & label) for label in labels}
    shape = _shape(node, meets)
    follows = shape.follows
    states = min(max_states, (follows + 1) ** 2 if shape.ambiguous else follows + 1)
    words = shape.positions // 64 + 1
    per_state = (
        len(classes) * (STEPS_PER_CLASS + words + STEPS_PER_MOVE + STEPS_AFTER)
        + (HELD_AMBIGUOUS if shape.ambiguous else HELD) * shape.meetings * words
    )
    n = estimated_size(node)
    steps = n * STEPS_PER_NFA_STATE + states * per_state
    return CompileCost(n, shape.positions, len(classes), shape.meetings, follows, shape.ambiguous, states, steps)
