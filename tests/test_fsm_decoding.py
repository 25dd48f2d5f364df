"""Jump edges, constrained decoding invariants, and the `fsm` lab."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.constrained import decoding
from kvweb.cli import main
from kvweb.constrained.decoding import decode
from kvweb.constrained.dfa import compile_dfa
from kvweb.constrained.jump_forward import CompressedFSM, JumpEdge, compress
from kvweb.constrained.layout import back_edges, band_positions
from kvweb.lab import ParamError
from kvweb.parsing import make
from kvweb.query import from_query
from kvweb.labs.fsm import PRESETS, Fsm
from kvweb.kv.model import MiniModel
from test_regex import compiled, patterns

MODEL = MiniModel()
FORM = PRESETS["form"]


def fsm_of(pattern: str) -> CompressedFSM:
    return compress(compile_dfa(pattern))


# -- jump edges ---------------------------------------------------------------------------


def test_a_literal_is_one_jump_edge() -> None:
    assert fsm_of("abc").jumps == {0: JumpEdge(0, "abc", (0, 1, 2), 3)}


def test_an_accepting_state_with_a_way_on_is_not_forced() -> None:
    # after "a" the text may end or go on with "b": a choice, so the chain stops there
    assert fsm_of("ab?").jumps == {0: JumpEdge(0, "a", (0,), 1)}


def test_chains_start_after_each_choice() -> None:
    chains = {j.text for j in fsm_of("(yes|no)").jumps.values()}
    assert chains == {"es", "o"}  # "y" or "n" is a choice; the rest is forced


def test_form_chains_are_the_fixed_text() -> None:
    chains = sorted(j.text for j in fsm_of(FORM).jumps.values())
    # a comma after a 3..7-letter name is a choice (more letters or ','), after 8 it is forced
    assert chains == [" age is ", " city is ", ", age is ", ", city is ", ".", "name is "]


# -- decoding -----------------------------------------------------------------------------


@pytest.mark.parametrize("pattern, plain, compressed", [("abc", 3, 0), ("x[0-9]yz", 4, 1)])
def test_forward_counts_by_hand(pattern: str, plain: int, compressed: int) -> None:
    # "abc": fully forced, no forward needed at all. "x[0-9]yz": plain runs one forward
    # per character; compressed runs one (prompt + "x") to sample the digit, then "yz"
    # needs no logits because the text ends there.
    fsm = fsm_of(pattern)
    p, c = (decode(MODEL, fsm, 10, 0, compressed=m) for m in (False, True))
    assert (p.forwards, c.forwards, c.jump_chars) == (plain, compressed, plain - compressed)
    assert p.text == c.text and re.fullmatch(pattern, c.text)


def _check_invariants(fsm: CompressedFSM, pattern: str, max_len: int, seed: int) -> None:
    p = decode(MODEL, fsm, max_len, seed, compressed=False)
    c = decode(MODEL, fsm, max_len, seed, compressed=True)
    assert p.text == c.text
    assert p.forwards - c.forwards == c.jump_chars
    assert p.jump_chars == 0 and len(p.text) <= max_len
    assert re.fullmatch(pattern, c.text), (pattern, c.text)
    assert "".join(s.chars for s in c.steps) == c.text


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([*PRESETS.values(), r"[a-z]*", r".*", r"(ab|cd)+e", r"\d{3}-\d{4}"]), st.integers(0, 10_000))
def test_decoding_invariants_on_templates(pattern: str, seed: int) -> None:
    _check_invariants(fsm_of(pattern), pattern, 200, seed)


@settings(max_examples=40, deadline=None)
@given(patterns, st.integers(0, 10_000), st.integers(0, 30))
def test_decoding_invariants_on_generated_patterns(pattern: str, seed: int, slack: int) -> None:
    fsm = compress(compiled(pattern))
    # max_len from the shortest match up: a tight budget forces the mask to finish in time
    _check_invariants(fsm, pattern, int(fsm.dfa.distance[0]) + slack, seed)


def test_unbounded_pattern_without_forbidden_characters_runs_to_max_len() -> None:
    # '.*' forbids nothing, so end-of-text has no logit mass: decoding stops at max_len
    assert len(decode(MODEL, fsm_of(".*"), 17, 3, compressed=True).text) == 17


def test_the_end_is_chosen_only_where_the_text_may_end() -> None:
    fsm = fsm_of(r"[a-z]{2,30}")
    for seed in range(5):
        steps = decode(MODEL, fsm, 40, seed, compressed=False).steps
        assert steps[-1].chars == ""  # the model chose to stop (letters stayed allowed)
        assert all(s.end_allowed == bool(fsm.dfa.accepting[s.state]) for s in steps)


class CountingRng:
    """A numpy Generator stand-in that counts the random numbers drawn."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.draws = rng, 0

    def random(self) -> float:
        self.draws += 1
        return self.rng.random()


@pytest.mark.parametrize("compressed", [False, True])
def test_forced_steps_draw_no_random_number(monkeypatch: pytest.MonkeyPatch, compressed: bool) -> None:
    rngs: list[CountingRng] = []
    real = np.random.default_rng
    monkeypatch.setattr(
        decoding.np.random, "default_rng", lambda seed: rngs.append(CountingRng(real(seed))) or rngs[-1]
    )
    out = decode(MODEL, fsm_of(FORM), 200, 1, compressed=compressed)
    choices = [s for s in out.steps if len(s.allowed) + s.end_allowed > 1]
    assert rngs[0].draws == len(choices) < len(out.text)


# -- the lab ------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["custom", "record", "ambiguous"])
def test_lab_invariants(preset: str) -> None:
    lab = Fsm(preset=preset, samples=3, seed=5)
    r = lab.run()
    assert r["identical"] and r["all_match"]
    assert r["forwards_plain"] - r["forwards_compressed"] == r["jump_chars"] > 0
    assert r["unconstrained_match"] == 0 and len(r["unconstrained_outputs"]) == 3
    assert all(re.fullmatch(lab.pattern_used(), t) for t in r["outputs"])
    json.dumps(r, allow_nan=False)


def test_lab_trace_replays_sample_zero() -> None:
    r = Fsm(samples=2).run()
    trace, first = r["trace"], r["per_sample"][0]
    assert "".join(s["chars"] for s in trace) == r["outputs"][0]
    assert trace[-1]["emitted"] == len(r["outputs"][0])
    # the last step's counters are sample 0's totals (no forward after a final jump)
    assert trace[-1]["forwards_compressed"] == first["forwards_compressed"]
    assert max(s["forwards_plain"] for s in trace) == first["forwards_plain"]
    assert sum(len(s["chars"]) for s in trace if s["jump"]) == first["jump_chars"]
    for s in trace:
        assert s["chars"][:1] in s["allowed"] and (s["chars"] or s["end_allowed"])
        assert s["forwards_plain"] - s["forwards_compressed"] == sum(
            len(t["chars"]) for t in trace[: trace.index(s) + 1] if t["jump"]
        )


def test_lab_graph_is_the_dfa() -> None:
    r = Fsm(preset="ambiguous", samples=1).run()
    g = r["graph"]
    assert len(g["states"]) == r["dfa_states"] == 31 and len(g["chains"]) == r["jump_edges"]
    assert [s["depth"] for s in g["states"]] == sorted(s["depth"] for s in g["states"])  # BFS numbering
    forced = {s["id"] for s in g["states"] if s["forced"]}
    assert all(set(c["states"]) <= forced for c in g["chains"])
    assert all(e["jump"] == (e["source"] in forced) for e in g["edges"])
    # any first letter is a word of length 1; after it, an 'a' may begin "and"
    assert {e["label"] for e in g["edges"] if e["source"] == 0} == {"[a-z]"}
    assert {e["label"] for e in g["edges"] if e["source"] == 1} == {"a", "[b-z]"}
    # out of every forced state exactly one edge, labelled with one character
    assert all(e["chars"] == 1 for e in g["edges"] if e["jump"])


def test_preset_overrides_pattern() -> None:
    assert Fsm(preset="ambiguous", pattern="((").pattern_used() == PRESETS["ambiguous"]
    assert Fsm(preset="custom", pattern="ab").pattern_used() == "ab"


@pytest.mark.parametrize(
    "texts, words",
    [
        ({"pattern": "a(b"}, "pattern: at position 1: missing ')'"),
        ({"pattern": "(?<=x)y"}, "pattern: at position 0: look-arounds"),
        ({"pattern": "(a|b)*a(a|b){25}"}, "pattern: the DFA would need more than"),
        ({"preset": "record", "max_len": "50"}, "max_len: 50 is shorter"),
    ],
)
def test_bad_input_is_a_param_error(texts: dict[str, str], words: str) -> None:
    with pytest.raises(ParamError, match=re.escape(words)):
        make("fsm", texts)


def test_cli_exits_2_on_a_bad_pattern() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", "fsm", "--pattern", "a{3,1}"], out, err) == 2
    assert out.getvalue() == "" and "at position 1" in err.getvalue()


def test_cli_runs_a_custom_pattern() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", "fsm", "--pattern", r"\d{3}-\d{4}", "--samples", "2", "--json"], out, err) == 0
    result = json.loads(out.getvalue())["result"]
    assert all(re.fullmatch(r"\d{3}-\d{4}", t) for t in result["outputs"])
    assert result["jump_chars"] == 2  # the '-' after three digits is forced: one per sample


def test_hostile_url_falls_back_to_defaults() -> None:
    lab, messages = from_query({"lab": "fsm", "pattern": "<script>alert(1)</script>("})
    assert lab.pattern == Fsm.param["pattern"].default and messages


@pytest.mark.parametrize("pattern", [*PRESETS.values(), "a(bc)*d", "(x|yz)+[0-9]?", "q*"])
def test_layered_layout_puts_states_after_their_predecessors(pattern: str) -> None:
    g = Fsm(preset="custom", pattern=pattern, samples=1).run()["graph"]
    layer = {s["id"]: s["layer"] for s in g["states"]}
    pairs = [(e["source"], e["target"]) for e in g["edges"]]
    back = back_edges(len(layer), pairs)
    for s, t in pairs:  # every edge that does not close a cycle points right
        assert layer[t] > layer[s] or (s, t) in back
    for s, t in back:  # and every back edge does close one: t reaches s
        seen, todo = {t}, [t]
        while todo:
            u = todo.pop()
            todo += [b for a, b in pairs if a == u and b not in seen and not seen.add(b)]
        assert s in seen
    for s in g["states"]:  # longest path: one layer after its furthest predecessor
        preds = [layer[a] for a, b in pairs if b == s["id"] and (a, b) not in back]
        assert s["layer"] == (max(preds) + 1 if preds else 0)
    places = {(s["layer"], s["slot"]) for s in g["states"]}
    assert len(places) == len(g["states"])  # no two states share a place
    xy = band_positions([s["layer"] for s in g["states"]], [s["slot"] for s in g["states"]], 16)
    assert len(set(xy)) == len(xy) and all(0 <= x < 16 for x, _ in xy)


def test_default_layout_wraps_the_chain_and_opens_on_a_jump() -> None:
    r = Fsm(samples=1).run()
    layer = {s["id"]: s["layer"] for s in r["graph"]["states"]}
    # "name is [a-z]{3,8}, ": the ',' state (13) comes after the 8th letter's state (20), not
    # at breadth-first depth 12 beside the 4th; 47 states on 47 layers, three bands of 16
    assert layer[20] == 16 and layer[13] == 17 and max(layer.values()) == 46
    step = r["trace"][r["opening_step"]]
    assert r["opening_step"] == 0 and step["jump"] and step["chars"] == "name is "
