"""Lab `fsm`: constrained decoding with a compressed FSM and jump-forward, on the mini model."""

from __future__ import annotations

import re
import warnings
from collections import deque
from functools import cache
from typing import Any

import numpy as np
import param

from kvweb.constrained.decoding import PROMPT, Decoding, decode
from kvweb.constrained.dfa import DFA, STEPS_PER_SECOND, compile_cost, compile_dfa
from kvweb.kv.generate import Continued
from kvweb.constrained.jump_forward import CompressedFSM, compress, forced_states
from kvweb.constrained.layout import layers, order
from kvweb.budget import BUDGET_S, MEMORY_MB, MODEL_CALLS, Estimate, Unit, refused, work
from kvweb.lab import Lab, ParamError, Progress, Text, no_progress
from kvweb.memo import Memo
from kvweb.kv.model import VOCAB, MiniModel, decode as detokenize, encode
from kvweb.constrained.regex_parser import PatternError, char_set, class_label, parse

PRESETS = {
    "form": r"name is [a-z]{3,8}, age is [0-9]{1,2}, city is [a-z]{3,8}\.",
    "record": (
        r"customer_identifier: [0-9]{4,6}; shipping_destination: [A-Z][a-z]{2,9}; "
        r"preferred_delivery_window: (morning|afternoon|evening); gift_wrapping_requested: (yes|no)\."
    ),
    "ambiguous": r"[a-z]{1,8}and[0-9]",
}

# Remembered across runs (least recently used dropped first), shared by every session; each a
# pure function of its key. A widget change keeps most of the last run's work: the compiled
# pattern, the samples whose seed is still among the samples, and the unconstrained samples,
# which do not depend on the pattern at all (nor on max_len beyond their length).
# Compiling a pattern, counted by `compile_cost` from its syntax tree in the steps the subset
# construction counts and caps (`dfa.Work`; bench/fsm.py --estimate measures them)
COMPILE_STEPS = Unit("steps of compiling the pattern", 1 / STEPS_PER_SECOND)

SAMPLES_KEPT = 64  # two runs of the most samples (about 1 MB)
_FSMS: Memo[CompressedFSM] = Memo(8)  # pattern -> compiled
_DECODINGS: Memo[tuple[Decoding, Decoding]] = Memo(SAMPLES_KEPT)  # (pattern, max_len, seed) -> plain, compressed
_FREE: Memo[list[int]] = Memo(SAMPLES_KEPT)  # seed -> the longest unconstrained output made from it
_FREE_GOING: Memo[Continued] = Memo(8)  # seed -> its unconstrained sampling, to take further (KV: up to 1 MB each)


@cache
def mini_model() -> MiniModel:
    """The mini model (seeded weights, never written to): built once."""
    return MiniModel()


def decodings(pattern: str, fsm: CompressedFSM, max_len: int, seed: int) -> tuple[Decoding, Decoding]:
    """One sample decoded plainly and with jump-forward (`fsm` is `pattern` compiled)."""
    model = mini_model()
    return _DECODINGS.get(
        (pattern, max_len, seed),
        lambda: (
            decode(model, fsm, max_len, seed, compressed=False),
            decode(model, fsm, max_len, seed, compressed=True),
        ),
    )


def unconstrained(max_len: int, seed: int) -> str:
    """`generate_alone` from the prompt without a pattern. A shorter output is the start of a
    longer one (see `Continued`): the longest made so far serves every max_len up to its length,
    and a longer one continues it where it is still at hand."""
    kept = _FREE.find(seed)
    if kept is None or len(kept) < max_len:
        going = _FREE_GOING.get(seed, lambda: Continued(mini_model(), encode(PROMPT), seed))
        kept = going.first(max_len)
        _FREE.put(seed, kept)
    return detokenize(kept[:max_len])


class Fsm(Lab):
    lab_name = "fsm"
    title = "Constrained decoding (compressed FSM)"
    summary = (
        "A regular expression compiled to a DFA masks the mini model's characters so every "
        "output matches; chains with one legal character are jumped over in one forward. "
        "Plain and compressed decoding write identical text; the forwards saved equal the "
        "characters emitted through jump edges."
    )

    preset = param.Selector(
        objects=["custom", *PRESETS],
        default="custom",
        doc="which pattern to decode with: 'custom' uses `pattern`; any other choice uses its "
        "built-in pattern and ignores `pattern`",
    )
    pattern = Text(
        PRESETS["form"],
        max_length=300,
        doc="the regular expression the whole output must match (used only when preset is "
        "custom): literals, escapes, [classes], ., *, +, ?, {m,n}, |, (groups)",
    )
    samples = param.Integer(4, bounds=(1, 32), doc="outputs to generate, seeds seed, seed+1, ...")
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="random seed of the first sample")
    max_len = param.Integer(200, bounds=(1, 400), doc="longest output in characters")

    def ignored(self) -> tuple[str, ...]:
        return () if self.preset == "custom" else ("pattern",)

    def pattern_used(self) -> str:
        return self.pattern if self.preset == "custom" else PRESETS[self.preset]

    def compile(self) -> CompressedFSM:
        try:
            pattern = self.pattern_used()
            fsm = _FSMS.get(pattern, lambda: compress(compile_dfa(pattern)))
        except PatternError as err:
            raise ParamError(f"{'pattern' if self.preset == 'custom' else 'preset'}: {err}") from None
        shortest = int(fsm.dfa.distance[0])
        if shortest > self.max_len:
            raise ParamError(
                f"max_len: {self.max_len} is shorter than the shortest text the pattern allows; "
                f"allowed: at least {shortest}"
            )
        return fsm

    def estimate(self) -> Estimate:
        """Compiling the pattern (unless it is refused at once: it does not parse, or its NFA is
        over the cap; a remembered one is counted all the same) and each sample decoded three
        ways (plain, with jumps, unconstrained), a token a call. The larger part's parameters
        come first in `lower`."""
        decoding = 3 * self.samples * self.max_len
        try:
            cost = compile_cost(parse(self.pattern_used()))
        except PatternError:
            cost = None  # check() says what is wrong
        steps = 0.0 if cost is None or cost.over_nfa_cap else cost.steps
        lower = ("samples", "max_len")
        if steps * COMPILE_STEPS.seconds > decoding * MODEL_CALLS.seconds:
            lower = ("pattern" if self.preset == "custom" else "preset", *lower)
        return work((steps, COMPILE_STEPS), (decoding, MODEL_CALLS), lower=lower)

    def admit(self, budget_s: float = BUDGET_S, memory_mb: float = MEMORY_MB) -> None:
        """The estimate first: it is counted without compiling, which `check` does."""
        refusal = refused(self.estimate(), budget_s, memory_mb)
        if refusal:
            raise ParamError(refusal)
        self.check()

    def check(self) -> None:
        self.compile()

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        fsm = self.compile()
        pattern = self.pattern_used()
        plain: list[Decoding] = []
        jumped: list[Decoding] = []
        free: list[str] = []
        for i in range(self.samples):
            progress(i / self.samples, f"sample {i + 1} of {self.samples}")
            seed = self.seed + i
            p, j = decodings(pattern, fsm, self.max_len, seed)
            plain.append(p)
            jumped.append(j)
            free.append(unconstrained(self.max_len, seed))
        progress(1.0, "done")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # re's FutureWarnings about e.g. '[[' in a class
            checker = re.compile(pattern)
        outputs = [d.text for d in jumped]
        return {
            "pattern": pattern,
            "prompt": PROMPT,
            "dfa_states": fsm.dfa.states,
            "nfa_states": fsm.dfa.nfa_states,
            "jump_edges": len(fsm.jumps),
            "shortest_match": int(fsm.dfa.distance[0]),
            "forwards_plain": sum(d.forwards for d in plain),
            "forwards_compressed": sum(d.forwards for d in jumped),
            "jump_chars": sum(d.jump_chars for d in jumped),
            "identical": outputs == [d.text for d in plain],
            "all_match": all(checker.fullmatch(t) for t in outputs),
            "outputs": outputs,
            "per_sample": [
                {
                    "seed": self.seed + i,
                    "forwards_plain": p.forwards,
                    "forwards_compressed": j.forwards,
                    "jump_chars": j.jump_chars,
                }
                for i, (p, j) in enumerate(zip(plain, jumped))
            ],
            "unconstrained_outputs": free,
            "unconstrained_match": sum(bool(checker.fullmatch(t)) for t in free),
            "trace": (steps := trace(plain[0], jumped[0])),
            "opening_step": next((i for i, s in enumerate(steps) if s["jump"]), 0),  # a jump edge taken
            "graph": graph(fsm),
        }


def trace(plain: Decoding, jumped: Decoding) -> list[dict[str, Any]]:
    """The compressed decoding step by step, with the forwards plain decoding had run by
    the time it had written as much (one of its steps ends at every character count)."""
    plain_at = {(s.emitted, s.chars == ""): s.forwards for s in plain.steps}
    return [
        {
            "state": s.state,
            "allowed": s.allowed,
            "end_allowed": s.end_allowed,
            "chars": s.chars,
            "jump": s.jump,
            "to": s.to,
            "emitted": s.emitted,
            "forwards_plain": plain_at[(s.emitted, s.chars == "")],
            "forwards_compressed": s.forwards,
        }
        for s in jumped.steps
    ]


def depths(dfa: DFA) -> list[int]:
    """Breadth-first depth of every state from the start (the view's columns)."""
    depth = [-1] * dfa.states
    depth[0] = 0
    todo = deque([0])
    while todo:
        s = todo.popleft()
        for t in np.unique(dfa.table[s][dfa.table[s] >= 0]).tolist():
            if depth[t] < 0:
                depth[t] = depth[s] + 1
                todo.append(t)
    return depth


def graph(fsm: CompressedFSM) -> dict[str, Any]:
    """The DFA as plain data: states (with their layer and place in it, for a layered
    drawing), edges labelled with character classes, jump chains."""
    dfa = fsm.dfa
    forced = forced_states(dfa)
    edges = []
    for s in range(dfa.states):
        row = dfa.table[s]
        for t in np.unique(row[row >= 0]).tolist():
            chars = "".join(c for c, target in zip(VOCAB, row.tolist()) if target == t)
            edges.append(
                {
                    "source": s,
                    "target": t,
                    "label": class_label(char_set(chars)),
                    "chars": len(chars),
                    "jump": bool(forced[s]),
                }
            )
    pairs = [(e["source"], e["target"]) for e in edges]
    layer = layers(dfa.states, pairs)
    slot = order(layer, pairs)
    return {
        "states": [
            {
                "id": s,
                "depth": d,
                "layer": layer[s],
                "slot": slot[s],
                "accepting": bool(dfa.accepting[s]),
                "forced": bool(forced[s]),
            }
            for s, d in enumerate(depths(dfa))
        ],
        "edges": edges,
        "chains": [
            {"head": j.head, "end": j.end, "text": j.text, "states": list(j.states)} for j in fsm.jumps.values()
        ],
    }
