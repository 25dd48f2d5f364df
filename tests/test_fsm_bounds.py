"""Patterns bounded like every other run (issue "whatever a user brings", item 4): the fsm lab's
estimate counts compiling the pattern from its syntax tree before anything is built, and the
subset construction stops at its state cap and at a work cap. The tests count the construction's
work (`dfa.Work`), never the clock: the measured times are bench/fsm.py --estimate's (docs/fsm.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.budget import BUDGET_S
from kvweb.constrained import dfa
from kvweb.constrained.dfa import compile_cost, compile_dfa
from kvweb.constrained.nfa import NFA
from kvweb.constrained.regex_parser import PatternError, parse
from kvweb.lab import ParamError
from kvweb.labs.fsm import Fsm
from kvweb.parsing import make
from test_regex import compiled, patterns

LETTERS = "|".join("abcdefghijklmnopqrstuvwxyz")
ALNUM = "|".join("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def reference_subset_construction(
    nfa: NFA, classes: list[int], max_states: int, max_work: float = 0
) -> tuple[list[list[int]], list[bool]]:
    """The construction before the work cap: DFA states keyed by whole epsilon closures
    (frozensets), each closure walked state by state."""
    start = nfa.closure({nfa.start})
    ids = {start: 0}
    order = [start]
    delta: list[list[int]] = []
    for current in order:
        row = []
        for cls in classes:
            reached = {t for s in current for mask, t in nfa.moves[s] if mask & cls}
            if not reached:
                row.append(-1)
                continue
            target = nfa.closure(reached)
            if target not in ids:
                if len(order) >= max_states:
                    raise PatternError("more states than the cap")
                ids[target] = len(order)
                order.append(target)
            row.append(ids[target])
        delta.append(row)
    return delta, [nfa.accept in s for s in order]


class Counted(dfa.Work):
    """`dfa.Work` that keeps the last construction's count for the test to read."""

    last: Counted | None = None

    def __init__(self, cap: float) -> None:
        super().__init__(cap)
        Counted.last = self


@settings(max_examples=200, deadline=None)
@given(patterns)
def test_compiled_dfa_is_unchanged_and_the_estimate_covers_the_counted_work(pattern: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dfa, "Work", Counted)
        new = compiled(pattern)
        counted = Counted.last.steps
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dfa, "subset_construction", reference_subset_construction)
        old = compile_dfa(pattern)
    assert (
        new.table.shape == old.table.shape
        and (new.table == old.table).all()
        and (new.accepting == old.accepting).all()
        and (new.distance == old.distance).all()
        and new.nfa_states == old.nfa_states
    )
    assert compile_cost(parse(pattern)).steps >= 0.5 * counted  # measured: at least 0.99x


@pytest.mark.parametrize(
    "pattern, states",
    [
        (f"({LETTERS}){{0,150}}", 151),  # 97.5 s and 437 MB to check before
        ("(a|b){0,2000}", 2001),  # stalled the served app's other sessions for 26 s
        ("[0-9]{0,1000}[a-z]{0,1000}[A-Z]{0,1000}", 3001),  # 15.9 s at 750 MB
    ],
)
def test_long_repeats_of_wide_alternations_are_admitted_and_compile_quickly(
    pattern: str, states: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dfa, "Work", Counted)
    Counted.last = None
    lab = make("fsm", {"pattern": pattern, "samples": "32", "max_len": "400"})  # estimate, then check
    assert lab.compile().dfa.states == states
    assert lab.estimate().seconds <= BUDGET_S
    # the construction did no more than the estimate counted (each step about a nanosecond: under 0.4 s)
    assert 0 < Counted.last.steps <= compile_cost(parse(pattern)).steps < 0.4 * dfa.STEPS_PER_SECOND


def test_the_widest_default_run_is_within_the_budget() -> None:
    lab = make("fsm", {"pattern": ".*", "samples": "32", "max_len": "400"})  # measured: 7.8 s
    assert lab.estimate().seconds <= BUDGET_S


@pytest.mark.parametrize(
    "texts, lower",
    [
        ({"pattern": f"(.{{0,30}}({ALNUM})){{0,60}}"}, "lower pattern/samples/max_len"),  # estimated 43 s
        (
            {"pattern": f"(.{{0,30}}({ALNUM[:71]})){{0,60}}", "samples": "32", "max_len": "400"},
            "lower pattern/samples/max_len",
        ),  # 18 s of compiling + 8 s of decoding
    ],
)
def test_an_over_budget_pattern_is_refused_before_anything_is_built(
    texts: dict[str, str], lower: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dfa, "Work", Counted)
    Counted.last = None
    with pytest.raises(ParamError) as refused:
        make("fsm", texts)
    assert Counted.last is None  # no subset construction started
    message = str(refused.value)
    assert message.startswith("pattern") and "steps of compiling the pattern" in message and message.endswith(lower)


def test_the_construction_stops_at_its_work_cap() -> None:
    pattern = f"({LETTERS}){{0,150}}"
    with pytest.raises(PatternError, match="the work cap of the subset construction"):
        compile_dfa(pattern, max_work=1e7)
    compile_dfa(pattern)  # within the default cap


def test_a_subset_explosion_is_still_refused_at_the_state_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dfa, "Work", Counted)
    Counted.last = None
    with pytest.raises(ParamError, match="more than 4,000 states"):
        make("fsm", {"pattern": "(a|b)*a(a|b){25}"})
    # the construction stopped at the state cap long before its work cap: 26 M steps, about 26 ms
    assert 0 < Counted.last.steps < 0.05 * dfa.STEPS_PER_SECOND < Counted.last.cap


def test_the_estimate_reads_the_tree_not_the_nfa() -> None:
    cost = compile_cost(parse(f"({LETTERS}){{0,150}}"))
    assert (cost.positions, cost.classes, cost.follows, cost.dfa_states) == (3900, 27, 150, 151)
    assert not cost.ambiguous and compile_cost(parse("(a|b)*a(a|b){25}")).ambiguous
    assert compile_cost(parse("(a{1000}){1000}")).over_nfa_cap
    # a pattern that does not parse or is over the NFA cap costs nothing to compile: check() refuses it
    assert (
        Fsm(pattern="a(b", samples=1, max_len=10).estimate().seconds
        == Fsm(pattern="(a{1000}){1000}", samples=1, max_len=10).estimate().seconds
    )
