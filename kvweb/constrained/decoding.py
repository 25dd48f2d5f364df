"""Constrained decoding on the mini model: a mask from the DFA state, plain or jump-forward.

Each step the mask lets through only the characters that keep the match alive *and*
can still finish within `max_len` (the DFA knows the fewest characters each state still
needs), so every output matches the pattern.

Stopping. Where the DFA state accepts and has no way on, decoding stops without asking
the model. Where it accepts and could go on, end-of-text is one more choice, sampled
with the characters: its logit is the log-sum-exp of the logits of the characters the
pattern forbids here (the model "wanting" to write something the pattern does not allow
reads as wanting to stop). Where the pattern forbids nothing (e.g. `.*`), there is no
such mass and decoding runs on to `max_len`.

Plain decoding runs one forward per output character (plus one when it samples the end).
Compressed decoding follows jump edges: a chain of forced characters is appended whole
and fed with the next forward as one prefill chunk. A forced step draws no random number
(`sample` takes a single allowed token without drawing), so both modes see the same
logits and the same random numbers, and write identical text; the forwards saved are
exactly the characters emitted through jump edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.constrained.jump_forward import CompressedFSM
from kvweb.kv.model import VOCAB, MiniModel, encode, sample

PROMPT = "Answer: "
END = len(VOCAB)  # index of the end-of-text choice, after the 95 characters


@dataclass(frozen=True)
class Step:
    state: int  # DFA state before the step
    allowed: str  # characters the mask let through (vocabulary order)
    end_allowed: bool  # whether stopping was one of the choices
    chars: str  # what the step emitted ("" when it chose to stop)
    jump: bool  # a jump edge: its characters came with no forward and no draw
    to: int  # DFA state after the step
    emitted: int  # characters in the output after the step
    forwards: int  # forwards run so far


@dataclass(frozen=True)
class Decoding:
    text: str
    forwards: int
    jump_chars: int  # characters emitted through jump edges
    steps: tuple[Step, ...]


def choices(fsm: CompressedFSM, state: int, room: int) -> np.ndarray:
    """[len(VOCAB) + 1] bool: the characters that keep the match alive and can still
    finish within `room` characters, then the end-of-text choice."""
    dfa = fsm.dfa
    nxt = dfa.table[state]
    ok = nxt >= 0
    ok[ok] = dfa.distance[nxt[ok]] <= room - 1
    can_end = bool(dfa.accepting[state]) and not (nxt >= 0).all()
    return np.append(ok, can_end)


def with_end_logit(logits: np.ndarray, forbidden: np.ndarray) -> np.ndarray:
    """The logits plus the end-of-text logit: log-sum-exp over the forbidden characters."""
    if not forbidden.any():
        return np.append(logits, -np.inf)
    top = logits[forbidden].max()
    return np.append(logits, top + np.log(np.exp(logits[forbidden] - top).sum()))


def decode(
    model: MiniModel,
    fsm: CompressedFSM,
    max_len: int,
    seed: int,
    *,
    compressed: bool,
    prompt: str = PROMPT,
    temperature: float = 1.0,
) -> Decoding:
    """Generate one output that matches the pattern, at most `max_len` characters long.

    Tokens wait in `pending` until logits are needed; plain decoding needs them after
    every character, compressed decoding not inside a jump edge.
    """
    dfa = fsm.dfa
    if dfa.distance[0] > max_len:
        raise ValueError(f"max_len {max_len} is shorter than the shortest match ({dfa.distance[0]})")
    store = ContiguousStore(model.config.layers)
    store.add(0)
    rng = np.random.default_rng(seed)
    pending = encode(prompt)
    text = ""
    state, forwards, jump_chars = 0, 0, 0
    steps: list[Step] = []
    while True:
        if compressed and state in fsm.jumps:
            edge = fsm.jumps[state]
            text += edge.text
            pending += encode(edge.text)
            jump_chars += len(edge.text)
            steps.append(Step(state, edge.text[0], False, edge.text, True, edge.end, len(text), forwards))
            state = edge.end
            continue
        mask = choices(fsm, state, max_len - len(text))
        if not mask[:END].any():  # nothing left to write: stop without asking the model
            break
        logits = model.forward_batch(store, [0], [pending])[0]
        forwards += 1
        pending = []
        choice = sample(with_end_logit(logits, ~dfa.allowed(state)), rng, temperature, mask)
        allowed = "".join(VOCAB[i] for i in np.flatnonzero(mask[:END]))
        if choice == END:
            steps.append(Step(state, allowed, True, "", False, state, len(text), forwards))
            break
        nxt = int(dfa.table[state, choice])
        text += VOCAB[choice]
        pending = [choice]
        steps.append(Step(state, allowed, bool(mask[END]), VOCAB[choice], False, nxt, len(text), forwards))
        state = nxt
    return Decoding(text, forwards, jump_chars, tuple(steps))
