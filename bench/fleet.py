"""Benchmark: the fleet simulation's speed (simulated seconds per wall second).

Run: .venv/bin/python -m bench.fleet   (figures go to docs/fleet.md by hand)

Scenario A traffic (1000 ShareGPT-like requests) on 4 replicas at 4x the schedulers lab's default
rate (8/s, each replica at about 2/s), each scheduler behind each router, then the single engine
at 2/s for comparison. Goal: >= 1000x real time at 4 replicas. Also the fleet lab's default (five
routers and the single engine, multi-turn) as the app runs it, and a disaggregated fleet.
Best of a few repeats (bench/timing.py).
"""
from __future__ import annotations

import platform
import sys

from bench.timing import best_of
from kvweb.fleet.disaggregation import Link, serve_split
from kvweb.fleet.fleet import serve
from kvweb.fleet.routers import ROUTERS
from kvweb.labs.fleet import FleetLab
from kvweb.labs.schedulers import MODES, SchedulersLab
from kvweb.memo import clear_memos


def speed_table() -> None:
    lab = SchedulersLab(workload="scenario", requests=1000, rate=8.0)
    requests = lab.workload_at(8.0)
    print("| scheduler | router | replicas | simulated s | wall ms | x real time |")
    print("|---|---|---|---|---|---|")
    for mode in MODES:
        for router in ROUTERS:
            run = serve(requests, lambda: lab.scheduler(mode), 4, router)
            sim = max(r.sim_time for r in run.runs)
            wall = best_of(lambda: serve(requests, lambda: lab.scheduler(mode), 4, router))
            print(f"| {mode} | {router} | 4 | {sim:.0f} | {1e3 * wall:.0f} | {sim / wall:,.0f} |")
    single = SchedulersLab(workload="scenario", requests=1000, rate=2.0)
    alone = single.workload_at(2.0)
    for mode in MODES:
        run = single.scheduler(mode).run(alone)
        wall = best_of(lambda: single.scheduler(mode).run(alone))
        print(f"| {mode} | (single engine, 2/s) | 1 | {run.sim_time:.0f} | {1e3 * wall:.0f} | {run.sim_time / wall:,.0f} |")
    for mode in ("sglang", "vllm-v1"):  # the schedulers a split fleet runs (kvweb/labs/fleet.py SPLIT_MODES)
        def split_run(mode: str = mode):  # noqa: ANN202
            return serve_split(requests, lambda: lab.scheduler(mode), 1, 3, "round-robin", Link())
        split, wall = split_run(), best_of(split_run)
        print(f"| {mode} | 1 prefill + 3 decode | 4 | {split.end:.0f} | {1e3 * wall:.0f} | {split.end / wall:,.0f} |")


def lab_table() -> None:
    print("\n| fleet lab | wall ms (cold) |")
    print("|---|---|")
    for values in ({}, {"workload": "few-shot"}, {"workload": "scenario"}, {"prefill_replicas": 1}):
        def cold() -> None:
            clear_memos()
            FleetLab(**values).run()
        print(f"| {values or 'default'} | {1e3 * best_of(cold):.0f} |")


if __name__ == "__main__":
    print(f"Python {sys.version.split()[0]} on {platform.machine()}")
    speed_table()
    lab_table()
