"""The regex compiler against Python's `re`, hand-counted DFA sizes, and clear refusals."""

from __future__ import annotations

import re
from itertools import product

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvweb.constrained.dfa import DFA, compile_dfa
from kvweb.kv.model import VOCAB
from kvweb.constrained.regex_parser import FULL, Chars, PatternError, chars_of, class_label, parse

# -- a generator of patterns in the supported subset ------------------------------------

ALPHABET = "abc01 .-_Z"  # pattern literals and test strings: few, so matches are frequent


def _literal(c: str) -> str:
    return "\\" + c if c in ".-" else c


_class_item = st.one_of(
    st.sampled_from("abc01_Z").map(lambda c: c),
    st.sampled_from(["a-c", "0-1", "A-Z", "a-z", r"\d", r"\w", r"\s", r"\.", r"\-"]),
)
_atoms = st.one_of(
    st.sampled_from(ALPHABET).map(_literal),
    st.sampled_from([".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S"]),
    st.tuples(st.booleans(), st.lists(_class_item, min_size=1, max_size=3)).map(
        lambda t: "[" + ("^" if t[0] else "") + "".join(t[1]) + "]"
    ),
)
_quantifiers = st.sampled_from(["*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}", "{,2}"])


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    group = st.tuples(st.sampled_from(["(", "(?:"]), inner).map(lambda t: f"{t[0]}{t[1]})")
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
        group,
        st.tuples(st.one_of(_atoms, group), _quantifiers).map("".join),
    )


patterns = st.recursive(_atoms, _grow, max_leaves=6)
texts = st.text(alphabet=ALPHABET, max_size=8)


def compiled(pattern: str) -> DFA:
    try:
        return compile_dfa(pattern)
    except PatternError as err:  # only the caps may refuse a generated pattern
        assert "would need" in str(err), (pattern, err)
        assume(False)
        raise


@settings(max_examples=300, deadline=None)
@given(patterns, st.lists(texts, min_size=1, max_size=20))
def test_dfa_accepts_exactly_what_re_fullmatch_accepts(pattern: str, strings: list[str]) -> None:
    dfa = compiled(pattern)
    for s in strings:
        assert dfa.accepts(s) == bool(re.fullmatch(pattern, s)), (pattern, s)


@settings(max_examples=150, deadline=None)
@given(patterns, st.randoms(use_true_random=False), st.integers(0, 12))
def test_random_walks_to_acceptance_are_matches(pattern: str, rnd, wander: int) -> None:
    """Wander on live edges, then finish along `distance`: the text matches for `re` too."""
    dfa = compiled(pattern)
    state, text = 0, ""
    for _ in range(wander):
        options = np.flatnonzero(dfa.allowed(state)).tolist()
        if not options:
            break
        c = rnd.choice(options)
        text += VOCAB[c]
        state = int(dfa.table[state, c])
    while dfa.distance[state] > 0:  # every state is live: a shortest way out exists
        c = next(
            c
            for c in range(len(VOCAB))
            if dfa.table[state, c] >= 0 and dfa.distance[dfa.table[state, c]] == dfa.distance[state] - 1
        )
        text += VOCAB[c]
        state = int(dfa.table[state, c])
    assert dfa.accepting[state]
    assert re.fullmatch(pattern, text), (pattern, text)


def _distinguishable_pairs(dfa: DFA) -> set[tuple[int, int]]:
    """Pairs of states with different futures: a fixpoint over pairs (dead = -1)."""
    states = list(range(dfa.states)) + [-1]

    def acc(s: int) -> bool:
        return s >= 0 and bool(dfa.accepting[s])

    def step(s: int, c: int) -> int:
        return -1 if s < 0 else int(dfa.table[s, c])

    apart = {(p, q) for p, q in product(states, states) if acc(p) != acc(q)}
    changed = True
    while changed:
        changed = False
        for p, q in product(states, states):
            if (p, q) not in apart and any((step(p, c), step(q, c)) in apart for c in range(len(VOCAB))):
                apart.add((p, q))
                changed = True
    return apart


@settings(max_examples=40, deadline=None)
@given(patterns)
def test_minimised_dfa_has_no_two_equivalent_states(pattern: str) -> None:
    dfa = compiled(pattern)
    assume(dfa.states <= 12)
    apart = _distinguishable_pairs(dfa)
    assert all((p, q) in apart for p in range(dfa.states) for q in range(p))
    assert all((p, -1) in apart for p in range(dfa.states)), "no dead state is kept"


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_nth_from_last_is_a_needs_two_to_the_n_plus_one_states(n: int) -> None:
    # the DFA must remember the last n+1 characters: 2^(n+1) states, the classic blow-up
    assert compile_dfa(f"(a|b)*a(a|b){{{n}}}").states == 2 ** (n + 1)


@pytest.mark.parametrize(
    "pattern, states",
    [
        ("", 1),
        ("abc", 4),
        ("a{1000}", 1001),
        ("[a-z]{3,8}", 9),
        ("a*", 1),
        ("(yes|no)", 5),
        # start + 26 (1..8 letters read, ending in a / an / and where the word before can be
        # non-empty: 1+2+3+4*5) + 3 (only "nd"+digit, "d"+digit, a digit left) + accept
        (r"[a-z]{1,8}and[0-9]", 31),
    ],
)
def test_hand_counted_dfa_sizes(pattern: str, states: int) -> None:
    assert compile_dfa(pattern).states == states


def test_ambiguous_pattern_needs_no_backtracking() -> None:
    dfa = compile_dfa(r"[a-z]{1,8}and[0-9]")
    assert dfa.accepts("band1") and dfa.accepts("bandand2") and dfa.accepts("abcdefghand3")
    assert not dfa.accepts("and1") and not dfa.accepts("abcdefghiand3")


def test_distance_to_accept_is_the_shortest_match() -> None:
    dfa = compile_dfa(r"name is [a-z]{3,8}, age is [0-9]{1,2}, city is [a-z]{3,8}\.")
    assert dfa.distance[0] == len("name is abc, age is 1, city is abc.")


def test_escapes_cover_the_vocabulary() -> None:
    assert chars_of(parse(r"\d").mask) == "0123456789"
    assert chars_of(parse(r"\s").mask) == " "  # the vocabulary's only whitespace
    assert parse(".").mask == FULL and len(chars_of(FULL)) == 95
    assert parse(r"\D").mask == FULL & ~parse(r"\d").mask
    assert parse(r"\.") == Chars(1 << VOCAB.index("."))
    assert parse("[]a]").mask == parse(r"[\]a]").mask  # ']' first in a class is a literal
    assert parse("[a-]").mask == parse(r"[a\-]").mask


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from(VOCAB), min_size=1))
def test_class_labels_are_regexes_for_their_set(chars: set[str]) -> None:
    mask = parse("[" + "".join("\\" + c if not c.isalnum() else c for c in sorted(chars)) + "]").mask
    label = class_label(mask)
    assert parse(label).mask == mask
    assert {c for c in VOCAB if re.fullmatch(label, c)} == chars


@pytest.mark.parametrize(
    "pattern, position, words",
    [
        ("(ab", 0, "missing ')'"),
        ("ab)", 2, "unbalanced ')'"),
        ("a{3,1}", 1, "minimum is greater"),
        ("a(?=b)", 1, "look-arounds"),
        ("a(?<!b)", 1, "look-arounds"),
        (r"(a)\1", 3, "backreference"),
        ("(?P<x>a)(?P=x)", 0, "group syntax"),
        ("^ab", 0, "anchor"),
        ("ab$", 2, "anchor"),
        (r"a\b", 1, "anchor"),
        ("a*?", 2, "lazy"),
        ("a++", 2, "possessive"),
        ("a{1000}{1000}", 7, "multiple repeat"),
        ("*a", 0, "nothing to repeat"),
        ("a|+", 2, "nothing to repeat"),
        ("a{x}", 1, "literal brace"),
        ("[abc", 0, "unterminated"),
        ("[z-a]", 1, "bad range"),
        (r"[a-\d]", 1, "single characters"),
        ("ab\\", 2, "lone backslash"),
        (r"\t", 0, "escape"),
        ("caf\u00e9", 3, "vocabulary"),
    ],
)
def test_bad_patterns_name_the_position(pattern: str, position: int, words: str) -> None:
    with pytest.raises(PatternError, match=re.escape(f"at position {position}: ")) as err:
        compile_dfa(pattern)
    assert words in str(err.value)


@pytest.mark.parametrize(
    "pattern, words",
    [
        ("(a|b)*a(a|b){25}", "more than 4,000 states"),
        ("(a{1000}){1000}", "more than the cap"),
        ("a{99999999999}", "more than the cap"),
        ("[^ -~]", "matches no text"),
    ],
)
def test_size_caps_and_empty_languages_are_refused(pattern: str, words: str) -> None:
    with pytest.raises(PatternError, match=words):
        compile_dfa(pattern)
