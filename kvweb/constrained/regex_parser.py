"""Regular expression -> syntax tree, over the mini model's character vocabulary.

The supported subset is what a template needs and what the subset construction can
teach: literals, escapes (\\d \\w \\s, their negations, escaped punctuation), classes and
ranges with negation, `.`, `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, `{,n}`, alternation and
groups (`(...)` and `(?:...)`). The whole output must match (an implicit full match), so
anchors are refused, as are look-arounds, backreferences, lazy and possessive
quantifiers. Every refusal is a `PatternError` naming the position.

Character sets are integer bitmasks: bit i stands for `VOCAB[i]`.
Two deliberate differences from Python's `re`: a `{` that does not start a repeat is an
error (write `\\{`), and characters outside the vocabulary are an error.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from kvweb.kv.model import CHAR_ID, VOCAB

FULL = (1 << len(VOCAB)) - 1


class PatternError(ValueError):
    """A pattern the lab cannot compile; the message is one line for a person."""


@dataclass(frozen=True)
class Chars:
    """One character from a set (a literal is a set of one)."""

    mask: int


@dataclass(frozen=True)
class Concat:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """`body` at least `lo` and at most `hi` times (`hi` None: unbounded)."""

    body: Node
    lo: int
    hi: int | None


Node = Chars | Concat | Alt | Repeat


def char_set(chars: str) -> int:
    mask = 0
    for c in chars:
        mask |= 1 << CHAR_ID[c]
    return mask


def chars_of(mask: int) -> str:
    return "".join(c for i, c in enumerate(VOCAB) if mask >> i & 1)


_WORD = string.ascii_letters + string.digits + "_"
CLASS_ESCAPES = {
    "d": char_set(string.digits),
    "D": FULL & ~char_set(string.digits),
    "w": char_set(_WORD),
    "W": FULL & ~char_set(_WORD),
    "s": char_set(" "),
    "S": FULL & ~char_set(" "),  # the only whitespace in the vocabulary
}
_ANCHOR_ESCAPES = set("bBAZzG")
_REPEAT = re.compile(r"\{(\d*)(,?)(\d*)\}")


class _Parser:
    """Recursive descent: alternation > concatenation > quantified atom."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> PatternError:
        return PatternError(f"at position {self.pos if pos is None else pos}: {message}")

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else ""

    def take(self) -> str:
        c = self.peek()
        self.pos += 1
        return c

    def alternation(self) -> Node:
        options = [self.concatenation()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.concatenation())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def concatenation(self) -> Node:
        parts = []
        while self.peek() not in ("", "|", ")"):
            parts.append(self.quantified())
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))

    def quantified(self) -> Node:
        node = self.atom()
        if self.peek() in ("*", "+", "?", "{"):
            node = self.quantifier(node)
            follower = self.peek()
            if follower == "?":
                raise self.error("lazy quantifiers are not supported (the '?' after a repeat)")
            if follower == "+":
                raise self.error("possessive quantifiers are not supported (the '+' after a repeat)")
            if follower in ("*", "{"):
                raise self.error("multiple repeat: put the repeated part in a group, e.g. (a{2}){3}")
        return node

    def quantifier(self, body: Node) -> Node:
        start = self.pos
        c = self.take()
        if c in "*+?":
            return Repeat(body, 0 if c != "+" else 1, 1 if c == "?" else None)
        m = _REPEAT.match(self.text, start)
        if not m or not (m[1] or m[3]):
            raise self.error(
                "'{' does not start a repeat {m}, {m,}, {m,n} or {,n}; write \\{ for a literal brace", start
            )
        self.pos = m.end()
        lo = int(m[1] or 0)
        hi = None if m[2] and not m[3] else int(m[3] or m[1])
        if hi is not None and hi < lo:
            raise self.error(f"repeat {m[0]}: the minimum is greater than the maximum", start)
        return Repeat(body, lo, hi)

    def atom(self) -> Node:
        start = self.pos
        c = self.take()
        if c == "(":
            return self.group(start)
        if c == "[":
            return Chars(self.char_class(start))
        if c == ".":
            return Chars(FULL)
        if c == "\\":
            return Chars(self.escape(start, in_class=False))
        if c in ("^", "$"):
            raise self.error(f"anchor '{c}' is not supported: the whole output always has to match", start)
        if c in ("*", "+", "?", "{"):
            raise self.error(f"'{c}' has nothing to repeat", start)
        return Chars(self.literal(c, start))

    def group(self, start: int) -> Node:
        if self.peek() == "?":
            head = self.text[self.pos : self.pos + 3]
            if head.startswith("?:"):
                self.pos += 2
            elif head[:2] in ("?=", "?!") or head in ("?<=", "?<!"):
                raise self.error("look-arounds are not supported", start)
            elif head == "?P=":
                raise self.error("backreferences are not supported", start)
            else:
                raise self.error(f"group syntax '({head}' is not supported; use (...) or (?:...)", start)
        node = self.alternation()
        if self.peek() != ")":
            raise self.error("missing ')' to close the '('", start)
        self.pos += 1
        return node

    def char_class(self, start: int) -> int:
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        first = self.pos
        mask = 0
        while True:
            if self.peek() == "":
                raise self.error("unterminated character class '['", start)
            if self.peek() == "]" and self.pos != first:
                self.pos += 1
                return FULL & ~mask if negate else mask
            low_pos = self.pos
            low = self.class_item()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                high_pos = self.pos
                high = self.class_item()
                mask |= self.char_range(low, high, low_pos, high_pos)
            else:
                mask |= low

    def class_item(self) -> int:
        start = self.pos
        c = self.take()
        return self.escape(start, in_class=True) if c == "\\" else self.literal(c, start)

    def char_range(self, low: int, high: int, low_pos: int, high_pos: int) -> int:
        if low.bit_count() != 1 or high.bit_count() != 1:
            raise self.error("a range needs single characters at both ends", low_pos)
        a, b = VOCAB[low.bit_length() - 1], VOCAB[high.bit_length() - 1]
        if ord(a) > ord(b):
            raise self.error(f"bad range {a}-{b}: the first character comes after the second", low_pos)
        return char_set("".join(c for c in VOCAB if a <= c <= b))

    def escape(self, start: int, *, in_class: bool) -> int:
        c = self.take()
        if c == "":
            raise self.error("the pattern ends with a lone backslash", start)
        if c in CLASS_ESCAPES:
            return CLASS_ESCAPES[c]
        if c.isdigit() and c != "0" and not in_class:
            raise self.error(f"backreference \\{c} is not supported", start)
        if c in _ANCHOR_ESCAPES and not in_class:
            raise self.error(f"anchor \\{c} is not supported: the whole output always has to match", start)
        if c.isalnum():
            raise self.error(
                f"escape \\{c} is not supported (allowed: \\d \\w \\s \\D \\W \\S and escaped punctuation)", start
            )
        return self.literal(c, start)

    def literal(self, c: str, pos: int) -> int:
        if c not in CHAR_ID:
            raise self.error(f"character {c!r} is not in the model's vocabulary (printable ASCII)", pos)
        return 1 << CHAR_ID[c]


def parse(pattern: str) -> Node:
    """The syntax tree of `pattern`, or a PatternError naming the position."""
    parser = _Parser(pattern)
    node = parser.alternation()
    if parser.pos < len(pattern):  # only a ')' stops the top level early
        raise parser.error("unbalanced ')': no '(' to close")
    return node


def class_label(mask: int) -> str:
    """A character set written back as a regex (a literal, `.`, or a class with ranges)."""
    if mask == FULL:
        return "."
    chars = chars_of(mask)
    if len(chars) == 1:
        return re.escape(chars) if chars != " " else " "
    negate = len(chars) > len(VOCAB) // 2
    if negate:
        chars = chars_of(FULL & ~mask)
    codes = sorted(ord(c) for c in chars)
    runs: list[str] = []
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        lo, hi = _class_char(chr(codes[i])), _class_char(chr(codes[j]))
        runs.append(lo if i == j else lo + hi if j == i + 1 else f"{lo}-{hi}")
        i = j + 1
    return "[" + ("^" if negate else "") + "".join(runs) + "]"


def _class_char(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c
