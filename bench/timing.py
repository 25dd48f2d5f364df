"""Wall-clock timing shared by the benchmarks."""
from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 3) -> float:
    """Fastest of `repeats` runs, in seconds (the least disturbed by other work on a shared machine)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
