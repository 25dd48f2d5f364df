"""Benchmark: each lab's work estimate checked by search (issue 39; the table goes to docs/input.md).

Run: .venv/bin/python -m bench.estimates [--random N] [--corners N] [--budget S] [--seed K] [LAB ...]

bench/caps.py tries each lab at its caps; here the parameter space is searched where the work may
hide. Per lab: `--corners` of its corners, drawn at random (one parameter moved from the default:
every number to the bottom and to the top of its bounds, every other option of every choice; and
every number at the top at once), and `--random` random points (each number uniform in its
bounds, log-uniform where they span more than 100x; each choice any option), and `HIDDEN`,
issue 39's runs where the work hid. A point the estimate puts over a small budget (`--budget`
seconds, or the lab's defaults' estimate if that is more) is brought within it as bench/caps.py
does (its work parameters moved back towards their defaults). Each runs in a child process
(`caps.measure`) under a CPU-time limit of `OVER` budgets: its CPU seconds and its peak memory
(the growth of the child's ru_maxrss during the run) beside the estimate; a point the lab's run
refuses (a ParamError its check let through) or crashes on is counted apart. The table gives
per lab the worst ratio of CPU time to estimate among runs of at least `MIN_CPU_S` (below it a
run is the lab's fixed cost: imports, the mini model's weights), with that run; then the worst
ratio of peak memory to the estimate's (`Estimate.bytes`) among runs that grew by at least
`MIN_MB`, with that run, and the largest peak; then each crash, with its run.
"""

from __future__ import annotations

import argparse
import math
import random
import subprocess
from datetime import date
from typing import Any

import param

import kvweb.labs  # noqa: F401  (registers every lab)
from bench.caps import described, measure, within_budget
from kvweb.budget import MB, Estimate
from kvweb.lab import LABS, param_names
from kvweb.query import from_query

BUDGET_S = 3.0  # the small budget each point is brought within (seconds of work by the estimate)
OVER = 4  # the CPU-time limit per run, in budgets: a run past it counts as over OVER x its estimate
MIN_CPU_S = 0.5  # runs shorter than this are fixed costs, not counted in the ratio
MIN_MB = 100  # runs that grow less than this are mostly what any run allocates (imports on first use, its result)
LOG_SPAN = 100  # bounds wider than this ratio are sampled log-uniformly
# Issue 39's runs where the work hid (texts the sampling leaves at their defaults), each brought
# within the budget and run with its lab's points
HIDDEN = [
    {
        "lab": "fleet",
        "scenario": "B",
        "workload": "multi-turn",
        "requests": "500",
        "rate": "1000",
        "replicas": "32",
        "block_size": "1",
        "mode": "vllm-v1",
        "routers": "round-robin,least-outstanding,cache-aware,exact-prefix,cost",
    },
    {
        "lab": "plan",
        "requests": "200",
        "rate": "1000",
        "gpus": "A100-40GB,A100-80GB,H100-SXM,H200",
        "tps": "1,2,4,8",
        "weight_precisions": "16-bit,fp8,int8,int4",
        "kv_precisions": "16-bit,fp8",
        "schedulers": "paper,vllm-v1,sglang",
        "replicas": "1,2,4,8",
        "routers": "round-robin,cache-aware",
    },
    {"lab": "fsm", "samples": "32", "max_len": "400", "pattern": ".*"},
]


def corners(name: str) -> list[dict[str, str]]:
    """The lab's corners: one parameter at a time at each end of its bounds, or at each other
    option of a choice; and every number at the top at once."""
    cls = LABS[name]
    out, top = [], {}
    for n in param_names(cls):
        p = cls.param[n]
        if isinstance(p, param.Selector):
            out += [{"lab": name, n: str(option)} for option in p.objects if option != p.default]
        elif isinstance(p, param.Number) and None not in (p.bounds or (None,)):
            out += [{"lab": name, n: str(end)} for end in p.bounds if end != p.default]
            top[n] = str(p.bounds[1])
    return [{"lab": name, **top}, *out]


def random_point(name: str, rng: random.Random) -> dict[str, str]:
    """Every number and choice of the lab drawn at random (texts keep their defaults)."""
    cls = LABS[name]
    query = {"lab": name}
    for n in param_names(cls):
        p = cls.param[n]
        if isinstance(p, param.Selector):
            query[n] = str(rng.choice(list(p.objects)))
        elif isinstance(p, param.Boolean):
            query[n] = str(rng.random() < 0.5).lower()
        elif isinstance(p, param.Number) and None not in (p.bounds or (None,)):
            lo, hi = p.bounds
            if lo >= 0 and hi > LOG_SPAN * max(lo, 1):
                value = math.exp(rng.uniform(math.log(max(lo, 1)), math.log(hi)))  # from 1 when lo is 0
            else:
                value = rng.uniform(lo, hi)
            query[n] = str(round(value) if isinstance(p, param.Integer) else value)
    return query


def within(query: dict[str, str], budget_s: float) -> dict[str, str]:
    """The query as the lab settles it (refused values back to their defaults), brought within the budget."""
    lab, _ = from_query(query, budget_s=float("inf"), memory_mb=float("inf"))
    if lab.estimate().seconds <= budget_s:
        return query
    return within_budget(query, budget_s)


def measured(query: dict[str, str], cap_s: float) -> dict[str, Any] | None:
    """`caps.measure` under a CPU-time limit. None: the lab's run refused its values (a ParamError
    its `check` let through, e.g. layer-memory's mxfp4 weights on a model without experts); a run
    that failed otherwise comes back with `crashed`, its error's last line."""
    try:
        return measure(query, cap_s, cpu=True)
    except subprocess.CalledProcessError as err:
        last = err.stderr.strip().splitlines()[-1]
        if last.startswith("kvweb.lab.ParamError"):
            return None
        return {"query": query, "messages": [], "crashed": last}


def estimated(run: dict[str, Any]) -> Estimate:
    return from_query(run["query"], budget_s=float("inf"), memory_mb=float("inf"))[0].estimate()


def ratio(run: dict[str, Any], cap_s: float) -> float | None:
    """CPU time over the estimate; a run stopped at the limit counts as the limit; None: too short."""
    if run["cpu_s"] is None:
        return cap_s / max(estimated(run).seconds, 1e-9)
    if run["cpu_s"] < MIN_CPU_S:
        return None
    return run["cpu_s"] / max(run["estimate"], 1e-9)


def memory_ratio(run: dict[str, Any]) -> float | None:
    """Peak memory over the estimate's (inf: the estimate counts none); None: too little to tell, or stopped."""
    if run["peak_mb"] is None or run["peak_mb"] < MIN_MB:
        return None
    megabytes = estimated(run).bytes / MB
    return run["peak_mb"] / megabytes if megabytes else math.inf


def row(name: str, points: list[dict[str, str]], runs: list[dict[str, Any]], cap_s: float) -> str:
    """The lab's line of the table: its worst counted ratio of time, that run; of memory, that run; the largest peak."""
    crashed = [run for run in runs if "crashed" in run]
    runs = [run for run in runs if "crashed" not in run]
    apart = [
        f"+{n} {what}"
        for n, what in ((len(points) - len(runs) - len(crashed), "refused"), (len(crashed), "crashed"))
        if n
    ]
    ran = f"{len(runs)}" + (f" ({', '.join(apart)})" if apart else "")
    counted = [(run, x) for run in runs if (x := ratio(run, cap_s)) is not None]
    peak = max((run["peak_mb"] for run in runs if run["peak_mb"] is not None), default=None)
    return f"| {name} | {ran} | {time_cells(counted, cap_s)} | {memory_cells(runs)} | {'?' if peak is None else f'{peak:.0f}'} |"


def time_cells(counted: list[tuple[dict[str, Any], float]], cap_s: float) -> str:
    """Runs counted, the worst CPU / estimate, its estimate, its CPU seconds, the run."""
    if not counted:
        return f"0 | - | - | - | every run under {MIN_CPU_S:g} s"
    run, worst = max(counted, key=lambda counted_run: counted_run[1])
    stopped = run["cpu_s"] is None
    cpu = f"> {cap_s:g}" if stopped else f"{run['cpu_s']:.2f}"
    return (
        f"{len(counted)} | {'>' if stopped else ''}{worst:.2f} | {estimated(run).seconds:.2f} | {cpu} | "
        f"{described(run)}"
    )


def memory_cells(runs: list[dict[str, Any]]) -> str:
    """Runs counted, the worst peak / estimate, its estimate MB, its peak MB, the run."""
    counted = [(run, x) for run in runs if (x := memory_ratio(run)) is not None]
    if not counted:
        return f"0 | - | - | - | every run under {MIN_MB} MB"
    run, worst = max(counted, key=lambda counted_run: counted_run[1])
    return f"{len(counted)} | {worst:.2f} | {estimated(run).bytes / MB:.0f} | {run['peak_mb']:.0f} | {described(run)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", default=sorted(LABS))
    parser.add_argument("--random", type=int, default=4, help="random points per lab")
    parser.add_argument("--corners", type=int, default=8, help="corners per lab, drawn at random (0: every one)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds of work each point is brought within")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(
        f"{date.today().isoformat()}: {args.corners or 'every'} corners and {args.random} random points per lab, "
        f"each within {args.budget:g} s by its estimate (or its defaults' estimate, if more), CPU limit {OVER} times "
        f"that, seed {args.seed}\n"
    )
    print(
        "| lab | runs | counted | worst CPU / estimate | its estimate s | its CPU s | the worst run | counted | "
        "worst peak / estimate | its estimate MB | its peak MB | the worst run | largest peak MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|")
    crashes: list[str] = []
    for name in args.labs:
        points = corners(name)
        if args.corners:
            points = rng.sample(points, min(args.corners, len(points)))
        points += [random_point(name, rng) for _ in range(args.random)] + [q for q in HIDDEN if q["lab"] == name]
        budget = max(args.budget, LABS[name]().estimate().seconds)  # from_query needs the defaults admitted
        cap_s = OVER * budget
        runs = [run for q in points if (run := measured(within(q, budget), cap_s)) is not None]
        print(row(name, points, runs, cap_s), flush=True)
        crashes += [f"- {name}: {run['crashed']} ({described(run)})" for run in runs if "crashed" in run]
    print("\ncrashed:" if crashes else "\ncrashed: none", *crashes, sep="\n")


if __name__ == "__main__":
    main()
