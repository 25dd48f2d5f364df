"""Benchmark: compile time (regex -> compressed DFA) and per-step mask time.

Run: .venv/bin/python -m bench.fsm   (figures go to docs/fsm.md by hand)
     .venv/bin/python -m bench.fsm --estimate   (the compile estimate against measured CPU time)

Compile time is parse + Thompson NFA + subset construction + trim + Hopcroft
minimisation + chain compression. Mask time is one `choices()` call (the mask from the
DFA state plus the length budget) averaged over the states of a decoded output.
Decoding figures use the mini model (one sample, seed 0).
"""

from __future__ import annotations

import statistics
import sys
import time

from bench.timing import best_of
from kvweb.constrained.decoding import choices, decode
from kvweb.constrained import dfa as dfa_module
from kvweb.constrained.dfa import compile_cost, compile_dfa
from kvweb.constrained.jump_forward import compress
from kvweb.constrained.regex_parser import parse
from kvweb.kv.model import MiniModel
from kvweb.labs.fsm import PRESETS

FIELDS = [
    f"field_{name}"
    for name in (
        "customer",
        "account",
        "country",
        "city",
        "street",
        "postcode",
        "phone",
        "email",
        "birthdate",
        "currency",
        "amount",
        "quantity",
        "product",
        "category",
        "status",
        "priority",
        "channel",
        "language",
        "timezone",
        "comment",
    )
]

PATTERNS = {
    "email": r"[a-z0-9._]{1,20}@[a-z0-9]{1,12}\.(com|org|net|edu)",
    "phone": r"\+[0-9]{1,3} \([0-9]{3}\) [0-9]{3}-[0-9]{4}",
    "date": r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    "ipv4": r"((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    "url": r"https?://(www\.)?[a-z0-9-]{1,20}\.(com|org|io)(/[a-z0-9_-]{1,12}){0,3}",
    "record-20": "; ".join(f"{f}: [a-z0-9]{{1,8}}" for f in FIELDS) + r"\.",
}

LETTERS = "|".join("abcdefghijklmnopqrstuvwxyz")
ALNUM = "|".join("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")

# a spread for the compile estimate: the templates, the patterns of issue "whatever a user brings"
# (item 4), long repeats of wide alternations and classes, and subset explosions up to the state cap
ESTIMATED = {
    **PATTERNS,
    **{f"preset {name}": pattern for name, pattern in PRESETS.items()},
    "letters{0,150}": f"({LETTERS}){{0,150}}",
    "(a|b){0,2000}": "(a|b){0,2000}",
    "digits, lower, upper {0,1000}": "[0-9]{0,1000}[a-z]{0,1000}[A-Z]{0,1000}",
    ".{0,3999}": ".{0,3999}",
    "alnum{0,90}": f"({ALNUM}){{0,90}}",
    "words{0,300}": "([a-z]{1,8} ){0,300}",
    "(x{0,30}y){0,60}": "(x{0,30}y){0,60}",
    "(a*b*c*d*e*){0,300}": "(a*b*c*d*e*){0,300}",
    r"(\d+\.){0,1000}": r"(\d+\.){0,1000}",
    "([a-z]|[a-m][0-9]){0,1000}": "([a-z]|[a-m][0-9]){0,1000}",
    "(a|b)*a(a|b){25}": "(a|b)*a(a|b){25}",
    "(.{0,60}x){0,60}": "(.{0,60}x){0,60}",
    "(.{0,100}x){0,45}": "(.{0,100}x){0,45}",
    "(.{0,60}[a-j]){0,60}": "(.{0,60}[a-j]){0,60}",
    "(.{0,30}letters){0,60}": f"(.{{0,30}}({LETTERS})){{0,60}}",
    "(.{0,100}4 classes){0,40}": r"(.{0,100}[!-/][:-@][\[-`][{-~]){0,40}",
    "(.{0,10}letters){0,60}": f"(.{{0,10}}({LETTERS})){{0,60}}",
    "(.{0,10}x){0,45}": "(.{0,10}x){0,45}",
    "(a|b)*a(a|b){12}.{0,1000}": "(a|b)*a(a|b){12}.{0,1000}",
    "(.*[a-m].*[n-z]){0,40}": "(.*[a-m].*[n-z]){0,40}",
}


class _Counted(dfa_module.Work):
    """`Work` that keeps its last count, for the table."""

    last = 0.0

    def add(self, steps: float) -> None:
        _Counted.last = self.steps + steps
        super().add(steps)


def estimates() -> None:
    """Each pattern's estimate (compile_cost, seconds) beside the CPU time of compiling it (parse
    to compressed DFA, or to the refusal at a cap; best of 3) and the construction's counted work."""
    dfa_module.Work = _Counted
    print(
        "| pattern | NFA states | positions | classes | DFA states est. | estimate s | measured s "
        "| estimate / measured | counted s | result |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for name, pattern in ESTIMATED.items():
        cost = compile_cost(parse(pattern))
        outcome = []

        def once() -> None:
            try:
                outcome[:] = [f"{compress(compile_dfa(pattern)).dfa.states} states"]
            except ValueError as err:
                outcome[:] = ["refused: " + str(err).split(" (")[0].split(";")[0]]

        t = time.process_time()
        once()
        first = time.process_time() - t
        measured = min([first] + [best_cpu(once) for _ in range(2 if first < 3 else 0)])
        estimate = cost.steps / dfa_module.STEPS_PER_SECOND
        ratios.append((estimate / measured, name, measured))
        print(
            f"| {name.replace('|', chr(92) + '|')} | {cost.nfa_states:,} | {cost.positions:,} | {cost.classes} | {cost.dfa_states:,} "
            f"| {estimate:.3f} | {measured:.3f} | {estimate / measured:.2f} "
            f"| {_Counted.last / dfa_module.STEPS_PER_SECOND:.3f} | {outcome[0]} |"
        )
    low, high = min(ratios), max(ratios)
    print(f"\nworst under-estimate: {low[0]:.2f}x ({low[1]}); worst over-estimate: {high[0]:.2f}x ({high[1]})")
    slow = [r for r in ratios if r[2] >= 0.05]
    low, high = min(slow), max(slow)
    print(
        f"patterns measured at 0.05 s or more: worst under-estimate {low[0]:.2f}x ({low[1]}); "
        f"worst over-estimate {high[0]:.2f}x ({high[1]})"
    )


def best_cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    model = MiniModel()
    print(
        "| pattern | chars | DFA states | jump edges | compile ms | mask us/step "
        "| output chars | forwards plain | forwards compressed | saved |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, pattern in PATTERNS.items():
        compile_s = best_of(lambda: compress(compile_dfa(pattern)), 5)
        fsm = compress(compile_dfa(pattern))
        max_len = int(fsm.dfa.distance[0]) + 100
        plain = decode(model, fsm, max_len, 0, compressed=False)
        jumped = decode(model, fsm, max_len, 0, compressed=True)
        assert plain.text == jumped.text
        walk = [(s.state, max_len - s.emitted + len(s.chars)) for s in plain.steps]
        mask_s = statistics.mean(
            best_of(lambda: [choices(fsm, state, room) for _ in range(100)], 5) / 100 for state, room in walk
        )
        saved = 1 - jumped.forwards / plain.forwards
        print(
            f"| {name} | {len(pattern)} | {fsm.dfa.states} | {len(fsm.jumps)} | {compile_s * 1e3:.1f} "
            f"| {mask_s * 1e6:.1f} | {len(plain.text)} | {plain.forwards} | {jumped.forwards} | {saved:.0%} |"
        )
    explosion = r"(a|b)*a(a|b){25}"
    t = time.perf_counter()
    try:
        compile_dfa(explosion)
    except ValueError as err:
        print(f"\n`{explosion}` refused after {(time.perf_counter() - t) * 1e3:.0f} ms: {err}")


if __name__ == "__main__":
    estimates() if "--estimate" in sys.argv[1:] else main()
