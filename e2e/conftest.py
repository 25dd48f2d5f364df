"""Shared e2e fixtures: the app under `panel serve`, and a Chromium page that may only
talk to 127.0.0.1 (every other request is aborted and counted; the count must be zero). What
the tests call on a page is in support.py (the benches that drive a browser import it too); the
tests import it from here, beside the fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    INJECTED,
    data_fingerprint,
    nudge_slider,
    open_folds,
    plain_text,
    serve_app,
    set_param,
    table_header,
    table_rows,
    wait_new_data,
    wait_ready,
    wait_until,
)


@pytest.fixture(scope="session")
def served_app() -> Iterator[str]:
    """Base URL of the app under `panel serve` (append `?lab=...`)."""
    with serve_app() as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Guard:
    """Counts requests not aimed at 127.0.0.1 (aborted) and browser dialogs (dismissed)."""

    def __init__(self) -> None:
        self.external: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []


@pytest.fixture
def guard() -> Guard:
    return Guard()


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: Browser, guard: Guard) -> Iterator[Page]:
    """A fresh context's page; parametrized indirectly, the param is more context options
    (e.g. `{"service_workers": "block"}`)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, **getattr(request, "param", {}))

    def route(r):  # noqa: ANN001
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            r.continue_()
        else:
            guard.external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    p = context.new_page()
    p.on("dialog", lambda d: (guard.dialogs.append(d.message), d.dismiss()))
    p.on("pageerror", lambda e: guard.errors.append(str(e)))
    yield p
    context.close()
    assert guard.external == [], f"requests beyond 127.0.0.1: {guard.external}"
    assert guard.dialogs == [], f"dialogs opened (script ran?): {guard.dialogs}"
