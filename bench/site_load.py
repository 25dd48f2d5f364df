"""The static site's speed goals (issue 12), measured in one run in headless Chromium.

Each cold load starts a new Chromium with a fresh profile (empty HTTP and code caches) and
serves build/site on 127.0.0.1 (bytes counted by the server). One run measures:

- first paint: from navigation to the start page's tour text and buttons being visible (the
  text the page carries before Python starts, or the live tour once Python has drawn it);
- cold load to interactive: until Python in the worker has drawn the app
  (`body[data-kvweb-ready]`, ms since navigation);
- the same cold load of the floor site (build/site-floor: bench/floor_app.py, one figure and one
  widget, with kvweb's packages and page scripts; built by `scripts/build_site.py floor` when
  missing or built from other pins), alternating with kvweb's, and kvweb's median divided by
  the floor's: what kvweb's own start-up costs, comparable between days on this shared host;
  also the same ratio of the part after the packages are installed (from the worker's
  "Starting the app" to interactive), which the host's load on Pyodide's boot does not blur;
- every widget change of every lab at its defaults: each lab is opened at its defaults, and
  each of its visible widgets is changed once (a select to its next option, a whole number or
  slider one step, a decimal 10 % up, a checkbox toggled; text boxes are left alone), timed from the change to
  the worker being idle again with nothing queued (every patch of the redraw sent) and the
  next animation frame drawn, on the page's clock (`ARM`; the harness's own wall time is printed
  beside it); then the widget is set back (not timed); then, in an animated view, five steps of
  its player ("next"), timed the same way;
- lab switches: from picking a lab in the lab menu to the worker being idle and the next frame
  drawn, for every lab in turn (a first visit), then back to the one before (a lab the shell
  keeps: `KEEP_LABS` in app/panes.py);
- the report page: from navigation to `ready` with its charts drawn (a fresh browser).

Goals: first paint 1.5 s, interactive 3 s (1.3 times the floor), each widget change 1 s,
report 8 s. Figures are recorded in docs/site.md.

    .venv/bin/python -m bench.site_load                 # everything, printed as a table
    .venv/bin/python -m bench.site_load --labs engine   # widget changes of some labs only
    .venv/bin/python -m bench.site_load --runs 3 --skip-report --json
    .venv/bin/python -m bench.site_load --site build/site-before --labs engine   # an older build
    .venv/bin/python -m bench.site_load --labs --switches --skip-report   # the cold loads alone
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable

import param
from playwright.sync_api import Page, sync_playwright

import kvweb.labs  # noqa: F401  (registers every lab)
from e2e.support import CHROMIUM, CHROMIUM_ARGS, plain_text  # the repository's folders, run from its root
from kvweb.lab import LABS, Text, param_names
from scripts.site_server import SiteServer

ROOT = Path(__file__).resolve().parent.parent

STEPS = 5  # player steps timed per animated lab
GOALS_S = {"first paint": 1.5, "interactive": 3.0, "widget change": 1.0, "report": 8.0}
FLOOR_RATIO = 1.3  # kvweb's cold load to interactive, at most this many times the floor's
FLOOR = ROOT / "build" / "site-floor"
APP_PHASE = "Starting the app"  # static/worker.mjs: the packages are installed, the app's code runs
TOUR_VISIBLE = """() => [...document.querySelectorAll('#kv-early-tour, .kv-tour')]
    .some(el => el.offsetParent !== null && el.textContent.trim().length > 0)
    || [...document.querySelectorAll('*')].some(el => el.shadowRoot && el.shadowRoot.querySelector('.kv-tour'))"""
# The worker has answered every change (handler.js: busy until "idle", queue of later ones).
SETTLED = "() => window.kvwebWorker && !window.kvwebWorker.busy && window.kvwebWorker.queue.length === 0"
# Page-side timing of one change: from the learner's input (the first input, change, key or
# click event after arming, or else the page's first message to the worker; a widget's `change`
# does not leave its shadow root) to the second animation frame after the worker is idle (the
# redrawn frame is on screen), both on the page's clock, so Playwright's own round trips are not
# counted. The harness's wall time is kept beside it as `wall_ms`.
ARM = """() => { window.kvInputAt = null;
  if (!window.kvInputWatch) { window.kvInputWatch = true;
    const seen = (at) => { if (window.kvInputAt === null) window.kvInputAt = at };
    for (const kind of ['input', 'change', 'keydown', 'click'])
      document.addEventListener(kind, (e) => seen(e.timeStamp), true);
    const worker = window.kvwebWorker, post = worker.postMessage.bind(worker);
    worker.postMessage = (message) => { seen(performance.now()); return post(message) } } }"""
PAINTED = """() => new Promise((resolve) => {
  const idle = () => window.kvwebWorker && !window.kvwebWorker.busy && window.kvwebWorker.queue.length === 0;
  const check = () => idle() ? requestAnimationFrame(() => requestAnimationFrame(() =>
    resolve(performance.now() - window.kvInputAt))) : setTimeout(check, 5);
  check() })"""


@contextmanager
def fresh_page(pw, server: SiteServer):  # noqa: ANN001
    """A new Chromium with an empty profile; requests beyond the server are refused and fail the run."""
    server.reset()
    external: list[str] = []
    with tempfile.TemporaryDirectory() as profile:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, viewport={"width": 1440, "height": 900}
        )

        def route(r):  # noqa: ANN001
            if r.request.url.startswith(server.url):
                r.continue_()
            else:
                external.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        try:
            yield context.new_page()
        finally:
            context.close()
    if external:
        raise SystemExit(f"requests beyond 127.0.0.1: {external}")


def wait_live(page: Page) -> int:
    page.wait_for_function(
        "() => document.body && (document.body.dataset.kvwebReady || document.body.dataset.kvwebError)",
        timeout=120_000,
        polling=20,
    )
    if page.evaluate("() => document.body.dataset.kvwebError"):
        raise SystemExit("the site failed to start: " + page.inner_text("#kv-loading"))
    return int(page.evaluate("() => document.body.dataset.kvwebReady"))


def cold_load(pw, server: SiteServer) -> dict:  # noqa: ANN001
    """First paint of the start page and cold load to interactive, in one fresh browser."""
    with fresh_page(pw, server) as page:
        page.goto(server.url, wait_until="commit")
        page.wait_for_function(TOUR_VISIBLE, timeout=120_000, polling=20)
        first_paint_ms = round(page.evaluate("() => performance.now()"))
        ready_ms = wait_live(page)
        timings = page.evaluate("() => window.kvwebTimings")
    return {
        "first_paint_ms": first_paint_ms,
        "ready_ms": ready_ms,
        "app_ms": ready_ms - dict(timings)[APP_PHASE],
        "bytes": sum(server.fetched.values()),
        "files": len(server.fetched),
        "worker_phases": timings,
    }


def versions(site: Path) -> dict[str, str]:
    """Each package the site ships, with its version."""
    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())
    return {name: p["version"] for name, p in lock["packages"].items()}


def floor_site(site: Path) -> Path:
    """build/site-floor, built again when missing or when its packages differ from `site`'s."""
    if not (FLOOR / "index.html").exists() or versions(FLOOR) != versions(site):
        print("building the floor site (scripts/build_site.py floor)", flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_site.py"), "floor"], check=True)
    return FLOOR


def changed(p: param.Parameter, value: object) -> object | None:
    """A small change a learner would make to `value` (None: not changed by the benchmark)."""
    if isinstance(p, Text):
        return None
    if isinstance(p, param.Selector):
        objects = list(p.objects)
        return objects[(objects.index(value) + 1) % len(objects)] if len(objects) > 1 else None
    if isinstance(p, param.Boolean):
        return not value
    lo, hi = p.bounds
    if isinstance(p, param.Integer):
        return value + 1 if value + 1 <= hi else value - 1
    new = round(value * 1.1, 6) if value else round(lo + (hi - lo) / 100, 6)  # 10 % more, or a first step up
    return new if new <= hi else round(value * 0.9, 6)


def set_widget(page: Page, lab: str, name: str, p: param.Parameter, value: object) -> None:
    box = page.locator(f".kv-param-{name}").first
    if isinstance(p, param.Selector):
        box.locator("select").select_option(str(value))
    elif isinstance(p, param.Boolean):
        box.locator("input").click()
    elif box.locator(".noUi-handle").count():  # a slider moves one step per key, as a person moves it
        handle = box.locator(".noUi-handle").first
        now = float(handle.get_attribute("aria-valuenow"))
        handle.focus()
        handle.press("ArrowRight" if value > now else "ArrowLeft")
    else:
        field = box.locator("input").first
        field.fill(str(value))
        field.press("Enter")


def settle(page: Page) -> None:
    page.wait_for_function(SETTLED, timeout=120_000, polling=10)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def timed(page: Page, act: Callable[[], None]) -> tuple[int, int]:
    """(page ms, wall ms) of one change `act` makes: see ARM."""
    page.evaluate(ARM)
    started = time.perf_counter()
    act()
    page.wait_for_timeout(30)  # the change reaches the worker (busy) before idle is awaited
    ms = page.evaluate(PAINTED)  # waits in the page until idle, then two frames
    return round(ms), round((time.perf_counter() - started) * 1000)


def widget_changes(page: Page, server: SiteServer, labs: list[str]) -> list[dict]:
    """Each visible widget of each lab, changed once from the lab's defaults (one page, warm)."""
    rows = []
    for lab_name in labs:
        page.goto(f"{server.url}?lab={lab_name}")
        wait_live(page)
        settle(page)
        lab = LABS[lab_name]()
        for name in param_names(type(lab)):
            p, value = lab.param[name], getattr(lab, name)
            new = changed(p, value)
            box = page.locator(f".kv-param-{name}").first
            if new is None or not box.count() or not box.is_visible():
                continue
            ms, wall = timed(page, lambda: set_widget(page, lab_name, name, p, new))
            rows.append({"lab": lab_name, "widget": name, "to": new, "ms": ms, "wall_ms": wall})
            print(f"  {lab_name:18} {name:16} -> {str(new)[:14]:14} {ms:6d} ms (wall {wall} ms)", flush=True)
            set_widget(page, lab_name, name, p, value)
            page.wait_for_timeout(30)
            settle(page)
        next_step = page.locator(".kv-player button.next")
        if next_step.count() and next_step.first.is_visible():  # an animated view: its player's steps
            page.locator(".kv-player button.first").click()
            settle(page)
            for i in range(STEPS):
                ms, wall = timed(page, next_step.first.click)
                rows.append({"lab": lab_name, "widget": "player next", "to": i + 1, "ms": ms, "wall_ms": wall})
                print(f"  {lab_name:18} player next      -> step {i + 1:<9} {ms:6d} ms (wall {wall} ms)", flush=True)
    return rows


def lab_switches(page: Page, server: SiteServer, labs: list[str]) -> list[dict]:
    """Each lab opened from the lab menu, then the lab before it again (one page, warm)."""
    page.goto(f"{server.url}?lab={labs[0]}")
    wait_live(page)
    settle(page)
    rows = []
    for before, lab_name in zip(labs, labs[1:]):
        for target, kind in ((lab_name, "first visit"), (before, "back"), (lab_name, "back")):
            ms, wall = timed(
                page, lambda: page.locator(".kv-lab-select select").select_option(label=LABS[target].title)
            )
            rows.append({"lab": target, "kind": kind, "ms": ms, "wall_ms": wall})
            print(f"  switch to {target:18} ({kind:11}) {ms:6d} ms (wall {wall} ms)", flush=True)
    return rows


def report_page(pw, server: SiteServer) -> int:  # noqa: ANN001
    with fresh_page(pw, server) as page:
        page.goto(f"{server.url}?page=report", wait_until="commit")
        plain_text(page, "kv-report-status").filter(has_text="ready").wait_for(timeout=300_000)
        page.locator(".kv-report svg").first.wait_for(timeout=60_000)
        return round(page.evaluate("() => performance.now()"))


def table(rows: list[tuple[str, str, str, str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join([lines[0], "-+-".join("-" * w for w in widths), *lines[1:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="cold loads (first paint, interactive) of each site")
    parser.add_argument("--no-floor", action="store_true", help="no cold loads of the floor site")
    parser.add_argument("--labs", nargs="*", default=sorted(LABS), help="labs whose widget changes are timed")
    parser.add_argument("--skip-report", action="store_true")
    parser.add_argument(
        "--switches",
        nargs="*",
        default=sorted(LABS),
        help="labs opened in turn from the lab menu, each followed by a switch back and forth",
    )
    parser.add_argument("--json", action="store_true", help="print every measurement as JSON")
    parser.add_argument(
        "--site",
        type=Path,
        default=ROOT / "build" / "site",
        help="the built site to serve (a copy of an older build: before/after on the same host)",
    )
    args = parser.parse_args()
    site = args.site
    if not (site / "index.html").exists():
        raise SystemExit(f"{site} has no index.html: run scripts/build-site.sh first")
    floor = None if args.no_floor else floor_site(site)
    floor_server = SiteServer(floor) if floor else nullcontext()
    with SiteServer(site) as server, floor_server, sync_playwright() as pw:
        loads, floor_loads = [], []
        for i in range(args.runs):  # alternating, so that both see the host as it is at the time
            loads.append(cold_load(pw, server))
            r = loads[-1]
            print(
                f"cold load {i + 1}: first paint {r['first_paint_ms']} ms, interactive {r['ready_ms']} ms, "
                f"{r['bytes'] / 1e6:.1f} MB in {r['files']} files",
                flush=True,
            )
            if floor:
                floor_loads.append(cold_load(pw, floor_server))
                print(f"floor load {i + 1}: interactive {floor_loads[-1]['ready_ms']} ms", flush=True)
            floor_part = f", the floor's {floor_loads[-1]['app_ms']} ms" if floor else ""
            print(f"  the app's part: {r['app_ms']} ms{floor_part}", flush=True)
        with fresh_page(pw, server) as page:
            changes = widget_changes(page, server, args.labs)
        switches = []
        if len(args.switches) > 1:
            with fresh_page(pw, server) as page:
                switches = lab_switches(page, server, args.switches)
        report_ms = None if args.skip_report else report_page(pw, server)
    first = statistics.median(r["first_paint_ms"] for r in loads) / 1000
    ready = statistics.median(r["ready_ms"] for r in loads) / 1000
    steps = [c for c in changes if c["widget"] == "player next"]
    changes = [c for c in changes if c["widget"] != "player next"]
    slowest = max(changes, key=lambda c: c["ms"]) if changes else None
    over = [c for c in changes if c["ms"] > GOALS_S["widget change"] * 1000]
    rows = [
        ("goal", "target", "measured", "met"),
        (
            "first paint of the start page",
            "1.5 s",
            f"{first:.2f} s (median of {len(loads)})",
            "yes" if first <= GOALS_S["first paint"] else "no",
        ),
        (
            "cold load to interactive",
            "3 s",
            f"{ready:.2f} s (median of {len(loads)})",
            "yes" if ready <= GOALS_S["interactive"] else "no",
        ),
    ]
    if floor_loads:
        for what, key, goal in (("cold load", "ready_ms", f"{FLOOR_RATIO}"), ("its app's part", "app_ms", "-")):
            ours, floors = (statistics.median(r[key] for r in runs) / 1000 for runs in (loads, floor_loads))
            rows.append(
                (
                    f"{what} / the floor's",
                    goal,
                    f"{ours / floors:.2f} ({ours:.2f} s / {floors:.2f} s, medians of {len(loads)} alternating)",
                    "-" if goal == "-" else "yes" if ours / floors <= FLOOR_RATIO else "no",
                )
            )
    if slowest:
        rows.append(
            (
                "every widget change redrawn",
                "1 s",
                f"{len(changes)} changes, median {statistics.median(c['ms'] for c in changes)} ms, slowest "
                f"{slowest['ms']} ms ({slowest['lab']} {slowest['widget']})",
                f"{len(changes) - len(over)}/{len(changes)}",
            )
        )
    if steps:
        slow = max(steps, key=lambda c: c["ms"])
        rows.append(
            (
                "every player step redrawn",
                "-",
                f"{len(steps)} steps, median "
                f"{statistics.median(c['ms'] for c in steps)} ms, slowest {slow['ms']} ms ({slow['lab']})",
                "-",
            )
        )
    for kind in ("first visit", "back"):
        ms = [r["ms"] for r in switches if r["kind"] == kind]
        if ms:
            slow = max((r for r in switches if r["kind"] == kind), key=lambda r: r["ms"])
            rows.append(
                (
                    f"lab switch, {kind}",
                    "-",
                    f"{len(ms)} switches, median {statistics.median(ms):.0f} ms, "
                    f"slowest {slow['ms']} ms ({slow['lab']})",
                    "-",
                )
            )
    if report_ms is not None:
        rows.append(
            (
                "report page fully drawn",
                "8 s",
                f"{report_ms / 1000:.1f} s",
                "yes" if report_ms <= GOALS_S["report"] * 1000 else "no",
            )
        )
    print()
    print(table(rows))
    for c in over:
        print(f"  over 1 s: {c['lab']} {c['widget']} -> {c['to']}: {c['ms']} ms")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        print(
            json.dumps(
                {
                    "loads": loads,
                    "floor_loads": floor_loads,
                    "changes": changes,
                    "steps": steps,
                    "switches": switches,
                    "report_ms": report_ms,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
