"""Benchmark: the fleet simulation's speed (simulated seconds per wall second).

Run: .venv/bin/python -m bench.fleet [--estimates [ROW ...]]   (figures go to docs/fleet.md by hand)

Scenario A traffic (1000 ShareGPT-like requests) on 4 replicas at 4x the schedulers lab's default
rate (8/s, each replica at about 2/s), each scheduler behind each router, then the single engine
at 2/s for comparison. Goal: >= 1000x real time at 4 replicas. Also the fleet lab's default (five
routers and the single engine, multi-turn) as the app runs it, and a disaggregated fleet.
Best of a few repeats (bench/timing.py). With --estimates instead: the fleet and plan labs' work
estimates beside the CPU time of their runs (bench/caps.py's style), each run's requests raised to
the most the budget accepts (ROW: only those rows of ESTIMATED, by index): none may take over 1.5x its
estimate's budget, nor under half its estimate.
"""

from __future__ import annotations

import platform
import sys
import time

from bench.timing import best_of
from kvweb.fleet.disaggregation import Link, serve_split
from kvweb.fleet.fleet import serve
from kvweb.fleet.routers import ROUTERS
from kvweb.budget import BUDGET_S
from kvweb.lab import LABS, ParamError
from kvweb.labs.fleet import FleetLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.modes import MODES
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
        print(
            f"| {mode} | (single engine, 2/s) | 1 | {run.sim_time:.0f} | {1e3 * wall:.0f} | {run.sim_time / wall:,.0f} |"
        )
    for mode in ("sglang", "vllm-v1"):  # the schedulers a split fleet runs (kvweb/prefix/modes.py holds_transfers)

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


# (lab, values): fleets with and without splits over the workloads and schedulers, and plans
ESTIMATED = [
    ("fleet", {"routers": "round-robin", "replicas": 8}),
    ("fleet", {"replicas": 4}),
    ("fleet", {"routers": "round-robin", "replicas": 8, "prefill_replicas": 4}),
    ("fleet", {"routers": "round-robin", "replicas": 32, "prefill_replicas": 16}),
    ("fleet", {"routers": "round-robin", "replicas": 8, "prefill_replicas": 4, "workload": "sharegpt", "rate": 16.0}),
    (
        "fleet",
        {
            "routers": "round-robin",
            "replicas": 8,
            "prefill_replicas": 4,
            "scenario": "B",
            "workload": "long-context",
            "rate": 4.0,
        },
    ),
    (
        "fleet",
        {"routers": "round-robin", "replicas": 8, "prefill_replicas": 4, "mode": "vllm-v1", "workload": "few-shot"},
    ),
    (
        "fleet",
        {
            "routers": "least-outstanding",
            "replicas": 16,
            "prefill_replicas": 15,
            "mode": "vllm-v1",
            "scenario": "B",
            "workload": "long-context",
            "rate": 8.0,
        },
    ),
    (
        "fleet",
        {
            "routers": "round-robin",
            "replicas": 8,
            "workload": "fixed",
            "prompt_len": 128,
            "output_len": 8000,
            "max_len": 8192,
            "rate": 50.0,
        },
    ),
    ("fleet", {"routers": "cache-aware,exact-prefix", "replicas": 32, "workload": "few-shot"}),
    ("fleet", {"replicas": 16, "mode": "paper", "workload": "sharegpt", "rate": 20.0}),
    ("plan", {}),
    (
        "plan",
        {
            "model": "llama-3-8b",
            "gpus": "A100-80GB,H100-SXM",
            "tps": "1",
            "weight_precisions": "16-bit",
            "schedulers": "vllm-v1,sglang",
            "replicas": "1,2,4",
            "routers": "round-robin,cost",
            "rate": 20.0,
        },
    ),
    (
        "plan",
        {
            "model": "llama-3-8b",
            "gpus": "H100-SXM",
            "tps": "1",
            "weight_precisions": "16-bit",
            "schedulers": "sglang",
            "replicas": "32",
            "rate": 200.0,
        },
    ),
]


def most_requests(name: str, values: dict) -> int:
    """The most requests (1-5000) the lab's rules and budget accept with these values (bisected)."""
    lo, hi = 1, 5000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            LABS[name](**values, requests=mid).admit()
            lo = mid
        except ParamError:
            hi = mid - 1
    return lo


def estimate_table() -> None:
    print("| lab | values | requests | estimate s | CPU s | estimate / CPU |")
    print("|---|---|---|---|---|---|")
    for name, values in [ESTIMATED[i] for i in map(int, sys.argv[2:])] or ESTIMATED:
        lab = LABS[name](**values, requests=most_requests(name, values))
        clear_memos()
        cpu = time.process_time()
        lab.run()
        cpu = time.process_time() - cpu
        estimate = lab.estimate().seconds
        verdict = (
            " (over 1.5x)" if cpu > 1.5 * max(estimate, BUDGET_S) else " (over 2x high)" if estimate > 2 * cpu else ""
        )
        print(
            f"| {name} | {values or 'defaults'} | {lab.requests} | {estimate:.1f} | {cpu:.2f} | {estimate / cpu:.2f}{verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    print(f"Python {sys.version.split()[0]} on {platform.machine()}")
    if "--estimates" in sys.argv:
        estimate_table()
    else:
        speed_table()
        lab_table()
