"""Every lab's `kvweb run LAB --json`, saved before a refactor and compared after it.

Run: .venv/bin/python -m bench.baseline_json dump DIR [--labs engine,sweep] [--quick]
     .venv/bin/python -m bench.baseline_json compare DIR [--labs ...] [--quick] [--out DIR2]

`dump` writes one file per run, `LAB[--name=value...].json`, holding exactly the line
`kvweb run LAB --name value ... --json` prints (memos cleared before each run, as in a fresh
process). `compare` runs the same set again and says, for each run, whether it is byte-identical
and, if not, the largest relative difference between numbers at the same place (and any
difference in structure, text or integers, which is never a last-bit change).

The set: every lab at its defaults, each single change bench/labs.py times, and every run of
the lecture's report (`kvweb reproduce`; with --quick its quick variants instead).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.labs import CHANGES
from kvweb.cli import main as cli_main
from kvweb.lab import LABS
from kvweb.memo import clear_memos
from kvweb.reproduce import EXPERIMENTS


def configurations(quick: bool) -> list[tuple[str, dict[str, str]]]:
    """(lab, parameters as text): defaults, bench/labs.py's changes, the report's runs; each once."""
    runs: list[tuple[str, dict[str, str]]] = [(lab, {}) for lab in sorted(LABS)]
    runs += [(lab, change) for lab, changes in CHANGES.items() for change in changes]
    runs += [(run.lab, dict(run.texts(quick))) for exp in EXPERIMENTS for run in exp.runs]
    seen: set[str] = set()
    unique = []
    for lab, params in runs:
        key = name(lab, params)
        if key not in seen:
            seen.add(key)
            unique.append((lab, params))
    return unique


def name(lab: str, params: dict[str, str]) -> str:
    """A file name for the run: the lab, then its parameters sorted (characters outside
    [A-Za-z0-9_.=-] replaced by their code)."""
    safe = "".join(
        c if c.isalnum() or c in "_.=-" else f"%{ord(c):02x}"
        for c in "".join(f"--{k}={v}" for k, v in sorted(params.items()))
    )
    return f"{lab}{safe}"[:200] + ".json"


def run_json(lab: str, params: dict[str, str]) -> str:
    """The line `kvweb run LAB --k v ... --json` prints."""
    clear_memos()
    args = ["run", lab, *[x for k, v in params.items() for x in (f"--{k}", v)], "--json", "--budget", "100000"]
    out, err = io.StringIO(), io.StringIO()
    if cli_main(args, out, err) != 0:
        raise SystemExit(f"kvweb {' '.join(args)} failed: {err.getvalue()}")
    return out.getvalue()


def differences(a: Any, b: Any, where: str = "") -> tuple[float, list[str]]:
    """(largest relative difference between floats at the same place, places that differ otherwise)."""
    if isinstance(a, float) and isinstance(b, float):
        if a == b:
            return 0.0, []
        return abs(a - b) / max(abs(a), abs(b)), []
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return 0.0, [f"{where}: keys {sorted(a.keys() ^ b.keys())}"]
        parts = [differences(a[k], b[k], f"{where}.{k}") for k in a]
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return 0.0, [f"{where}: {len(a)} vs {len(b)} items"]
        parts = [differences(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b))]
    else:
        return 0.0, [] if a == b and type(a) is type(b) else [f"{where}: {a!r:.60} vs {b!r:.60}"]
    return max((p[0] for p in parts), default=0.0), [w for p in parts for w in p[1]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("dump", "compare"))
    ap.add_argument("dir")
    ap.add_argument("--labs", default="", help="only these labs (comma-separated)")
    ap.add_argument("--quick", action="store_true", help="the report's quick runs")
    ap.add_argument("--out", help="compare: also write the new files here")
    args = ap.parse_args()
    only = set(filter(None, args.labs.split(",")))
    folder = Path(args.dir)
    out = Path(args.out) if args.out else (folder if args.mode == "dump" else None)
    if out:
        out.mkdir(parents=True, exist_ok=True)
    worst, changed = 0.0, 0
    for lab, params in configurations(args.quick):
        if only and lab not in only:
            continue
        file = name(lab, params)
        start = time.process_time()
        text = run_json(lab, params)
        seconds = time.process_time() - start
        if out:
            (out / file).write_text(text)
        if args.mode == "dump":
            print(f"{seconds:7.2f} s  {file}", flush=True)
            continue
        before = (folder / file).read_text()
        if text == before:
            print(f"{seconds:7.2f} s  same        {file}", flush=True)
            continue
        changed += 1
        rel, other = differences(json.loads(before), json.loads(text))
        worst = max(worst, rel)
        print(f"{seconds:7.2f} s  rel {rel:.1e}  {file}" + "".join(f"\n      {w}" for w in other[:5]), flush=True)
        if other:
            worst = float("inf")
    if args.mode == "compare":
        print(f"{changed} runs differ; largest relative difference {worst:.2e}")
        sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
