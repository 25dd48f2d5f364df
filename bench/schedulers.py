"""Benchmark: today's schedulers beside the papers' engine (simulated seconds per wall second).

Run: .venv/bin/python -m bench.schedulers   (figures go to docs/today.md by hand)
     .venv/bin/python -m bench.schedulers --profile vllm-v1|sglang

1. Scenario A, 1000 requests (ShareGPT-like), each mode at the lab's default rate (2/s) and at a
   saturating rate (10/s), without and with the animation trace. Goal: >= 2000x real time.
2. The schedulers lab as the app runs it: its default (multi-turn, 300 requests, three modes with
   traces) and the same on few-shot and ShareGPT-like requests. Goal: well under 1 s (Pyodide is
   about twice as slow and the static site should redraw within 1 s).
Best of a few repeats, to leave out the other work on a shared machine; each table row runs the
modes interleaved, so their ratios hold even when the machine's load changes.

In Pyodide under Node: node scripts/pyodide_run.mjs build/pyodide-test -m bench.schedulers
"""

from __future__ import annotations

import cProfile
import platform
import pstats
import sys

import kvweb.labs  # noqa: F401  (registers the labs)
from bench.timing import best_of
from kvweb.lab import no_progress
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.modes import MODES
from kvweb.parsing import make


def speed_table() -> None:
    print("| mode | rate | trace | steps | simulated s | wall ms | x real time |")
    print("|---|---|---|---|---|---|---|")
    for rate in (2.0, 10.0):
        lab = SchedulersLab(workload="scenario", requests=1000, rate=rate)
        requests = lab.workload_at(rate)
        for trace in (False, True):
            for mode in MODES:
                run = lab.run_mode(mode, requests, no_progress, trace=trace)
                wall = best_of(lambda: lab.run_mode(mode, requests, no_progress, trace=trace))
                print(
                    f"| {mode} | {rate:g} | {'yes' if trace else 'no'} | {run.steps} | {run.sim_time:.0f} "
                    f"| {wall * 1e3:.0f} | {run.sim_time / wall:.0f} |"
                )


def lab_table() -> None:
    print("\n| schedulers lab | wall s |")
    print("|---|---|")
    for params in ({}, {"workload": "few-shot"}, {"workload": "sharegpt"}):
        lab = make("schedulers", params)
        print(f"| {params or 'default (multi-turn)'} | {best_of(lab.run, cold=True):.2f} |")


def profile(mode: str) -> None:
    lab = SchedulersLab(workload="scenario", requests=1000, rate=10.0)
    requests = lab.workload_at(10.0)
    cProfile.runctx(
        "lab.run_mode(mode, requests, no_progress)",
        globals(),
        {"lab": lab, "mode": mode, "requests": requests},
        "/tmp/schedulers.prof",
    )
    pstats.Stats("/tmp/schedulers.prof").sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    if "--profile" in sys.argv:
        profile(sys.argv[sys.argv.index("--profile") + 1])
    else:
        print(f"{platform.python_implementation()} {platform.python_version()} on {sys.platform}\n")
        speed_table()
        lab_table()
