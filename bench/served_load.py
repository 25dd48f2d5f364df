"""The served app under load (issue 25): while other sessions run heavy runs, how long does a
fresh session take to load, and a light widget change to be answered?

One `panel serve` process (the run pool: app/pool.py; heavy runs compute in child processes:
app/child.py); `--heavy N` sessions each keep a heavy
run computing (a cache sweep of 1250 few-shot requests at 11 capacities with 745 of them in the
waiting queue, about 16 s of work by its estimate, within the 20 s budget; started again
whenever it ends); one more session is timed, first with no heavy run, then with them:

- load: a new browser context opens the roofline lab, from navigation to the status `ready`,
  and where its time goes: the page's HTML answered (Panel ran the app and built the session's
  document in the server; the browser's `responseEnd`), its scripts loaded (the `load` event),
  the document received (the largest websocket frame: the server sent the session's document),
  the document drawn (Bokeh laid it out in the browser: the status shows), then `ready` (the
  lab's run and its view drawn);
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

from playwright.sync_api import Browser, Page, sync_playwright

from e2e.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    plain_text,
    serve_app,
    set_param,
    wait_ready,
)  # run from the repository's root

LIGHT = "lab=cache-sweep&workload=few-shot&tasks=25&per_task=50&points=11&queue=8"
HEAVY = 745  # requests in the waiting queue: about 16 s of work by the lab's estimate


def keep_heavy(page: Page) -> None:
    """Make sure `page` (the cache-sweep lab) is computing a heavy run: a new one, if it ended."""
    bar = page.locator("progress.kv-progress")
    if not bar.is_visible():
        shown = page.locator(".kv-param-queue input").first.input_value()
        set_param(page, "queue", str(HEAVY if shown != str(HEAVY) else HEAVY - 1))
        bar.wait_for(state="visible", timeout=60_000)


def timed_load(browser: Browser, url: str) -> tuple[dict[str, float], Page]:
    """Seconds from navigation to each step of a load (see the module's docstring)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    frames: list[tuple[int, float]] = []  # (size, when) of each websocket frame the page received
    page.on(
        "websocket",
        lambda ws: ws.on("framereceived", lambda payload: frames.append((len(payload), time.perf_counter() - start))),
    )
    start = time.perf_counter()
    page.goto(f"{url}?lab=roofline")  # until the load event
    loaded = time.perf_counter() - start
    plain_text(page, "kv-status").wait_for(timeout=60_000)
    drawn = time.perf_counter() - start
    wait_ready(page)
    ready = time.perf_counter() - start
    html = page.evaluate("() => performance.getEntriesByType('navigation')[0].responseEnd") / 1000
    received = max(f for f in frames if f[1] <= drawn)[1]
    return {"html": html, "loaded": loaded, "received": received, "drawn": drawn, "ready": ready}, page


def timed_change(page: Page, tokens: int) -> float:
    start = time.perf_counter()
    set_param(page, "tokens", str(tokens))
    page.wait_for_function(f"() => location.search.includes('tokens={tokens}')", timeout=60_000)
    wait_ready(page)
    return time.perf_counter() - start


def measure(browser: Browser, url: str, heavy: list[Page], runs: int) -> dict[str, float]:
    loads, changes = [], []
    for turn in range(runs):
        for h in heavy:
            keep_heavy(h)
        steps, page = timed_load(browser, url)
        loads.append(steps)
        for page_turn in range(3):
            for h in heavy:
                keep_heavy(h)
            changes.append(timed_change(page, 2048 + 256 * (page_turn + 1)))
        page.context.close()
    return {
        **{step: statistics.median(load[step] for load in loads) for step in loads[0]},
        "change": statistics.median(changes),
        "change_max": max(changes),
        "runs": runs,
    }


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
        print(
            "| while | fresh session's load: HTML answered, scripts loaded, document received, drawn, ready "
            "(medians) | light change (median, max) |"
        )
        print("| --- | --- | --- |")
        for name, row in rows:
            print(
                f"| {name} | {row['html']:.2f}, {row['loaded']:.2f}, {row['received']:.2f}, {row['drawn']:.2f}, "
                f"**{row['ready']:.2f} s** | "
                f"{row['change']:.2f} s, {row['change_max']:.2f} s |"
            )
        browser.close()


if __name__ == "__main__":
    main()
