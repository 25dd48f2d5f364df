"""Benchmark: the serving simulator's speed (simulated seconds per wall second).

Run: .venv/bin/python -m bench.serving   (figures go to docs/engine.md by hand)

1. Scenario A, 1000 requests, each memory manager, at the engine lab's default rate (2/s) and
   at a saturating rate (10/s), with and without the animation trace.
2. The whole comparison the app offers: the engine lab (paged vs every reserved manager, with
   traces), the max-rate lab (binary search for all four managers) and the block-size sweep.
Best of a few repeats, to leave out the other work on a shared machine.

In Pyodide under Node (the same run in the browser's Python):
  node scripts/pyodide_run.mjs build/pyodide-test -m bench.serving
(build/pyodide-test comes from scripts/test-pyodide.sh; the repository's own kvweb is used.)
"""

from __future__ import annotations

import cProfile
import platform
import pstats
import sys

import kvweb.labs  # noqa: F401  (registers the labs)
from bench.timing import best_of
from kvweb.parsing import make
from kvweb.serving.loop.engine_setup import MEMORIES, Setup


def speed_table() -> None:
    print("| memory | rate | trace | steps | simulated s | wall ms | x real time |")
    print("|---|---|---|---|---|---|---|")
    for rate in (2.0, 10.0):
        for memory in MEMORIES:
            setup = Setup("A", memory)
            requests = setup.workload(1000, rate, seed=0)
            for trace in (False, True):
                run = setup.run(requests, trace=trace)
                wall = best_of(lambda: setup.run(requests, trace=trace))
                print(
                    f"| {memory} | {rate:g} | {'yes' if trace else 'no'} | {run.steps} | {run.sim_time:.0f} "
                    f"| {wall * 1e3:.0f} | {run.sim_time / wall:.0f} |"
                )


def comparison() -> None:
    parts = {
        "engine lab x3 (paged vs max, pow2, oracle; 1000 requests, traces)": lambda: [
            make("engine", {"memory": "paged", "compare": m}).run() for m in ("max", "pow2", "oracle")
        ],
        "max-rate lab (4 managers, 500 requests per trial)": lambda: make("max-rate", {}).run(),
        "sweep lab, block_size (9 runs, 500 requests)": lambda: make("sweep", {"sweep": "block_size"}).run(),
    }
    total = 0.0
    print("\n| part | wall s |")
    print("|---|---|")
    for name, fn in parts.items():
        wall = best_of(fn, 2, cold=True)
        total += wall
        print(f"| {name} | {wall:.2f} |")
    print(f"| **total** | **{total:.2f}** |")


def profile() -> None:
    setup = Setup("A", "paged")
    requests = setup.workload(1000, 10.0, seed=0)
    cProfile.runctx("setup.run(requests)", globals(), {"setup": setup, "requests": requests}, "/tmp/engine.prof")
    pstats.Stats("/tmp/engine.prof").sort_stats("tottime").print_stats(10)


if __name__ == "__main__":
    if "--profile" in sys.argv:
        profile()
    else:
        print(f"{platform.python_implementation()} {platform.python_version()} on {sys.platform}\n")
        speed_table()
        comparison()
