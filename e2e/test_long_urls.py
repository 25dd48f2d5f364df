"""Long URLs on both faces (issue 39): a query of 1,000 unknown keys opens its lab with one message,
and a query as long as browsers send (32 KB, thousands of keys) opens the tour with one message
naming the app's limit. Under `panel serve`, Tornado answered both with HTTP 400 and an empty page
(over 1000 fields) before kvweb saw them (app/site/location.py `read_long_queries`). Keys from the
URL are shown as text, never markup."""

from urllib.parse import parse_qsl, quote

import pytest
from conftest import INJECTED, plain_text, wait_ready
from site_fixtures import static_site, site_server, wait_live  # noqa: F401  (fixtures)

from app.route import MAX_QUERY, URL_EXTRAS
from kvweb.query import from_query

THOUSAND_KEYS = "lab=roofline&" + quote("<svg onload=1>") + "=" + "".join(f"&k{i}=" for i in range(1, 1000))
BROWSER_SIZED = "lab=roofline" + "".join(f"&k{i}=" for i in range(4700))  # 31,802 characters


def open_query(page, face: str, query: str, request) -> None:
    base = request.getfixturevalue("served_app" if face == "served" else "static_site")
    page.goto(f"{base}?{query}")
    if face == "site":
        wait_live(page)  # Python starts in the page first


@pytest.mark.parametrize("face", ["served", "site"])
def test_a_thousand_unknown_keys_open_the_lab_with_one_message(page, guard, request, face):
    open_query(page, face, THOUSAND_KEYS, request)
    wait_ready(page)
    lines = plain_text(page, "kv-message").inner_text().splitlines()
    assert lines == from_query(dict(parse_qsl(THOUSAND_KEYS, keep_blank_values=True)), ignore=URL_EXTRAS)[1]
    assert lines[0].startswith("1000 unknown parameters for lab roofline ignored: '<svg onload=1>', 'k1', 'k2',")
    assert page.evaluate("() => new URLSearchParams(location.search).get('lab')") == "roofline"
    assert page.evaluate(INJECTED) == [] and guard.errors == []


def test_a_query_as_long_as_browsers_send_gets_the_apps_message(page, guard, request):
    open_query(page, "served", BROWSER_SIZED, request)  # the static site's: e2e/test_hostile.py
    page.locator(".kv-tour").wait_for()
    text = plain_text(page, "kv-message").inner_text()
    assert text == f"the URL query is {len(BROWSER_SIZED) + 1} characters long; at most {MAX_QUERY} are read"
    assert guard.errors == []
