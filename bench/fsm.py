"""Benchmark: compile time (regex -> compressed DFA) and per-step mask time.

Run: .venv/bin/python -m bench.fsm   (figures go to docs/fsm.md by hand)

Compile time is parse + Thompson NFA + subset construction + trim + Hopcroft
minimisation + chain compression. Mask time is one `choices()` call (the mask from the
DFA state plus the length budget) averaged over the states of a decoded output.
Decoding figures use the mini model (one sample, seed 0).
"""
from __future__ import annotations

import statistics
import time

from bench.timing import best_of
from kvweb.constrained.decoding import choices, decode
from kvweb.constrained.dfa import compile_dfa
from kvweb.constrained.jump_forward import compress
from kvweb.kv.model import MiniModel

FIELDS = [f"field_{name}" for name in (
    "customer", "account", "country", "city", "street", "postcode", "phone", "email", "birthdate",
    "currency", "amount", "quantity", "product", "category", "status", "priority", "channel",
    "language", "timezone", "comment")]

PATTERNS = {
    "email": r"[a-z0-9._]{1,20}@[a-z0-9]{1,12}\.(com|org|net|edu)",
    "phone": r"\+[0-9]{1,3} \([0-9]{3}\) [0-9]{3}-[0-9]{4}",
    "date": r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    "ipv4": r"((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    "url": r"https?://(www\.)?[a-z0-9-]{1,20}\.(com|org|io)(/[a-z0-9_-]{1,12}){0,3}",
    "record-20": "; ".join(f"{f}: [a-z0-9]{{1,8}}" for f in FIELDS) + r"\.",
}


def main() -> None:
    model = MiniModel()
    print("| pattern | chars | DFA states | jump edges | compile ms | mask us/step "
          "| output chars | forwards plain | forwards compressed | saved |")
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
            best_of(lambda: [choices(fsm, state, room) for _ in range(100)], 5) / 100 for state, room in walk)
        saved = 1 - jumped.forwards / plain.forwards
        print(f"| {name} | {len(pattern)} | {fsm.dfa.states} | {len(fsm.jumps)} | {compile_s * 1e3:.1f} "
              f"| {mask_s * 1e6:.1f} | {len(plain.text)} | {plain.forwards} | {jumped.forwards} | {saved:.0%} |")
    explosion = r"(a|b)*a(a|b){25}"
    t = time.perf_counter()
    try:
        compile_dfa(explosion)
    except ValueError as err:
        print(f"\n`{explosion}` refused after {(time.perf_counter() - t) * 1e3:.0f} ms: {err}")


if __name__ == "__main__":
    main()
