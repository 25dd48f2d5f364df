"""Benchmark: what a heavy run costs the server's own thread, in a thread (as the pool ran runs
before) and in a child process (app/child.py), without a browser's noise.

The server's thread is timed building a fresh session's page (as `panel serve` does for a new
session: the shell, its document, the roofline lab opened and run, the document as JSON), alone,
then while a heavy run (bench/served_load.py's: a cache sweep of about 16 s of work by its
estimate) computes in a thread of this process, then while it computes in a child. The three
are interleaved, `--runs` times, on the same machine's load; medians and ranges in seconds.

    .venv/bin/python -m bench.served_build [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from bokeh.document import Document
from panel.io.state import set_curdoc

import app.runner
from app.child import run_in_child
from app.shell import Shell
from app.site.location import install as install_location
from kvweb.lab import Cancelled
from kvweb.parsing import make

HEAVY = {"workload": "few-shot", "tasks": "25", "per_task": "50", "points": "11", "queue": "745"}
BUILDS = 3  # page builds timed per heavy run


def build_page() -> float:
    """A new session's page, as `panel serve` makes it: app/main.py's shell in a document (which
    opens the URL's lab and runs it), the document as JSON (what the websocket sends)."""
    start = time.perf_counter()
    doc = Document()
    with set_curdoc(doc):
        install_location(
            {
                "pathname": "/main",
                "search": "?lab=roofline",
                "href": "http://127.0.0.1/main?lab=roofline",
                "origin": "http://127.0.0.1",
            }
        )
        shell = Shell()
        assert shell.labs.result, "the lab's run is called in this thread (main() has no run pool)"
        shell.layout.server_doc(doc)
        doc.to_json()
    return time.perf_counter() - start


def beside(where: str) -> list[float]:
    """Page builds while the heavy run computes `where` ("thread", "child" or "none")."""
    if where == "none":
        return [build_page() for _ in range(BUILDS)]
    stop, started = threading.Event(), threading.Event()

    def progress(fraction: float, message: str) -> None:
        started.set()
        if stop.is_set():
            raise Cancelled

    def heavy() -> None:
        lab = make("cache-sweep", HEAVY)
        try:
            run_in_child(lab, progress) if where == "child" else lab.run(progress)
        except Cancelled:
            pass

    worker = threading.Thread(target=heavy)
    worker.start()
    started.wait()
    times = [build_page() for _ in range(BUILDS)]
    stop.set()
    worker.join()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    app.runner.server_pool = lambda: None  # the lab's run is called in the server's thread, as the quick lane does
    build_page()  # imports and first-use costs out of the way
    times: dict[str, list[float]] = {"none": [], "thread": [], "child": []}
    for _ in range(args.runs):
        for where in times:
            times[where] += beside(where)
    print("| heavy run | page build in the server's thread: median (range) |")
    print("| --- | --- |")
    for where, label in (("none", "none"), ("thread", "in a thread"), ("child", "in a child process")):
        print(
            f"| {label} | {statistics.median(times[where]):.2f} s ({min(times[where]):.2f}-{max(times[where]):.2f}) |"
        )


if __name__ == "__main__":
    main()
