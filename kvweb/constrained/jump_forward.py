"""Compression: chains of forced states merged into jump edges (SGLang's compressed FSM).

A state is *forced* when exactly one character keeps the match alive and the text may
not end there. (An accepting state with a way on is a real choice, stop or go on, so it
is never forced.) Decoding that reaches a forced state knows the next characters without
asking the model: jump-forward appends the whole chain at once and feeds it to the model
in one forward instead of one forward per character.

Decoding only lands on a forced state at the start or right after a sampled character
(a chain always ends on a state that is not forced), so those are the chain heads. A
chain cannot loop: a cycle of forced states never reaches acceptance, and the DFA keeps
only live states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvweb.constrained.dfa import DFA
from kvweb.kv.model import VOCAB


@dataclass(frozen=True)
class JumpEdge:
    head: int  # the forced state where the chain starts
    text: str  # the characters it emits, one per state in `states`
    states: tuple[int, ...]  # the forced states walked through, head first
    end: int  # the state it lands on (not forced)


@dataclass(frozen=True)
class CompressedFSM:
    dfa: DFA
    jumps: dict[int, JumpEdge]  # chain head -> its jump edge


def forced_states(dfa: DFA) -> np.ndarray:
    """[states] bool: exactly one legal character and no acceptance."""
    return ((dfa.table >= 0).sum(axis=1) == 1) & ~dfa.accepting


def chain(dfa: DFA, head: int, forced: np.ndarray) -> JumpEdge:
    """Follow forced steps from `head` until a state that offers a choice."""
    state, chars, states = head, [], []
    while forced[state]:
        if len(states) == dfa.states:
            raise AssertionError("a cycle of forced states: the DFA was not trimmed")
        c = int(np.flatnonzero(dfa.table[state] >= 0)[0])
        states.append(state)
        chars.append(VOCAB[c])
        state = int(dfa.table[state, c])
    return JumpEdge(head, "".join(chars), tuple(states), state)


def compress(dfa: DFA) -> CompressedFSM:
    forced = forced_states(dfa)
    after_choice = dfa.table[~forced]
    heads = {0} | set(after_choice[after_choice >= 0].tolist())
    return CompressedFSM(dfa, {h: chain(dfa, h, forced) for h in sorted(heads) if forced[h]})
