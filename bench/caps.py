"""Benchmark: every lab at its work caps, time and peak memory (figures go to docs/input.md).

Run: .venv/bin/python -m bench.caps [--timeout S] [--choices] [--budget] [LAB ...]

With --budget, each variant is first brought within the work budget (kvweb/budget.py): the
parameters its estimate grows with move from their defaults towards the caps, and those it
shrinks with towards the bottom, by one fraction, the largest whose estimate the budget accepts;
the table then gives the estimate beside the measured time. None may take over 1.5x the budget.

"At its caps": every number at the top of its bounds, then, as a URL would be opened
(`from_query`), the fewest values the lab's own check refuses put back to their defaults.
Numbers whose work grows as they fall (block and page sizes, the max-rate search's
tolerance) are also tried at the bottom; with --choices every other option of every choice
is tried too, one at a time. The slowest variant is kept. Each run is a child process with
a time limit; its peak memory is the growth of its resident set during the run. A lab over
SLOW_S needs tighter caps (issue 15).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import signal
import subprocess
import sys
import time
from typing import Any

import param

import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.budget import BUDGET_S
from kvweb.lab import LABS, param_names
from kvweb.query import from_query

SLOW_S = 30.0
OVER_BUDGET = 1.5  # a run the estimate accepts may take at most this many budgets
WALL_PER_CPU = 10  # --budget: the wall-clock limit, in CPU limits (the machine may be shared)
SMALLER_IS_MORE_WORK = ("block_size", "page_size", "rel_tol")
# The runs issue 25 found slow (minutes in CPython), tried too with --budget (brought within it)
HEAVY = [
    {
        "lab": "schedulers",
        "scenario": "B",
        "workload": "long-context",
        "requests": "5000",
        "rate": "1000",
        "block_size": "1",
        "max_seqs": "1024",
        "token_budget": "1024",
        "chunk_size": "256",
        "search": "true",
    },
    {
        "lab": "prefix-hash",
        "workload": "few-shot",
        "tasks": "32",
        "per_task": "64",
        "question_len": "450",
        "output_len": "1024",
        "queue": "1024",
        "capacity": "2000",
        "block_size": "1",
    },
    {
        "lab": "cache-sweep",
        "workload": "few-shot",
        "tasks": "32",
        "per_task": "64",
        "question_len": "450",
        "output_len": "1024",
        "queue": "1024",
        "points": "12",
    },
    {
        "lab": "schedulers",
        "scenario": "B",
        "workload": "few-shot",
        "requests": "244",
        "tasks": "64",
        "examples_len": "7500",
        "block_size": "1",
        "chunk_size": "256",
        "mixed_chunk": "true",
        "search": "true",
    },
    {"lab": "radix-demo", "system": "x" * 400, "questions": "|".join(["q"] * 200), "max_new": "64", "pool": "1000"},
    {
        "lab": "engine",
        "scenario": "B",
        "workload": "fixed",
        "prompt_len": "4096",
        "output_len": "4095",
        "requests": "5000",
        "rate": "1000",
        "block_size": "1",
    },
]


def variants(name: str, choices: bool) -> list[dict[str, str]]:
    """Queries for the lab at its caps: numbers at the top, then the other variants asked for."""
    cls = LABS[name]
    numbers = {n: cls.param[n].bounds for n in param_names(cls) if isinstance(cls.param[n], param.Number)}
    top = {"lab": name, **{n: str(hi) for n, (lo, hi) in numbers.items()}}
    out = [top]
    if any(n in numbers for n in SMALLER_IS_MORE_WORK):
        out.append({**top, **{n: str(numbers[n][0]) for n in SMALLER_IS_MORE_WORK if n in numbers}})
    for n in param_names(cls) if choices else []:
        p = cls.param[n]
        if isinstance(p, param.Selector):
            out += [{**top, n: str(option)} for option in p.objects if option != p.default]
    return out


def within_budget(query: dict[str, str], budget_s: float = BUDGET_S) -> dict[str, str]:
    """The query with its work parameters (those its estimate names) moved from their defaults by
    the largest fraction of the way to the query's values that `budget_s` accepts (bisected; the
    rules' refusals count as over); if its defaults are over too (a heavy choice), the fraction of
    the way to the other end of their bounds that brings it within. A text is cut to its share."""
    cls = LABS[query["lab"]]
    lab, _ = from_query(query, budget_s=float("inf"), memory_mb=float("inf"))
    top, estimate = lab.values(), lab.estimate()
    moving = [n for n in (*estimate.lower, *estimate.higher) if isinstance(cls.param[n], (param.Number, param.String))]

    def at(f: float) -> dict[str, str]:
        values = dict(top)
        for n in moving:
            p, default = cls.param[n], cls.param[n].default
            if isinstance(p, param.String):
                values[n] = top[n][: max(1, round(f * len(top[n])))] if f > 0 else default
                continue
            low, high = p.bounds
            end = top[n] if f >= 0 else (low if n in estimate.lower else high)
            value = default + abs(f) * (end - default)
            values[n] = round(value) if isinstance(p, param.Integer) else value
        return {
            "lab": query["lab"],
            **{n: str(v).lower() if isinstance(v, bool) else str(v) for n, v in values.items()},
        }

    def accepted(f: float) -> bool:
        return not from_query(at(f), budget_s=budget_s)[1]  # nothing put back: within the rules and the budget

    lo, hi = (0.0, 1.0) if accepted(0.0) else (-1.0, 0.0)  # accepted at lo (so to speak), not at hi
    if accepted(hi):
        return at(hi)
    for _ in range(16):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if accepted(mid) else (lo, mid)
    return at(lo)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def child(query: dict[str, str]) -> None:
    """Run one lab; print {params, messages, seconds, peak_mb} as JSON."""
    lab, messages = from_query(query, budget_s=float("inf"), memory_mb=float("inf"))
    estimate = lab.estimate().seconds
    base = peak_rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    lab.run()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        json.dumps(
            {
                "params": lab.values(),
                "messages": messages,
                "seconds": seconds,
                "cpu_s": cpu,
                "peak_mb": peak_rss_mb() - base,
                "estimate": estimate,
            }
        )
    )


def measure(query: dict[str, str], timeout: float, cpu: bool = False) -> dict[str, Any]:
    """Run the query in a child with a limit of `timeout` seconds, of CPU time with `cpu` (on a
    shared machine a wall-clock limit also counts the other processes' turns)."""

    def limit_cpu() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(timeout), math.ceil(timeout) + 1))

    over = {"query": query, "seconds": None, "cpu_s": None, "peak_mb": None, "messages": [], "estimate": None}
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(query)],
            capture_output=True,
            text=True,
            timeout=timeout * (WALL_PER_CPU if cpu else 1),
            preexec_fn=limit_cpu if cpu else None,
        )
    except subprocess.TimeoutExpired:
        return over
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):  # over the CPU limit
        return over
    done.check_returncode()
    return {"query": query, **json.loads(done.stdout.splitlines()[-1])}


def described(run: dict[str, Any]) -> str:
    """The run's parameters that differ from the defaults; `*` marks a cap its check refused."""
    cls = LABS[run["query"]["lab"]]
    refused = [m.rpartition("; using the defaults for ")[2].split(", ") for m in run["messages"]]
    shown = []
    for n in param_names(cls):
        if n in (refused[0] if refused else []):
            shown.append(f"{n}={run['query'].get(n, cls.param[n].default)}*")
        elif run["query"].get(n, str(cls.param[n].default)) != str(cls.param[n].default):
            shown.append(f"{n}={run['query'][n]}")
    return ", ".join(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", default=sorted(LABS))
    parser.add_argument(
        "--timeout", type=float, default=SLOW_S + 5, help="seconds per run (with --budget: CPU seconds)"
    )
    parser.add_argument("--choices", action="store_true", help="also try every other option of every choice")
    parser.add_argument("--budget", action="store_true", help="each variant at the largest work the budget accepts")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    if args.budget:
        budget_table(args)
        return
    print("| lab | runs | slowest s | its peak MB | the slowest run (besides defaults; * = refused by the check) |")
    print("|---|---|---|---|---|")
    slow = []
    for name in args.labs:
        runs = [measure(q, args.timeout) for q in variants(name, args.choices)]
        worst = max(runs, key=lambda r: float("inf") if r["seconds"] is None else r["seconds"])
        if worst["seconds"] is None or worst["seconds"] > SLOW_S:
            slow.append(name)
        seconds = f"> {args.timeout:.0f}" if worst["seconds"] is None else f"{worst['seconds']:.2f}"
        peak = "?" if worst["peak_mb"] is None else f"{worst['peak_mb']:.0f}"
        print(f"| {name} | {len(runs)} | {seconds} | {peak} | {described(worst)} |", flush=True)
    print(f"\nover {SLOW_S:.0f} s: {', '.join(slow) or 'none'}")


def budget_table(args: argparse.Namespace) -> None:
    """Per lab, its slowest variant within the budget: the estimate beside the measured time. The
    verdict reads CPU seconds, what the run takes on an idle machine: on a shared one wall-clock
    time also counts the other processes' turns."""
    print(f"| lab | runs | estimate s | CPU s | wall s | its peak MB | the slowest run within {BUDGET_S:g} s |")
    print("|---|---|---|---|---|---|---|")
    over = []
    for name in args.labs:
        queries = [*variants(name, args.choices), *(q for q in HEAVY if q["lab"] == name)]
        runs = [measure(within_budget(q), args.timeout, cpu=True) for q in queries]
        worst = max(runs, key=lambda r: float("inf") if r["cpu_s"] is None else r["cpu_s"])
        if worst["cpu_s"] is None or worst["cpu_s"] > OVER_BUDGET * BUDGET_S:
            over.append(name)
        cpu = f"> {args.timeout:.0f}" if worst["cpu_s"] is None else f"{worst['cpu_s']:.2f}"
        wall = f"> {args.timeout:.0f}" if worst["seconds"] is None else f"{worst['seconds']:.2f}"
        estimate = "?" if worst["estimate"] is None else f"{worst['estimate']:.1f}"
        peak = "?" if worst["peak_mb"] is None else f"{worst['peak_mb']:.0f}"
        print(f"| {name} | {len(runs)} | {estimate} | {cpu} | {wall} | {peak} | {described(worst)} |", flush=True)
    print(f"\nover {OVER_BUDGET:g} x {BUDGET_S:g} s of CPU: {', '.join(over) or 'none'}")


if __name__ == "__main__":
    main()
