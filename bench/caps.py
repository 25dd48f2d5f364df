"""Benchmark: every lab at its work caps, time and peak memory (figures go to docs/input.md).

Run: .venv/bin/python -m bench.caps [--timeout S] [--choices] [LAB ...]

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
import resource
import subprocess
import sys
import time
from typing import Any

import param

import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.lab import LABS, param_names
from kvweb.query import from_query

SLOW_S = 30.0
SMALLER_IS_MORE_WORK = ("block_size", "page_size", "rel_tol")


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


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def child(query: dict[str, str]) -> None:
    """Run one lab; print {params, messages, seconds, peak_mb} as JSON."""
    lab, messages = from_query(query)
    base = peak_rss_mb()
    start = time.perf_counter()
    lab.run()
    seconds = time.perf_counter() - start
    print(json.dumps({"params": lab.values(), "messages": messages, "seconds": seconds,
                      "peak_mb": peak_rss_mb() - base}))


def measure(query: dict[str, str], timeout: float) -> dict[str, Any]:
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(query)],
                              capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"query": query, "seconds": None, "peak_mb": None, "messages": []}
    return {"query": query, **json.loads(done.stdout.splitlines()[-1])}


def described(run: dict[str, Any]) -> str:
    """The run's parameters that differ from the defaults; `*` marks a cap its check refused."""
    cls = LABS[run["query"]["lab"]]
    refused = [m.rpartition("; using the defaults for ")[2].split(", ") for m in run["messages"]]
    shown = []
    for n in param_names(cls):
        if n in (refused[0] if refused else []):
            shown.append(f"{n}={run['query'][n]}*")
        elif run["query"].get(n, str(cls.param[n].default)) != str(cls.param[n].default):
            shown.append(f"{n}={run['query'][n]}")
    return ", ".join(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", default=sorted(LABS))
    parser.add_argument("--timeout", type=float, default=SLOW_S + 5, help="seconds per run")
    parser.add_argument("--choices", action="store_true", help="also try every other option of every choice")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
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


if __name__ == "__main__":
    main()
