"""Benchmark: how long the heavy labs take per widget change (issue 12: redrawn within 1 s).

Run: .venv/bin/python -m bench.labs [--labs fsm,max-rate] [--repeat 2] [--save now.json] [--before old.json]
     .venv/bin/python -m bench.labs --labs engine,max-rate,sweep --against /tmp/old --rounds 5
(figures go to docs/engine.md, docs/fsm.md and docs/radix.md by hand)

For each lab: its run at the defaults, cold (nothing remembered), then after each single change
of a main parameter, the way the app sees it: the defaults have just run (whatever the lab
remembers from them is there), then one widget changes. CPU seconds of this process
(time.process_time: other work on a shared machine does not count), best of --repeat.
--save writes the figures as JSON; --before reads such a file (e.g. saved in a checkout before a
change) and prints both columns. --against DIR (a checkout of another commit, e.g. `git worktree add
/tmp/old COMMIT`) compares the two in one sitting: rounds alternate between that checkout's kvweb and
this one's (this script in a fresh process each, --repeat 1), each change's best over the rounds,
and each lab's sum with the ratio; alternating keeps a shared machine's drift out of the ratio.

The static site runs the same code in Pyodide, about 1.5-2.5x slower than CPython.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.memo import clear_memos
from kvweb.parsing import make

CHANGES: dict[str, list[dict[str, str]]] = {
    "fsm": [
        {"preset": "form"},
        {"preset": "record"},
        {"preset": "ambiguous"},
        {"pattern": r"[a-z]{2,10}@[a-z]{2,8}\.(com|org)"},
        {"samples": "5"},
        {"samples": "8"},
        {"seed": "1"},
        {"max_len": "100"},
        {"max_len": "300"},
    ],
    "max-rate": [
        {"tp": "2"},
        {"weight_precision": "fp8"},
        {"kv_precision": "fp8"},
        {"scenario": "B"},
        {"workload": "alpaca"},
        {"rate": "4"},
        {"requests": "300"},
        {"block_size": "32"},
        {"watermark": "0.05"},
        {"preemption": "swap"},
        {"seed": "1"},
        {"target": "0.95"},
        {"rel_tol": "0.05"},
    ],
    "cache-sweep": [
        {"workload": "multi-turn"},
        {"queue": "8"},
        {"queue": "33"},
        {"alpha": "5"},
        {"points": "9"},
        {"points": "12"},
        {"points": "4"},
    ],
    "prefix-hash": [
        {"workload": "multi-turn"},
        {"queue": "33"},
        {"alpha": "22"},
        {"capacity": "2001"},
        {"policy": "fcfs"},
        {"block_size": "17"},
    ],
    "schedulers": [
        {"tp": "2"},
        {"scenario": "B"},
        {"rate": "2.2"},
        {"block_size": "17"},
        {"watermark": "0.011"},
        {"prefix_caching": "false"},
        {"token_budget": "512"},
        {"search": "true"},
    ],
    "sweep": [
        {"block_size": "32"},
        {"watermark": "0.05"},
        {"rate": "5"},
        {"sweep": "watermark"},
        {"sweep": "preemption"},
    ],
    "engine": [
        {"memory": "max"},
        {"compare": "max"},
        {"compare": "none"},
        {"tp": "2"},
        {"weight_precision": "fp8"},
        {"scenario": "B"},
        {"workload": "alpaca"},
        {"rate": "5"},
        {"requests": "500"},
        {"block_size": "32"},
        {"preemption": "swap"},
        {"seed": "1"},
    ],
}


def forget() -> None:
    """Drop every remembered result."""
    clear_memos()


def seconds(lab: str, change: dict[str, str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        forget()
        if change:
            make(lab, {}).run()  # the page as it was before the widget changed
        t = time.process_time()
        make(lab, change).run()
        best = min(best, time.process_time() - t)
    return best


def label(change: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in change.items()) or "defaults (cold)"


def against(labs: str, other: str, rounds: int) -> None:
    """This checkout's kvweb against `other`'s, in alternating rounds (see the module docstring)."""
    trees = {"before": str(Path(other).resolve()), "after": str(Path(__file__).resolve().parents[1])}
    best: dict[str, dict[tuple[str, str], float]] = {name: {} for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for name, tree in trees.items():
                out = Path(tmp, f"{name}.json")
                subprocess.run(
                    [sys.executable, __file__, "--labs", labs, "--repeat", "1", "--save", str(out)],
                    cwd=tree,
                    env={**os.environ, "PYTHONPATH": tree},
                    check=True,
                    capture_output=True,
                )
                for lab, changes in json.loads(out.read_text()).items():
                    for change, s in changes.items():
                        best[name][lab, change] = min(best[name].get((lab, change), float("inf")), s)
    print(f"best of {rounds} alternating rounds, CPU seconds summed over each lab's changes\n")
    print("| lab | before s | after s | after / before |\n|---|---|---|---|")
    for lab in labs.split(","):
        old, new = (sum(s for (name, _), s in best[side].items() if name == lab) for side in trees)
        print(f"| {lab} | {old:.2f} | {new:.2f} | {new / old:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labs", default=",".join(CHANGES))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--save")
    ap.add_argument("--before")
    ap.add_argument("--against", help="a checkout of another commit to compare with, in alternating rounds")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.against:
        against(args.labs, args.against, args.rounds)
        return
    before: dict[str, Any] = json.loads(Path(args.before).read_text()) if args.before else {}
    figures: dict[str, dict[str, float]] = {}
    print(f"{platform.python_implementation()} {platform.python_version()} on {sys.platform}\n")
    print("| lab | change | before s | after s |" if before else "| lab | change | s |")
    print("|---|---|---|---|" if before else "|---|---|---|")
    for lab in args.labs.split(","):
        figures[lab] = {}
        for change in [{}, *CHANGES[lab]]:
            s = figures[lab][label(change)] = seconds(lab, change, args.repeat)
            old = before.get(lab, {}).get(label(change))
            old_text = "" if old is None else f"{old:.2f} | "
            print(f"| {lab} | {label(change)} | {old_text}{s:.2f} |", flush=True)
    if args.save:
        Path(args.save).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
