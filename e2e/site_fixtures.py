"""Fixtures for the static site (build/site/, Python in the browser through Pyodide).

The site must have been built (scripts/build-site.sh; the README's test command does it
first): a missing site fails the tests, it does not skip them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page
from site_server import SiteServer  # scripts/site_server.py (pytest's pythonpath)

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "site"


@pytest.fixture(scope="session")
def site_server() -> Iterator[SiteServer]:
    if not (SITE / "index.html").exists():
        pytest.fail(f"{SITE}/index.html is missing: build the static site with scripts/build-site.sh", pytrace=False)
    with SiteServer(SITE) as server:
        yield server


@pytest.fixture
def static_site(site_server: SiteServer) -> Iterator[str]:
    """Base URL of the static site (append `?lab=...`); no file it asks for may be missing."""
    site_server.reset()
    yield site_server.url
    assert site_server.failed == [], f"the site asked for files it does not have: {site_server.failed}"


def wait_live(page: Page, timeout: float = 90_000) -> None:
    """Wait until Python in the page's worker has drawn the app (or fail with its message)."""
    page.wait_for_function(
        "() => document.body.dataset.kvwebReady || document.body.dataset.kvwebError", timeout=timeout
    )
    error = page.evaluate(
        "() => document.body.dataset.kvwebError && document.querySelector('#kv-loading .kv-loading-msg').textContent"
    )
    assert not error, error
