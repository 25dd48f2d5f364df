"""Labs whose views have no test of their own: each opens from its URL, and changing a
widget reruns the lab, redraws its figures and updates the URL, with no message shown."""
import pytest

from conftest import data_fingerprint, nudge_slider, plain_text, set_param, wait_ready

CASES = [  # lab, URL query, how a user changes it, what the URL says afterwards
    ("beam-search", "", lambda p: nudge_slider(p, "width"), "width=5"),
    ("max-rate", "&requests=100", lambda p: set_param(p, "requests", "60"), "requests=60"),
    ("cache-sweep", "", lambda p: p.locator(".kv-param-workload select").select_option("multi-turn"), "workload=multi-turn"),
    ("prefill-savings", "", lambda p: p.locator(".kv-param-workload select").select_option("multi-turn"), "workload=multi-turn"),
    ("prefix-hash", "", lambda p: p.locator(".kv-param-workload select").select_option("multi-turn"), "workload=multi-turn"),
]


@pytest.mark.parametrize("lab, query, change, expect", CASES, ids=[c[0] for c in CASES])
def test_widget_change_redraws(page, served_app, guard, lab, query, change, expect):
    page.goto(f"{served_app}?lab={lab}{query}")
    wait_ready(page)
    before = data_fingerprint(page)
    assert before, "the view drew no data"
    change(page)
    page.wait_for_function(f"() => location.search.includes('{expect}')")
    wait_ready(page)
    assert data_fingerprint(page) != before
    assert not plain_text(page, "kv-message").is_visible()
    assert guard.errors == []
