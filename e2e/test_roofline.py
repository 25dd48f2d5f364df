"""The served app end to end on the roofline lab: load, widget change, share URL, hostile URL."""
from urllib.parse import parse_qs, urlparse

from conftest import INJECTED, plain_text, set_param, wait_ready


def numbers(page):
    return plain_text(page, "kv-roofline-numbers").inner_text()


def query(page):
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_loads_and_a_widget_change_updates_figure_and_url(page, served_app):
    page.goto(f"{served_app}?lab=roofline")  # with no lab and no page the guided tour opens
    wait_ready(page)
    assert "KV capacity (tokens)" in numbers(page) and "1.26e+04" in numbers(page)  # 12,597 tokens
    assert query(page)["lab"] == "roofline"
    page.locator(".kv-param-gpu select").select_option("A100-80GB")
    page.wait_for_function("() => location.search.includes('gpu=A100-80GB')")
    wait_ready(page)
    # (0.9 * 80e9 - 25,680,199,680) // 819,200 = 56,542 tokens
    plain_text(page, "kv-roofline-numbers").filter(has_text="5.654e+04").wait_for()
    set_param(page, "tokens", "4096")
    page.wait_for_function("() => location.search.includes('tokens=4096')")


def test_share_url_restores_parameters(page, served_app):
    page.goto(f"{served_app}?lab=roofline&gpu=H100-SXM&model=llama-3-8b&block_size=32")
    wait_ready(page)
    assert page.locator(".kv-param-gpu select").input_value() == "H100-SXM"
    assert page.locator(".kv-param-model select").input_value() == "llama-3-8b"
    assert page.locator(".kv-param-block_size input").input_value() == "32"
    assert "128" in numbers(page) and "4.268e+05" in numbers(page)  # 426,788 tokens of 128 KiB
    q = query(page)
    assert q["gpu"] == "H100-SXM" and q["block_size"] == "32"
    assert not plain_text(page, "kv-message").is_visible()


def test_hostile_url_executes_nothing_and_shows_plain_message(page, served_app, guard):
    page.goto(f"{served_app}?lab=roofline&gpu=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"
              "&model=%3Cscript%3Ealert(2)%3C%2Fscript%3E&tokens=1e999&step=%22%3E%3Csvg%20onload%3Dalert(3)%3E")
    wait_ready(page)
    message = plain_text(page, "kv-message")
    message.wait_for()
    text = message.inner_text()
    assert "gpu:" in text and "model:" in text and "tokens:" in text and "using the default" in text
    assert page.locator(".kv-param-gpu select").input_value() == "A100-40GB"
    # nothing from the URL became markup anywhere on the page (shadow roots included)
    assert page.evaluate(INJECTED) == []
    assert guard.dialogs == []
