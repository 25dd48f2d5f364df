"""The served app under load (issue 25): while other sessions run heavy runs, how long does a
fresh session take to load, and a light widget change to be answered?

One `panel serve` process (the run pool: app/pool.py; heavy runs compute in child processes:
app/child.py); `--heavy N` sessions each keep a heavy
run computing (a cache sweep of 1250 few-shot requests at 11 capacities with 745 of them in the
waiting queue, about 16 s of work by its estimate, within the 20 s budget; started again
whenever it ends); one more session is timed, first with no heavy run, then with them:

- load: a new browser context opens the roofline lab, from navigation to the status `ready`;
- server's build: a plain HTTP GET of the same URL, to the end of its body: Panel runs the app
  and builds the session's page in the server before it answers (the rest of a load is the
  browser's: scripts, the document sent over the websocket, layout and drawing);
- light change: the roofline lab's `tokens` typed and committed, until the URL holds the new
  value and the status says `ready` again (the lab's run, the redraw, the URL).

Wall times on the harness's clock, medians of `--runs` each. Figures are recorded in
docs/site.md ("The served app under load").

    .venv/bin/python -m bench.served_load                # one heavy session, 5 runs
    .venv/bin/python -m bench.served_load --heavy 2 --runs 7
"""
from __future__ import annotations

import argparse
import statistics
import time
import urllib.request

from playwright.sync_api import Browser, Page, sync_playwright

from e2e.conftest import CHROMIUM, CHROMIUM_ARGS, serve_app, set_param, wait_ready  # run from the repository's root

LIGHT = "lab=cache-sweep&workload=few-shot&tasks=25&per_task=50&points=11&queue=8"
HEAVY = 745  # requests in the waiting queue: about 16 s of work by the lab's estimate


def keep_heavy(page: Page) -> None:
    """Make sure `page` (the cache-sweep lab) is computing a heavy run: a new one, if it ended."""
    bar = page.locator("progress.kv-progress")
    if not bar.is_visible():
        shown = page.locator(".kv-param-queue input").first.input_value()
        set_param(page, "queue", str(HEAVY if shown != str(HEAVY) else HEAVY - 1))
        bar.wait_for(state="visible", timeout=60_000)


def timed_load(browser: Browser, url: str) -> tuple[float, Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(f"{url}?lab=roofline")
    wait_ready(page)
    return time.perf_counter() - start, page


def timed_build(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(f"{url}?lab=roofline", timeout=60) as answer:
        answer.read()
    return time.perf_counter() - start


def timed_change(page: Page, tokens: int) -> float:
    start = time.perf_counter()
    set_param(page, "tokens", str(tokens))
    page.wait_for_function(f"() => location.search.includes('tokens={tokens}')", timeout=60_000)
    wait_ready(page)
    return time.perf_counter() - start


def measure(browser: Browser, url: str, heavy: list[Page], runs: int) -> dict[str, float]:
    loads, builds, changes = [], [], []
    for turn in range(runs):
        for h in heavy:
            keep_heavy(h)
        builds.append(timed_build(url))
        seconds, page = timed_load(browser, url)
        loads.append(seconds)
        for page_turn in range(3):
            for h in heavy:
                keep_heavy(h)
            changes.append(timed_change(page, 2048 + 256 * (page_turn + 1)))
        page.context.close()
    return {"load": statistics.median(loads), "build": statistics.median(builds), "change": statistics.median(changes),
            "change_max": max(changes), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heavy", type=int, default=1, help="sessions keeping a heavy run computing")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with serve_app() as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        rows = [("no heavy run", measure(browser, url, [], args.runs))]
        heavy = []
        for _ in range(args.heavy):
            page = browser.new_context().new_page()
            page.goto(f"{url}?{LIGHT}")
            wait_ready(page)
            heavy.append(page)
        rows.append((f"{args.heavy} heavy session(s)", measure(browser, url, heavy, args.runs)))
        print("| while | fresh session's load (median) | server's build (median) | light change (median, max) |")
        print("| --- | --- | --- | --- |")
        for name, row in rows:
            print(f"| {name} | {row['load']:.2f} s | {row['build']:.2f} s | {row['change']:.2f} s, {row['change_max']:.2f} s |")
        browser.close()


if __name__ == "__main__":
    main()
