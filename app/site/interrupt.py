"""A run the page may stop in place (static site, cross-origin isolated page only).

The page writes SIGINT into Pyodide's interrupt buffer (static/worker.mjs), and Python raises
KeyboardInterrupt wherever the run is. That is only safe while a lab computes: `install` makes
every browser run (app/runner.py) tell the page when it starts and ends, and the page writes
nothing outside one (the end also clears a stop that came too late).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from app import runner


def install(stoppable: Callable[[bool], None]) -> None:
    """`stoppable(on)`: static/worker.mjs's function that marks a run stoppable, or not."""

    @contextmanager
    def guard() -> Iterator[None]:
        stoppable(True)
        try:
            yield
        finally:
            try:
                stoppable(False)
            except KeyboardInterrupt:  # the stop landed just before: the run has ended anyway
                stoppable(False)
                raise

    runner.stoppable_with(guard)
