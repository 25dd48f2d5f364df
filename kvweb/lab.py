"""The lab contract: a named experiment, a typed parameter schema, and a run().

One schema (param's Parameters on a `Lab` subclass) drives three faces: CLI flags,
the app's widgets and the share-URL query. Every value coming from outside arrives as
text and goes through `parse`, which either returns a typed value or raises one
`ParamError` line naming the parameter and what is allowed.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import param

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    """Default progress sink: runs that are not watched report to nobody."""


class ParamError(ValueError):
    """Bad outside input. The message is one plain line meant for a person."""


class Cancelled(RuntimeError):
    """Raised by a progress callback to stop a long run early."""


class Text(param.String):
    """A string parameter with a length cap, so a URL cannot smuggle in megabytes."""

    __slots__ = ["max_length"]
    _slot_defaults = dict(param.String._slot_defaults, max_length=200)

    def __init__(self, default: str = "", *, max_length: int = 200, **kwargs: Any) -> None:
        super().__init__(default=default, **kwargs)
        self.max_length = max_length


LABS: dict[str, type[Lab]] = {}

# A parameter declared with `precedence=ADVANCED` is an assumption most users leave alone:
# the app folds it away (the CLI and the URL treat it like any other).
ADVANCED = 1.0


class Lab(param.Parameterized):
    """Base of every experiment.

    A subclass sets `lab_name`, `title` and `summary`, declares its parameters with
    bounds (work caps) or choices, and implements `run`, which returns a
    JSON-serialisable dict (with a step-by-step trace inside when the app animates it).
    Subclasses with a `lab_name` register themselves in `LABS`.
    """

    lab_name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.lab_name:
            LABS[cls.lab_name] = cls

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        raise NotImplementedError

    def check(self) -> None:
        """Cross-parameter rules (e.g. a prompt that must fit the pool); raise ParamError."""

    def values(self) -> dict[str, Any]:
        """The parameter values as plain JSON types."""
        return {name: getattr(self, name) for name in param_names(type(self))}


def param_names(lab: type[Lab]) -> list[str]:
    """The lab's own parameters in declaration order (param's `name` left out)."""
    return [n for n in lab.param if n != "name"]


def get_lab(name: str) -> type[Lab]:
    if name not in LABS:
        raise ParamError(f"unknown lab '{name}'; allowed: {', '.join(sorted(LABS))}")
    return LABS[name]


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


def parse(lab: type[Lab], name: str, text: str) -> Any:
    """Turn outside text into a typed, in-range value, or raise one ParamError line."""
    if name not in param_names(lab):
        raise ParamError(
            f"unknown parameter '{name}' for lab {lab.lab_name}; "
            f"allowed: {', '.join(param_names(lab))}"
        )
    p = lab.param[name]
    shown = text if len(text) <= 40 else text[:40] + "..."
    bad = ParamError(f"{name}: {shown!r} is not allowed; expected {allowed(p)}")
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
        try:
            value: float | int = int(text) if isinstance(p, param.Integer) else float(text)
        except ValueError:
            raise bad from None
        if not math.isfinite(value):
            raise bad
        lo, hi = p.bounds or (-math.inf, math.inf)
        if not lo <= value <= hi:
            raise bad
        return value
    if isinstance(p, Text) and len(text) > p.max_length:
        raise bad
    return text


def make(lab: type[Lab] | str, texts: Mapping[str, str]) -> Lab:
    """Strictly build a lab from outside text (CLI): any bad value is an error."""
    cls = get_lab(lab) if isinstance(lab, str) else lab
    instance = cls(**{k: parse(cls, k, v) for k, v in texts.items()})
    instance.check()
    return instance


def from_query(query: Mapping[str, str]) -> tuple[Lab, list[str]]:
    """Leniently build a lab from a URL query: bad values fall back to defaults.

    Returns the lab and the list of plain-text messages to show the user.
    """
    messages: list[str] = []
    try:
        cls = get_lab(query.get("lab", DEFAULT_LAB))
    except ParamError as err:
        messages.append(f"{err}; showing {DEFAULT_LAB}")
        cls = get_lab(DEFAULT_LAB)
    values: dict[str, Any] = {}
    for key, text in query.items():
        if key in ("lab", *URL_EXTRAS):
            continue
        try:
            values[key] = parse(cls, key, text)
        except ParamError as err:
            known = key in param_names(cls)
            messages.append(f"{err}; {'using the default' if known else 'ignored'}")
    instance = cls(**values)
    try:
        instance.check()
    except ParamError as err:
        messages.append(f"{err}; using the defaults")
        instance = cls()
    return instance, messages


DEFAULT_LAB = "roofline"

# Query keys that belong to the app shell, not to a lab's schema.
URL_EXTRAS = ("step", "lang", "page")


def to_query(instance: Lab) -> dict[str, str]:
    """The URL query that restores this lab exactly (every parameter, as text)."""
    query = {"lab": instance.lab_name}
    for name, value in instance.values().items():
        query[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return query


def jsonable(value: Any) -> Any:
    """Plain JSON types for results: numpy scalars and arrays unwrapped, NaN as None."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def flatten(value: Any, prefix: str = "", expand_lists: bool = True) -> list[tuple[str, Any]]:
    """Nested results as (dotted key, scalar) rows, for tables and CSV files.

    With `expand_lists=False` a list stays one row (its value the list itself).
    """
    if isinstance(value, Mapping) or (expand_lists and isinstance(value, list)):
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        rows: list[tuple[str, Any]] = []
        for key, item in items:
            rows += flatten(item, f"{prefix}.{key}" if prefix else str(key), expand_lists)
        return rows
    return [(prefix, value)]
