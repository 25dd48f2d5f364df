"""The lab contract: a named experiment, a typed parameter schema, and a run().

One schema (param's Parameters on a `Lab` subclass) drives three faces: CLI flags,
the app's widgets and the share-URL query. Outside text becomes parameter values in
kvweb/parsing.py; a bad value raises one `ParamError` line naming the parameter and what is
allowed, quoting the text with `shown`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import param

from kvweb.budget import BUDGET_S, MEMORY_MB, Estimate, refused

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
    # Parameters a lab inherits but does not take: no CLI flag, widget or URL key (a URL that
    # names one gets the message for an unknown key), and the lab's code reads their defaults.
    dropped: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.lab_name:
            LABS[cls.lab_name] = cls

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        raise NotImplementedError

    def ignored(self) -> tuple[str, ...]:
        """Parameters these values leave unread (a preset in place of a pattern): the app shows
        their widgets disabled, so no box shows a value the run does not use."""
        return ()

    def check(self) -> None:
        """Cross-parameter rules (e.g. a prompt that must fit the pool); raise ParamError."""

    def estimate(self) -> Estimate:
        """The run's work, counted from the parameters without running anything (kvweb/budget.py)."""
        raise NotImplementedError

    def admit(self, budget_s: float = BUDGET_S, memory_mb: float = MEMORY_MB) -> None:
        """What a run from outside must pass: the lab's own rules, then its estimate against the
        budgets of time (seconds) and memory (MB); raise ParamError."""
        self.check()
        refusal = refused(self.estimate(), budget_s, memory_mb)
        if refusal:
            raise ParamError(refusal)

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
    """The lab's own parameters (param's `name` and those it `dropped` left out): its main ones
    first, then the details, then the paper GPU's assumptions, each group in declaration order."""
    return sorted(
        (n for n in lab.param if n != "name" and n not in lab.dropped), key=lambda n: lab.param[n].precedence or 0
    )


def get_lab(name: str) -> type[Lab]:
    if name not in LABS:
        raise ParamError(f"unknown lab {shown(name)}; allowed: {', '.join(sorted(LABS))}")
    return LABS[name]


def shown(text: str, limit: int = 40) -> str:
    """Outside text quoted for a message: at most `limit` characters, escapes made visible."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
