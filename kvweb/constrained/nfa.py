"""Thompson construction: syntax tree -> NFA with epsilon moves.

Every piece of the tree becomes a fragment with one entry and one exit state; a
repeat `x{m,n}` becomes m copies of x followed by n-m optional copies (or a star), so
its size is multiplied out. The size is estimated first and capped, so that
`(a{1000}){1000}` is refused at once instead of building a million states.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvweb.constrained.regex_parser import Alt, Chars, Concat, Node, PatternError, Repeat

MAX_NFA_STATES = 20_000


@dataclass
class NFA:
    """States are ints. `eps[s]`: epsilon targets; `moves[s]`: (character mask, target)."""

    eps: list[list[int]] = field(default_factory=list)
    moves: list[list[tuple[int, int]]] = field(default_factory=list)
    start: int = 0
    accept: int = 0

    @property
    def size(self) -> int:
        return len(self.eps)

    def add_state(self) -> int:
        self.eps.append([])
        self.moves.append([])
        return len(self.eps) - 1

    def closure(self, states: set[int]) -> frozenset[int]:
        """Every state reachable from `states` through epsilon moves alone."""
        seen = set(states)
        todo = list(states)
        while todo:
            for t in self.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


def _copies(node: Repeat) -> int:
    return node.lo + (1 if node.hi is None else node.hi - node.lo)


def estimated_size(node: Node) -> int:
    """An upper bound on the states `build_nfa` creates, computed without building."""
    if isinstance(node, Chars):
        return 2
    if isinstance(node, Concat):
        return max(1, sum(estimated_size(p) for p in node.parts))
    if isinstance(node, Alt):
        return 2 + sum(estimated_size(o) for o in node.options)
    return 2 + _copies(node) * (estimated_size(node.body) + 2)


def build_nfa(node: Node, max_states: int = MAX_NFA_STATES) -> NFA:
    size = estimated_size(node)
    if size > max_states:
        raise PatternError(
            f"the NFA would need about {size:,} states, more than the cap of {max_states:,}; lower the repeat counts"
        )
    nfa = NFA()
    nfa.start, nfa.accept = _fragment(nfa, node)
    return nfa


def _fragment(nfa: NFA, node: Node) -> tuple[int, int]:
    """Add `node` to `nfa`; return its (entry, exit) states."""
    if isinstance(node, Chars):
        entry, exit_ = nfa.add_state(), nfa.add_state()
        nfa.moves[entry].append((node.mask, exit_))
        return entry, exit_
    if isinstance(node, Concat):
        return _join(nfa, [_fragment(nfa, part) for part in node.parts])
    if isinstance(node, Alt):
        entry, exit_ = nfa.add_state(), nfa.add_state()
        for option in node.options:
            a, b = _fragment(nfa, option)
            nfa.eps[entry].append(a)
            nfa.eps[b].append(exit_)
        return entry, exit_
    pieces = [_fragment(nfa, node.body) for _ in range(node.lo)]
    if node.hi is None:
        pieces.append(_optional(nfa, node.body, loop=True))
    else:
        pieces += [_optional(nfa, node.body, loop=False) for _ in range(node.hi - node.lo)]
    return _join(nfa, pieces)


def _join(nfa: NFA, pieces: list[tuple[int, int]]) -> tuple[int, int]:
    """Fragments one after another, joined by epsilon moves (none: one empty state)."""
    if not pieces:
        state = nfa.add_state()
        return state, state
    for (_, exit_), (entry, _) in zip(pieces, pieces[1:]):
        nfa.eps[exit_].append(entry)
    return pieces[0][0], pieces[-1][1]


def _optional(nfa: NFA, body: Node, *, loop: bool) -> tuple[int, int]:
    """`body?` or, with `loop`, `body*`."""
    entry, exit_ = nfa.add_state(), nfa.add_state()
    a, b = _fragment(nfa, body)
    nfa.eps[entry] += [a, exit_]
    nfa.eps[b].append(a if loop else exit_)
    if loop:
        nfa.eps[b].append(exit_)
    return entry, exit_
