"""Outside text (a CLI flag, a widget's text, a URL value) as a typed, in-range parameter value.

Every value coming from outside arrives as text and goes through `parse`, which either returns
a typed value or raises one `ParamError` line naming the parameter and what is allowed.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

import param

from kvweb.budget import BUDGET_S, MEMORY_MB
from kvweb.lab import Lab, ParamError, Text, get_lab, param_names, shown


def allowed(p: param.Parameter) -> str:
    """What a parameter accepts, in words (for error messages, CLI help and tooltips)."""
    if isinstance(p, param.Selector):
        return "one of " + ", ".join(str(o) for o in p.objects)
    if isinstance(p, param.Boolean):
        return "true or false"
    if isinstance(p, param.Integer):
        lo, hi = p.bounds or (None, None)
        return f"an integer from {lo} to {hi}"
    if isinstance(p, param.Number):
        lo, hi = p.bounds or (None, None)
        return f"a number from {lo:g} to {hi:g}"
    if isinstance(p, Text):
        return f"text of at most {p.max_length} characters"
    return "text"


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}

# Outside text is bounded before it is converted: a number, flag or choice has at most
# MAX_VALUE characters and an integer at most 30 digits, so `int('9' * 5000)` (a ValueError
# past 4300 digits) or `math.isfinite(10**400)` (an OverflowError) never runs. Only ASCII
# digits count: `int()` and `float()` also take '١٢' or full-width digits, but the number a
# person reads must be the number the lab gets. Lone surrogates (undecodable bytes in a
# command line) are refused everywhere: they cannot be printed.
MAX_VALUE = 100
_INTEGER = re.compile(r"[+-]?[0-9]{1,30}")
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,6})?")
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_depth(text: str) -> int:
    """How deep JSON text nests, counted over the raw text before `json.loads` recurses once per
    bracket (brackets inside strings count too: outside text is bounded first, parsed after)."""
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in text if c in "[]{}"), default=0)


def to_number(text: str, integer: bool = False) -> int | float | None:
    """ASCII decimal text (blanks around it ignored) as a finite number, else None.

    -0 gives 0; '1e309', 'nan', 'inf', '1_000', '0x10' and non-ASCII digits give None.
    """
    if len(text) > MAX_VALUE:
        return None
    text = text.strip(" \t\r\n")
    if not (_INTEGER if integer else _DECIMAL).fullmatch(text):
        return None
    if integer:
        return int(text)
    value = float(text)
    return value + 0.0 if math.isfinite(value) else None


def parse(lab: type[Lab], name: str, text: str) -> Any:
    """Turn outside text into a typed, in-range value, or raise one ParamError line."""
    if name not in param_names(lab):
        raise ParamError(
            f"unknown parameter {shown(name)} for lab {lab.lab_name}; allowed: {', '.join(param_names(lab))}"
        )
    p = lab.param[name]
    bad = ParamError(f"{name}: {shown(text)} is not allowed; expected {allowed(p)}")
    if len(text) > (p.max_length if isinstance(p, Text) else MAX_VALUE) or _SURROGATE.search(text):
        raise bad
    if isinstance(p, param.Selector):
        for option in p.objects:
            if str(option) == text:
                return option
        raise bad
    if isinstance(p, param.Boolean):
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise bad
    if isinstance(p, param.Number):
        value = to_number(text, integer=isinstance(p, param.Integer))
        lo, hi = p.bounds
        if value is None or not lo <= value <= hi:
            raise bad
        return value
    return text


def make(
    lab: type[Lab] | str, texts: Mapping[str, str], budget_s: float = BUDGET_S, memory_mb: float = MEMORY_MB
) -> Lab:
    """Strictly build a lab from outside text (CLI, the app's widgets): any bad value, or work over
    the budgets (seconds, MB of memory), is an error."""
    cls = get_lab(lab) if isinstance(lab, str) else lab
    instance = cls(**{k: parse(cls, k, v) for k, v in texts.items()})
    instance.admit(budget_s, memory_mb)
    return instance
