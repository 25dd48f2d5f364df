"""Benchmark: the memory of the heaviest runs the work budget admits, each in a child forked as
the served app's are (app/child.py: from a process that imported the labs), to size its
per-run cap `MEMORY_CAP_MB` (figures go to docs/site.md).

Run: .venv/bin/python -m bench.run_memory [LAB ...]

The runs: bench/caps.py's runs issue 25 found slow, and every lab at its caps (bench/caps.py
`variants`), each brought within the budget (`within_budget`). For each, the child's address
space (what RLIMIT_AS caps: VmPeak) and resident set (VmHWM) at their peaks, in MB, and the
address space it started with.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import kvweb.labs  # noqa: F401  (registers every lab, before any fork: as the helper does)
from bench.caps import HEAVY, variants, within_budget
from kvweb.lab import LABS
from kvweb.query import from_query


def status_mb() -> dict[str, float]:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmSize", "VmPeak", "VmHWM")}


def forked(compute: Callable[[], Any]) -> Any:
    """`compute()` in a forked child, its JSON read back through a pipe: this process stays as
    the helper is, with nothing computed (no memos filled) before a run."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        with os.fdopen(write, "w") as f:
            json.dump(compute(), f)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


def measure(query: dict[str, str]) -> dict[str, float]:
    start, began = status_mb(), time.process_time()
    from_query(query)[0].run()
    end = status_mb()
    return {"start": start["VmSize"], "as": end["VmPeak"], "rss": end["VmHWM"], "cpu": time.process_time() - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", help="only these labs (default: every lab)")
    args = parser.parse_args()
    names = args.labs or sorted(LABS)
    queries = [q for q in HEAVY if q["lab"] in names] + [v for n in names for v in variants(n, False)]
    print("| lab | address space MB (at start) | resident MB | CPU s | the run, within the budget |")
    print("| --- | ---: | ---: | ---: | --- |")
    for within in forked(lambda: [within_budget(q) for q in queries]):
        figures = forked(lambda: measure(within))
        cls = LABS[within["lab"]]
        shown = " ".join(
            f"{k}={v[:12]}"
            for k, v in within.items()
            if k in cls.param and v.lower() != str(cls.param[k].default).lower()
        )
        print(
            f"| {within['lab']} | {figures['as']:.0f} ({figures['start']:.0f}) | {figures['rss']:.0f} | "
            f"{figures['cpu']:.1f} | {shown} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
