"""A long run can be stopped: under `panel serve` (the cancel button kills the child process that
computes it: app/child.py) and in the static site (the page interrupts Python where it is cross-origin
isolated, else starts a fresh worker); either way the app goes back to the URL's state."""

import pytest
from conftest import plain_text, set_param, wait_ready
from site_fixtures import site_server, static_site, wait_live  # noqa: F401  (fixtures)

# A cache sweep of 1250 few-shot requests at 11 capacities: with 8 in the waiting queue it takes
# seconds; with 745 (about 16 s of work by its estimate, within the 20 s budget) it computes long
# enough to be stopped.
LIGHT = "lab=cache-sweep&workload=few-shot&tasks=25&per_task=50&points=11&queue=8"
HEAVY_QUEUE = "745"


def test_long_run_shows_progress_and_can_be_cancelled(page, served_app):
    page.goto(f"{served_app}?{LIGHT}")
    wait_ready(page)
    before = page.evaluate("() => location.search")
    set_param(page, "queue", HEAVY_QUEUE)
    bar = page.locator("progress.kv-progress")
    bar.wait_for(state="visible", timeout=30_000)
    for _ in range(100):  # the lab's progress reports reach the bar while it runs
        if int(bar.get_attribute("value") or 0) > 0:
            break
        page.wait_for_timeout(100)
    assert 0 < int(bar.get_attribute("value")) < 1000
    assert "%" in plain_text(page, "kv-progress-text").inner_text()
    page.locator(".kv-cancel button").click()
    plain_text(page, "kv-message").filter(has_text="run cancelled").wait_for(timeout=10_000)
    wait_ready(page)
    assert not bar.is_visible()
    assert page.evaluate("() => location.search") == before and queue_shown(page) == "8"
    # the app still answers: another lab runs to the end
    page.locator(".kv-lab-select select").select_option(label="Paper GPU (roofline)")
    page.locator(".kv-roofline-numbers .slick-cell", has_text="KV capacity (tokens)").wait_for()


def queue_shown(page) -> str:
    return page.locator(".kv-param-queue input").first.input_value()


@pytest.mark.parametrize(
    "page, isolated",
    [({"service_workers": "allow"}, True), ({"service_workers": "block"}, False)],
    indirect=["page"],
    ids=["isolated", "fresh-worker"],
)
def test_a_long_run_in_the_static_site_can_be_stopped(page, static_site, isolated):
    url = f"{static_site}?{LIGHT}"
    page.goto(url)
    wait_live(page)
    if isolated:  # the first visit registers the service worker; from the next one on it isolates the page
        page.evaluate("() => navigator.serviceWorker.ready.then(() => null)")
        page.goto(url)
        wait_live(page)
    assert page.evaluate("() => crossOriginIsolated") is isolated
    wait_ready(page)
    before, loaded = page.evaluate("() => [location.search, document.body.dataset.kvwebReady]")
    set_param(page, "queue", HEAVY_QUEUE)
    page.locator("progress.kv-progress").wait_for(state="visible", timeout=60_000)
    page.locator(".kv-cancel button").click()
    if isolated:  # Python stopped where it was, and says so
        plain_text(page, "kv-message").filter(has_text="run cancelled").wait_for(timeout=30_000)
    else:  # a fresh worker draws the URL's state: about a cold load
        page.wait_for_function(
            "before => (document.body.dataset.kvwebReady ?? before) !== before", arg=loaded, timeout=90_000
        )
    wait_ready(page)
    assert page.evaluate("() => location.search") == before and queue_shown(page) == "8"
    set_param(page, "queue", "9")  # and the page still answers
    page.wait_for_function("() => location.search.includes('queue=9')", timeout=60_000)
    wait_ready(page)
