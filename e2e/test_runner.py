"""A long run under `panel serve`: the progress bar moves, and cancel stops it at once."""
from conftest import plain_text, wait_ready


def test_long_run_shows_progress_and_can_be_cancelled(page, served_app):
    # the max-rate search over 5000 requests of scenario B takes seconds, not milliseconds
    page.goto(f"{served_app}?lab=max-rate&scenario=B&requests=5000")
    bar = page.locator("progress.kv-progress")
    bar.wait_for(state="visible", timeout=30_000)
    for _ in range(100):  # the lab's progress reports reach the bar while it runs
        if int(bar.get_attribute("value") or 0) > 0:
            break
        page.wait_for_timeout(100)
    assert 0 < int(bar.get_attribute("value")) < 1000
    page.locator(".kv-cancel button").click()
    plain_text(page, "kv-message").filter(has_text="run cancelled").wait_for(timeout=10_000)
    wait_ready(page)
    assert not bar.is_visible()
    # the app still answers: another lab runs to the end
    page.locator(".kv-lab-select select").select_option(label="Paper GPU (roofline)")
    page.locator(".kv-roofline-numbers .slick-cell", has_text="KV capacity (tokens)").wait_for()
