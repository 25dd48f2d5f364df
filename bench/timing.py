"""Wall-clock timing shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable

from kvweb.memo import clear_memos


def best_of(fn: Callable[[], object], repeats: int = 3, cold: bool = False) -> float:
    """Fastest of `repeats` runs, in seconds (the least disturbed by other work on a shared machine).
    `cold`: every remembered result is dropped before each run (a lab's second run of the same
    parameters is otherwise a memo lookup)."""
    times = []
    for _ in range(repeats):
        if cold:
            clear_memos()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
