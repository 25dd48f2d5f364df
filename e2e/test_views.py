"""Labs whose views have no test of their own: each opens from its URL, and changing a
widget reruns the lab, redraws its figures and updates the URL, with no message shown."""

import pytest

from conftest import data_fingerprint, nudge_slider, plain_text, set_param, table_rows, wait_new_data, wait_ready

CASES = [  # lab, URL query, how a user changes it, what the URL says afterwards
    ("beam-search", "", lambda p: nudge_slider(p, "width"), "width=5"),
    ("max-rate", "&requests=100", lambda p: set_param(p, "requests", "60"), "requests=60"),
    (
        "cache-sweep",
        "",
        lambda p: p.locator(".kv-param-workload select").select_option("multi-turn"),
        "workload=multi-turn",
    ),
    (
        "prefill-savings",
        "",
        lambda p: p.locator(".kv-param-workload select").select_option("multi-turn"),
        "workload=multi-turn",
    ),
    (
        "prefix-hash",
        "",
        lambda p: p.locator(".kv-param-workload select").select_option("multi-turn"),
        "workload=multi-turn",
    ),
    ("plan", "&requests=50&replicas=1", lambda p: set_param(p, "requests", "40"), "requests=40"),
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
    wait_new_data(page, before)
    assert data_fingerprint(page) != before
    assert not plain_text(page, "kv-message").is_visible()
    assert guard.errors == []


def test_the_sweep_table_shows_the_library_figures_in_cells_and_chinese_headers(page, served_app):
    from kvweb.lab import LABS
    import kvweb.labs  # noqa: F401

    params = {"sweep": "watermark", "requests": 40, "rate": 5}
    rows = LABS["sweep"](**params).run()["rows"]
    page.goto(f"{served_app}?lab=sweep&" + "&".join(f"{k}={v}" for k, v in params.items()))
    wait_ready(page)
    shown = table_rows(page, "kv-sweep-table")
    assert [r[:3] for r in shown] == [
        [f"{r['watermark']:.4g}", f"{r['throughput_tok_s']:,.0f}", f"{100 * r['slo_attainment']:.1f} %"] for r in rows
    ]  # one cell per figure
    headers = page.locator(".kv-sweep-table .slick-column-name").all_inner_texts()
    assert headers[:3] == ["watermark", "throughput (tokens/s)", "SLO attainment"]
    page.goto(f"{served_app}?lab=sweep&lang=zh&" + "&".join(f"{k}={v}" for k, v in params.items()))
    plain_text(page, "kv-status").filter(has_text="就绪").wait_for(timeout=60_000)
    page.locator(".kv-sweep-table .slick-column-name", has_text="吞吐量").wait_for()
    headers = page.locator(".kv-sweep-table .slick-column-name").all_inner_texts()
    assert headers[1:3] == ["吞吐量 (throughput)（token/s）", "SLO 达成率"]
    assert [r[:3] for r in table_rows(page, "kv-sweep-table")] == [r[:3] for r in shown]  # same figures
