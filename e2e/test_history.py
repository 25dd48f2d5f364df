"""Back and Forward restore what the URL says, on the served app and on the static site: the
lab, its widgets, the animation step and the figures' data. Only a lab or page change adds a
history entry; a widget change or a step replaces the current one; after a reload the
same state shows and Forward still works. A lab the tour opened
leads back to the tour and on to its next step."""

from urllib.parse import parse_qs, urlparse

import pytest
from conftest import data_fingerprint, plain_text, set_param, wait_ready
from site_fixtures import site_server, static_site, wait_live  # noqa: F401  (fixtures)

from app.pages.tour import STEPS


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def length(page) -> int:
    return page.evaluate("history.length")


def wait_state(page, expected: dict[str, str], data: str) -> None:
    """Wait until the URL is `expected` and every figure's data is `data` again."""
    page.wait_for_function(
        "q => location.search === q", arg="?" + "&".join(f"{k}={v}" for k, v in expected.items()), timeout=60_000
    )
    for _ in range(300):
        if data_fingerprint(page) == data:
            return
        page.wait_for_timeout(100)
    assert data_fingerprint(page) == data


def back_and_forward(page, base: str, static: bool) -> None:
    page.goto(f"{base}?lab=block-tables")
    if static:
        wait_live(page)
    wait_ready(page)
    start = length(page)
    set_param(page, "num_blocks", "16")  # a widget change
    page.wait_for_function("() => location.search.includes('num_blocks=16')")
    wait_ready(page)
    step = int(query(page)["step"])  # (block tables open on their opening step, 1: not 0)
    page.locator(".kv-player .next").click()  # an animation step
    page.wait_for_function("s => new URLSearchParams(location.search).get('step') === s", arg=str(step + 1))
    page.wait_for_timeout(500)
    tables, tables_data = query(page), data_fingerprint(page)
    assert tables["num_blocks"] == "16" and length(page) == start  # replaced, not added
    page.locator(".kv-lab-select select").select_option(label="Paper GPU (roofline)")
    page.wait_for_function("() => location.search.includes('lab=roofline')")
    wait_ready(page)
    page.locator(".kv-param-gpu select").select_option("A100-80GB")
    page.wait_for_function("() => location.search.includes('gpu=A100-80GB')")
    wait_ready(page)
    page.wait_for_timeout(500)
    roofline, roofline_data = query(page), data_fingerprint(page)
    assert length(page) == start + 1  # one lab change: one entry
    page.go_back()
    wait_state(page, tables, tables_data)
    assert page.locator(".kv-param-num_blocks input").input_value() == "16"
    assert page.locator(".kv-lab-select select").input_value() == "Block tables"
    page.go_forward()
    wait_state(page, roofline, roofline_data)
    assert page.locator(".kv-param-gpu select").input_value() == "A100-80GB"
    page.go_back()
    wait_state(page, tables, tables_data)
    assert length(page) == start + 1
    page.reload()  # the same state, and the entries from before the reload still work
    if static:
        wait_live(page)
    wait_ready(page)
    wait_state(page, tables, tables_data)
    page.go_forward()
    wait_state(page, roofline, roofline_data)
    assert page.locator(".kv-lab-select select").input_value() == "Paper GPU (roofline)"


def test_back_and_forward_restore_the_served_app(page, served_app):
    back_and_forward(page, served_app, static=False)


# Without the service worker: a first visit's reload is the first isolated load (docs/site.md,
# "Stopping a run"), and the entries from before it then load the page anew.
@pytest.mark.parametrize("page", [{"service_workers": "block"}], indirect=True)
def test_back_and_forward_restore_the_static_site(page, static_site):
    back_and_forward(page, static_site, static=True)


def test_a_lab_opened_by_the_tour_leads_back_and_on(page, served_app):
    page.goto(served_app)
    page.locator(".kv-tour-1-0 button").click()  # step 2, its first lab
    page.wait_for_function("() => location.search.includes('tour=2')")
    wait_ready(page)
    start = length(page)
    next_step = page.locator(".kv-tour-next button")
    assert next_step.inner_text().strip() == f"Next step: 3. {STEPS[2].title} →"
    next_step.click()
    lab = STEPS[2].links[0][1]["lab"]
    page.wait_for_function(f"() => location.search.includes('lab={lab}') && location.search.includes('tour=3')")
    wait_ready(page)
    assert length(page) == start + 1
    page.locator(".kv-tour-back button").click()
    page.wait_for_function("() => location.search.startsWith('?page=tour')")
    page.locator(".kv-tour-2-0").wait_for()
    page.go_back()
    page.wait_for_function("() => location.search.includes('tour=3')")
    page.locator(".kv-tour-next button").wait_for()


def test_an_out_of_range_value_is_refused_visibly(page, served_app):
    page.goto(f"{served_app}?lab=block-tables")
    wait_ready(page)
    set_param(page, "num_blocks", "100000")
    box = page.locator(".kv-param-num_blocks input").first
    message = plain_text(page, "kv-message")
    message.filter(has_text="num_blocks").wait_for(timeout=30_000)
    assert "num_blocks" in message.inner_text() and "100000" in message.inner_text()
    page.wait_for_function("el => el.value === '12'", arg=box.element_handle())
    assert query(page)["num_blocks"] == "12"


def tour_open_and_back(page, base: str, static: bool) -> None:
    """A tour step's Open adds a history entry: Back from the lab it opened lands on the tour."""
    page.goto(base)
    if static:
        wait_live(page)
    page.locator(".kv-tour-1-0 button").wait_for()
    start = length(page)
    page.locator(".kv-tour-1-0 button").click()
    page.wait_for_function("() => location.search.includes('tour=2')")
    wait_ready(page)
    assert length(page) == start + 1
    page.go_back()
    page.wait_for_function("() => !location.search.includes('lab=')")
    page.locator(".kv-tour-1-0 button").wait_for()


def test_the_tours_open_adds_an_entry_on_the_served_app(page, served_app):
    tour_open_and_back(page, served_app, static=False)


@pytest.mark.parametrize("page", [{"service_workers": "block"}], indirect=True)
def test_the_tours_open_adds_an_entry_on_the_static_site(page, static_site):
    tour_open_and_back(page, static_site, static=True)
