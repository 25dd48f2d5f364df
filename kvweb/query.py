"""The share-URL query: a lab and every parameter as text, written by `to_query` and read
back leniently by `from_query` (a bad value falls back to its default alone)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kvweb.budget import BUDGET_S, MEMORY_MB
from kvweb.lab import Lab, ParamError, get_lab, param_names, shown
from kvweb.parsing import parse

DEFAULT_LAB = "roofline"

MAX_MESSAGES = 8  # lines from one URL; the rest are counted
_SHOWN_NAMES = 5  # unknown parameter names listed in their one line


def from_query(
    query: Mapping[str, str], ignore: Collection[str] = (), budget_s: float = BUDGET_S, memory_mb: float = MEMORY_MB
) -> tuple[Lab, list[str]]:
    """Leniently build a lab from a URL query: each bad value falls back to its default alone.

    `ignore` names the keys the caller reads itself (the app's page, step, language).

    A failing cross-parameter `check()` or work over the budget (`Lab.admit`) resets the fewest
    given values it takes (see `_settle`), and says which; every other value is kept. Unknown keys are listed in one
    line, and at most MAX_MESSAGES lines come back. Raises nothing for any query (a
    ParamError only if a lab's own defaults failed its check).
    """
    messages: list[str] = []
    try:
        cls = get_lab(query.get("lab", DEFAULT_LAB))
    except ParamError as err:
        messages.append(f"{err}; showing {DEFAULT_LAB}")
        cls = get_lab(DEFAULT_LAB)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for key, text in query.items():
        if key == "lab" or key in ignore:
            continue
        if key not in param_names(cls):
            unknown.append(key)
            continue
        try:
            values[key] = parse(cls, key, text)
        except ParamError as err:
            messages.append(f"{err}; using the default")
    if unknown:
        names = [shown(k, 20) for k in unknown[:_SHOWN_NAMES]] + (["..."] if len(unknown) > _SHOWN_NAMES else [])
        messages.append(
            f"{len(unknown)} unknown parameter{'s' if len(unknown) > 1 else ''} for lab {cls.lab_name} "
            f"ignored: {', '.join(names)}; allowed: {', '.join(param_names(cls))}"
        )
    instance, problem = _settle(cls, values, budget_s, memory_mb)
    messages += [problem] if problem else []
    if len(messages) > MAX_MESSAGES:
        messages[MAX_MESSAGES - 1 :] = [f"... and {len(messages) - MAX_MESSAGES + 1} more problems"]
    return instance, messages


def _mentioned(cls: type[Lab], message: str) -> list[str]:
    """The lab's parameters a message names, in the order it first names them."""
    return [w for w in dict.fromkeys(re.findall(r"\w+", message, re.ASCII)) if w in param_names(cls)]


def _settle(
    cls: type[Lab], values: Mapping[str, Any], budget_s: float = BUDGET_S, memory_mb: float = MEMORY_MB
) -> tuple[Lab, str | None]:
    """The lab with the fewest given values reset to their defaults that passes `admit()`.

    Values the error names are reset first, then any other given value, one at a time,
    until the check passes; then resets the check turns out not to need are undone.
    Returns the lab and, if anything was reset, the first error and the names reset.
    """

    def attempt(reset: Iterable[str]) -> tuple[Lab, ParamError | None]:
        instance = cls(**{k: v for k, v in values.items() if k not in reset})
        try:
            instance.admit(budget_s, memory_mb)
        except ParamError as err:
            return instance, err
        return instance, None

    instance, first = attempt(())
    if first is None:
        return instance, None
    reset: list[str] = []
    error: ParamError | None = first
    while error is not None:
        left = [n for n in (*_mentioned(cls, str(error)), *values) if n in values and n not in reset]
        if not left:
            raise error  # the lab's own defaults fail its check: a bug in the lab
        reset.append(left[0])
        error = attempt(reset)[1]
    while len(reset) > 1:  # until giving back any one of them fails the check again
        needless = next((n for n in reset if attempt([m for m in reset if m != n])[1] is None), None)
        if needless is None:
            break
        reset.remove(needless)
    return attempt(reset)[0], f"{first}; using the defaults for {', '.join(reset)}"


def to_query(instance: Lab) -> dict[str, str]:
    """The URL query that restores this lab exactly (every parameter, as text)."""
    query = {"lab": instance.lab_name}
    for name, value in instance.values().items():
        query[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return query
