"""Results as plain JSON types, as (dotted key, scalar) rows, and as text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

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
        return {
            str(k): v if (t := type(v)) in _LEAVES or (t is float and math.isfinite(v)) else jsonable(v)
            for k, v in value.items()
        }
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


def number(value: Any, digits: int = 6) -> str:
    """A figure as text, by one rule for the CLI, the app's tables and the report: integers
    (and whole floats, such as byte counts) with thousands separators, other floats to `digits`
    significant digits and never in exponent form from 1 up (1,555 rather than 1.55e+03)."""
    if value is None or isinstance(value, (bool, str)):
        return "-" if value is None else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:,.0f}"
    return f"{value:,.{digits}g}"
