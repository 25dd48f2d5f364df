"""Benchmark: how long the whole reproduction report takes (`kvweb reproduce`, the report page).

Run: .venv/bin/python -m bench.reproduce   (figures go to docs/reproduce.md by hand)
In Pyodide under Node (what the static site's report page does):
  node scripts/pyodide_run.mjs build/pyodide-test -m bench.reproduce
(build/pyodide-test comes from scripts/test-pyodide.sh; this checkout's kvweb is used.)

Prints the total for the full and the quick report (best of `--repeat`, default 2), and the
slowest experiments of the full one.
"""

from __future__ import annotations

import platform
import sys
import time

from kvweb.reproduce import reproduce, to_html


def main() -> None:
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 2
    print(f"{platform.python_implementation()} {platform.python_version()} on {sys.platform}")
    for quick in (False, True):
        best, report = float("inf"), None
        for _ in range(repeat):
            start = time.perf_counter()
            report = reproduce(quick=quick)
            to_html(report)
            best = min(best, time.perf_counter() - start)
        print(f"{'quick' if quick else 'full'} report: {best:.2f} s ({len(report['sections'])} experiments)")
        if not quick:
            slowest = sorted(report["sections"], key=lambda s: -s["seconds"])[:5]
            print("  slowest: " + ", ".join(f"{s['key']} {s['seconds']:.2f} s" for s in slowest))


if __name__ == "__main__":
    main()
