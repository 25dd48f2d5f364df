"""Cold load of the static site (build/site/) to interactive, in headless Chromium.

Each run starts a new Chromium with a fresh profile (empty HTTP and code caches), serves
build/site on 127.0.0.1, opens it, and waits until Python in the worker has drawn the app
(`body[data-kvweb-ready]`, the time in ms since navigation started). On the roofline lab
it then changes the GPU and times the round trip through the worker to a redrawn figure.
Bytes are counted by the server. Figures are recorded in docs/site.md.

    .venv/bin/python bench/site_load.py [--runs 5] [--query '?lab=roofline'] [--json]
    .venv/bin/python bench/site_load.py --query ''      # the landing page
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "e2e"))
from conftest import CHROMIUM, CHROMIUM_ARGS, plain_text  # noqa: E402
from site_server import SiteServer  # noqa: E402


def one_run(pw, server: SiteServer, query: str) -> dict:  # noqa: ANN001
    server.reset()
    external: list[str] = []
    with tempfile.TemporaryDirectory() as profile:
        context = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                        viewport={"width": 1400, "height": 1000})

        def route(r):  # noqa: ANN001
            if r.request.url.startswith(server.url):
                r.continue_()
            else:
                external.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page = context.new_page()
        page.goto(server.url + query, wait_until="commit")
        page.wait_for_function("() => document.body && (document.body.dataset.kvwebReady || document.body.dataset.kvwebError)",
                               timeout=120_000, polling=50)
        if page.evaluate("() => document.body.dataset.kvwebError"):
            raise SystemExit("the site failed to start: " + page.inner_text("#kv-loading"))
        ready_ms = int(page.evaluate("() => document.body.dataset.kvwebReady"))
        timings = page.evaluate("() => window.kvwebTimings")
        load_bytes = sum(server.fetched.values())
        round_trip_ms = None
        if page.locator(".kv-param-gpu select").count():  # the roofline lab is shown
            started = time.perf_counter()
            page.locator(".kv-param-gpu select").select_option("A100-80GB")
            plain_text(page, "kv-roofline-numbers").filter(has_text="5.591e+04").wait_for(timeout=60_000)
            round_trip_ms = round((time.perf_counter() - started) * 1000)
        context.close()
    if external:
        raise SystemExit(f"requests beyond 127.0.0.1: {external}")
    return {"ready_ms": ready_ms, "bytes": load_bytes, "files": len(server.fetched),
            "round_trip_ms": round_trip_ms, "worker_phases": timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--query", default="?lab=roofline")
    parser.add_argument("--json", action="store_true", help="print every run as JSON")
    args = parser.parse_args()
    site = ROOT / "build" / "site"
    if not (site / "index.html").exists():
        raise SystemExit("build/site is missing: run scripts/build-site.sh first")
    runs = []
    with SiteServer(site) as server, sync_playwright() as pw:
        for i in range(args.runs):
            runs.append(one_run(pw, server, args.query))
            r = runs[-1]
            phases = "  ".join(f"{msg} @{ms}" for msg, ms in r["worker_phases"])
            print(f"run {i + 1}: interactive {r['ready_ms'] / 1000:.2f} s, {r['bytes'] / 1e6:.1f} MB in {r['files']} files, "
                  f"GPU change {r['round_trip_ms']} ms | worker ms: {phases}", flush=True)
    ready = statistics.median(r["ready_ms"] for r in runs) / 1000
    trips = [r["round_trip_ms"] for r in runs if r["round_trip_ms"] is not None]
    trip = f"{statistics.median(trips):.0f} ms" if trips else "not measured (no roofline lab on this page)"
    print(f"median of {len(runs)}: cold load to interactive {ready:.2f} s "
          f"(min {min(r['ready_ms'] for r in runs) / 1000:.2f}, max {max(r['ready_ms'] for r in runs) / 1000:.2f}), "
          f"{statistics.median(r['bytes'] for r in runs) / 1e6:.1f} MB fetched, widget round trip {trip}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
