"""What the e2e tests and the benches that drive a browser share (bench/site_load.py,
bench/served_load.py): Chromium's path and flags, the app under `panel serve`, and reading and
driving a page. A module, not the pytest conftest, so a bench imports it without pytest; it does
not ship (the wheel holds kvweb/ and app/ only)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@contextmanager
def serve_app() -> Iterator[str]:
    """`panel serve app/main.py` on a free port, one process; yields the app's base URL.

    The server's log goes to a file, never to a pipe nobody reads: it writes a few hundred bytes a
    session, and a full pipe (64 KB, a few hundred sessions of the e2e suite) would stop it mid-write."""
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "panel",
            "serve",
            "app/main.py",
            "--address",
            "127.0.0.1",
            "--port",
            str(port),
            "--allow-websocket-origin",
            f"127.0.0.1:{port}",
            "--num-procs",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/main")
        yield f"http://127.0.0.1:{port}/main"
    finally:
        proc.terminate()
        try:  # at exit the server collects its sessions' garbage: 5-10 s at load 12 (issue 39's runs)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def wait_ready(page: Page, timeout: float = 60_000) -> None:
    """Wait until the shell says `ready` (the lab ran and its view is drawn)."""
    plain_text(page, "kv-status").filter(has_text="ready").wait_for(timeout=timeout)


def set_param(page: Page, name: str, value: str) -> None:
    """Type a value into a parameter's text/number box and commit it with Enter."""
    box = page.locator(f".kv-param-{name} input").first
    box.fill(value)
    box.press("Enter")


def open_folds(page: Page) -> None:
    """Open the lab's folded cards: their widgets join the page when a card is first opened
    (app/panes.py `fold`)."""
    for header in page.locator("[class*='kv-fold-'] .card-header").all():
        header.click()


def plain_text(page: Page, css_class: str):
    """Locator of the text inside an `app.text.plain` Div or `LiveText` (in a shadow root)."""
    return page.locator(f".{css_class} .bk-clearfix, .{css_class} .kv-text")


# Elements that would exist only if text from a URL had become markup (shadow roots included).
INJECTED = """() => {
    const seen = [];
    const walk = (root) => root.querySelectorAll('*').forEach(el => {
        if (['IMG', 'SCRIPT', 'SVG', 'IFRAME'].includes(el.tagName.toUpperCase()) &&
            (el.getAttribute('onerror') || el.getAttribute('onload') || /alert\\(\\d+\\)/.test(el.textContent || '')))
            seen.push(el.outerHTML);
        if (el.shadowRoot) walk(el.shadowRoot);
    });
    walk(document);
    return seen;
}"""


def nudge_slider(page: Page, name: str, key: str = "ArrowRight") -> None:
    """Move a parameter's slider one step with the keyboard, as a user would."""
    handle = page.locator(f".kv-param-{name} .noUi-handle").first
    handle.focus()
    handle.press(key)


def table_rows(page: Page, css_class: str) -> list[list[str]]:
    """The text of each row of a results table (a Bokeh DataTable) as a person reads it: the
    rendered cells, in row order. A table with a fixed first column draws each row in two grids
    (its first cell, then the others: app/view.py `TextTable`): one row here."""
    page.locator(f".{css_class} .slick-row").first.wait_for()
    return page.locator(f".{css_class} .slick-row").evaluate_all(
        "rows => { const byTop = new Map();"
        " for (const r of rows) byTop.set(r.offsetTop, [...(byTop.get(r.offsetTop) ?? []),"
        " ...Array.from(r.querySelectorAll('.slick-cell')).map(c => c.innerText)]);"
        " return [...byTop.entries()].sort((a, b) => a[0] - b[0]).map(([top, cells]) => cells) }"
    )


def wait_until(check: Callable[[], bool], timeout_s: float = 60) -> bool:
    """Poll `check` (it reads the page) until it holds or the time is up; its last answer."""
    deadline = time.monotonic() + timeout_s
    while not (ok := check()) and time.monotonic() < deadline:
        time.sleep(0.25)
    return ok


def table_header(page: Page, css_class: str) -> list[str]:
    """A results table's column titles, as rendered."""
    return page.locator(f".{css_class} .slick-column-name").all_inner_texts()


# The models reachable from the document's roots, as BokehJS itself recomputes them: its
# `all_models` drops a detached model (the lab just left, a replaced source) only 30 s after the
# change (Document's recompute_timeout), so reading it, a state restored by Back matched the
# recorded one only after that wait.
FINGERPRINT = """() => {
    const doc = Bokeh.documents[0], parts = [], attached = new Set();
    for (const root of doc.all_roots ?? doc.roots()) for (const m of root.references()) attached.add(m);
    for (const m of attached) {
        if (m.data === undefined || m.selected === undefined) continue;
        const data = m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
        parts.push(JSON.stringify(Object.keys(data).sort().map(k => [k, Array.from(data[k] ?? [])])));
    }
    return parts.sort().join('|');
}"""


def data_fingerprint(page: Page) -> str:
    """Every ColumnDataSource's data in the page's Bokeh document (its roots' models), as one string."""
    return page.evaluate(FINGERPRINT)


def wait_new_data(page: Page, before: str, timeout: float = 30_000) -> None:
    """Wait until the page's data differs from `before` (a `data_fingerprint`): a loaded machine
    can show the status line's "ready" before the page has applied the redraw's data."""
    page.wait_for_function(f"before => ({FINGERPRINT})() !== before", arg=before, timeout=timeout)
