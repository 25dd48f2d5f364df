"""The lab contract: a named experiment, a typed parameter schema, and a run().

One schema (param's Parameters on a `Lab` subclass) drives three faces: CLI flags,
the app's widgets and the share-URL query. Every value coming from outside arrives as
text and goes through `parse`, which either returns a typed value or raises one
`ParamError` line naming the parameter and what is allowed.
"""
from __future__ import annotations

import math
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import param

from kvweb.budget import BUDGET_S, Estimate, refusal

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

# A parameter declared with `precedence=ADVANCED` is a detail most users leave alone: the app
# folds it away (the CLI and the URL treat it like any other). `PAPER_GPU` marks the cost
# model's assumptions (kvweb/labs/paper_gpu.py), folded together under "assumptions" and the
# same in every lab that prices work.
ADVANCED = 1.0
PAPER_GPU = 2.0


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

    def estimate(self) -> Estimate:
        """The run's work, counted from the parameters without running anything (kvweb/budget.py)."""
        raise NotImplementedError

    def admit(self, budget_s: float = BUDGET_S) -> None:
        """What a run from outside must pass: the lab's own rules, then its work estimate against
        the budget (seconds); raise ParamError."""
        self.check()
        estimate = self.estimate()
        if estimate.seconds > budget_s:
            raise ParamError(refusal(estimate, budget_s))

    def values(self) -> dict[str, Any]:
        """The parameter values as plain JSON types."""
        return {name: getattr(self, name) for name in param_names(type(self))}

    def key(self, left_out: Iterable[str] = (), **extra: Any) -> str:
        """A `Memo` key for a computation that reads every parameter but `left_out`: a change of
        a left-out one finds the remembered result. `extra` adds values (or puts them in place
        of parameters): which manager or mode, a sweep point's own values."""
        out = set(left_out)
        inputs = {n: v for n, v in self.values().items() if n not in out}
        return repr(sorted({**inputs, **extra}.items()))


def param_names(lab: type[Lab]) -> list[str]:
    """The lab's own parameters (param's `name` left out): its main ones first, then the
    details, then the paper GPU's assumptions, each group in declaration order."""
    return sorted((n for n in lab.param if n != "name"), key=lambda n: lab.param[n].precedence or 0)


def get_lab(name: str) -> type[Lab]:
    if name not in LABS:
        raise ParamError(f"unknown lab {shown(name)}; allowed: {', '.join(sorted(LABS))}")
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


def shown(text: str, limit: int = 40) -> str:
    """Outside text quoted for a message: at most `limit` characters, escapes made visible."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse(lab: type[Lab], name: str, text: str) -> Any:
    """Turn outside text into a typed, in-range value, or raise one ParamError line."""
    if name not in param_names(lab):
        raise ParamError(
            f"unknown parameter {shown(name)} for lab {lab.lab_name}; "
            f"allowed: {', '.join(param_names(lab))}"
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


def make(lab: type[Lab] | str, texts: Mapping[str, str], budget_s: float = BUDGET_S) -> Lab:
    """Strictly build a lab from outside text (CLI, the app's widgets): any bad value, or work over
    the budget (seconds), is an error."""
    cls = get_lab(lab) if isinstance(lab, str) else lab
    instance = cls(**{k: parse(cls, k, v) for k, v in texts.items()})
    instance.admit(budget_s)
    return instance


MAX_MESSAGES = 8  # lines from one URL; the rest are counted
_SHOWN_NAMES = 5  # unknown parameter names listed in their one line


def from_query(query: Mapping[str, str], budget_s: float = BUDGET_S) -> tuple[Lab, list[str]]:
    """Leniently build a lab from a URL query: each bad value falls back to its default alone.

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
        if key in ("lab", *URL_EXTRAS):
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
        messages.append(f"{len(unknown)} unknown parameter{'s' if len(unknown) > 1 else ''} for lab {cls.lab_name} "
                        f"ignored: {', '.join(names)}; allowed: {', '.join(param_names(cls))}")
    instance, problem = _settle(cls, values, budget_s)
    messages += [problem] if problem else []
    if len(messages) > MAX_MESSAGES:
        messages[MAX_MESSAGES - 1:] = [f"... and {len(messages) - MAX_MESSAGES + 1} more problems"]
    return instance, messages


def _mentioned(cls: type[Lab], message: str) -> list[str]:
    """The lab's parameters a message names, in the order it first names them."""
    return [w for w in dict.fromkeys(re.findall(r"\w+", message, re.ASCII)) if w in param_names(cls)]


def _settle(cls: type[Lab], values: Mapping[str, Any], budget_s: float = BUDGET_S) -> tuple[Lab, str | None]:
    """The lab with the fewest given values reset to their defaults that passes `admit()`.

    Values the error names are reset first, then any other given value, one at a time,
    until the check passes; then resets the check turns out not to need are undone.
    Returns the lab and, if anything was reset, the first error and the names reset.
    """
    def attempt(reset: Iterable[str]) -> tuple[Lab, ParamError | None]:
        instance = cls(**{k: v for k, v in values.items() if k not in reset})
        try:
            instance.admit(budget_s)
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


DEFAULT_LAB = "roofline"

# Query keys that belong to the app shell, not to a lab's schema.
URL_EXTRAS = ("step", "lang", "page", "tour")


def to_query(instance: Lab) -> dict[str, str]:
    """The URL query that restores this lab exactly (every parameter, as text)."""
    query = {"lab": instance.lab_name}
    for name, value in instance.values().items():
        query[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return query


_LEAVES = frozenset({int, str, bool, type(None)})  # types that are their own JSON
_NUMBERS = frozenset({int, float, bool})  # their own JSON when finite


def jsonable(value: Any) -> Any:
    """Plain JSON types for results: numpy scalars and arrays unwrapped, NaN as None.

    The app converts every result, and a serving lab's trace has about 250 thousand numbers:
    exact built-in types are told apart first, plain items of a list or dict are taken without
    a call, and a list of plain items is taken whole (the isinstance chain alone took 0.5 s of an
    engine change in Pyodide).
    """
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is list or kind is tuple:
        kinds = set(map(type, value))  # a trace's lists hold one type: told apart in C, not per item
        if kinds <= _LEAVES or (kinds <= _NUMBERS and all(map(math.isfinite, value))):
            return list(value)
        return [v if (t := type(v)) in _LEAVES or (t is float and math.isfinite(v)) else jsonable(v) for v in value]
    if kind is dict:
        return {str(k): v if (t := type(v)) in _LEAVES or (t is float and math.isfinite(v)) else jsonable(v)
                for k, v in value.items()}
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


# -- results labs remember ------------------------------------------------------------------
# In the app a widget change reruns a lab with one parameter changed, so much of the new run is
# the old run's work again (a memory manager whose inputs did not change, a sample whose seed is
# still among the samples). A lab keeps such pieces in a `Memo`: a small dictionary shared by
# every session, least recently used dropped first, so memory stays bounded. Keys must hold every
# input the piece depends on; results are shared, so callers only read them.
T = TypeVar("T")

_ALL: weakref.WeakSet[Memo] = weakref.WeakSet()


def clear_memos() -> None:
    """Forget every kept result (benchmarks measure cold runs after this)."""
    for memo in list(_ALL):
        memo.clear()


class Memo(Generic[T]):
    def __init__(self, keep: int) -> None:
        if keep < 1:
            raise ValueError("a memo keeps at least one result")
        self.keep = keep
        self._kept: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        _ALL.add(self)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result kept for `key`, or `compute()` (outside the lock: runs may take a while),
        kept from now on."""
        kept = self.find(key)
        if kept is None:
            kept = compute()
            self.put(key, kept)
        return kept

    def find(self, key: Hashable) -> T | None:
        """The result kept for `key`, or None (results are never None)."""
        with self._lock:
            if key not in self._kept:
                return None
            self._kept.move_to_end(key)
            return self._kept[key]

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.keep:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
